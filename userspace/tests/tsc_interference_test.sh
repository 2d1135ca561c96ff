#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tsc-interference: bad arguments exit 2; a command that sleeps costs
# nothing; competing spinners pinned to the same CPU cost what the
# scheduler's fair share says (one: about half, two: about two thirds),
# and the sweep table orders them; the JSON validates.
#
# Usage: tsc_interference_test.sh TOOL SCHEMA

. "$(dirname "$0")/tools_lib.sh"
tool=${1:?usage: tsc_interference_test.sh TOOL SCHEMA}
schema=${2:?usage}

cpu=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')

ktap_plan 12
"$tool" --help | grep -q '^Usage: tsc-interference'
ktap_check "--help prints the usage" test "${PIPESTATUS[0]}" = 0
usage_errors "$tool" "--sweep 1,2" "-- echo {}" "--cpu 4095" "--seconds 0" "--runs 0" \
	"--sweep , -- echo {}"

# A count measures the command only while the CPU's capacity stays the
# same.  In a guest with more vCPUs than the host has CPUs, the host takes
# a vCPU away for a second or more now and then: seen in the 6.1 4-vCPU
# guest on an AMD EPYC host, a sleeping command "cost" 10% and 28%, and
# the baseline after a run came out 40% below the one before.  So a run
# counts only if its two baselines (before and after, each the median of
# five counts of 0.2 s) agree within 5%, and, as with the IRQ-off bound,
# the best of up to three such runs is held to the bound: a tool that
# charged a sleeping command 10% would do so in all three.  When the host
# never holds still for a run, the check is skipped, and says so.  On the
# hosts and in 1- and 2-vCPU guests the baselines agree within 3%.
run() { "$tool" --cpu "$cpu" --seconds 0.2 --runs 5 --json "$@"; }
drift() { json "$1" '"%.1f" % ((1 - j["baseline_after"] / j["baseline_before"]) * 100)'; }
steady() { json "$1" 'int(abs(1 - j["baseline_after"] / j["baseline_before"]) < 0.05)'; }

# $1: the JSON to keep; the rest: the command.  Succeeds with a steady
# run in $1, which the caller's check $check (a Python expression over j)
# accepts, if any of three does; else leaves the last steady one, or none.
best_of_three() {
	local out=$1 try
	shift
	rm -f "$out"
	for try in 1 2 3; do
		run "$@" > "$tmp/try.json"
		echo "# try $try: lost $(json "$tmp/try.json" '" ".join("%.1f%%" % r["lost_percent"] for r in j["rows"])'), baseline moved $(drift "$tmp/try.json")%"
		[ "$(steady "$tmp/try.json")" = 1 ] || continue
		cp "$tmp/try.json" "$out"
		[ "$(json "$out" "int($check)")" = 1 ] && return 0
	done
	return 1
}

check='j["rows"][0]["lost_percent"] < 10'
best_of_three "$tmp/sleep.json" -- sleep 60
if [ -e "$tmp/sleep.json" ]; then
	echo "# sleep alongside: $(json "$tmp/sleep.json" 'j["rows"][0]["lost_percent"]')% lost"
	ktap_check "a sleeping command costs under 10%" test "$(json "$tmp/sleep.json" "int($check)")" = 1
	ktap_check "the JSON validates against the schema" valid_json "$tmp/sleep.json" "$schema"
else
	ktap_skip "a sleeping command costs under 10%" "the baseline moved by 5% or more in three runs: the host took the CPU"
	ktap_check "the JSON validates against the schema" valid_json "$tmp/try.json" "$schema"
fi

# {} spinners pinned to our CPU, all stopped together on SIGINT.  The
# scheduler's fair share: one takes half, two take two thirds.
check='35 <= j["rows"][0]["lost_percent"] <= 65 and 50 <= j["rows"][1]["lost_percent"] <= 80 and j["rows"][1]["lost_percent"] > j["rows"][0]["lost_percent"]'
best_of_three "$tmp/sweep.json" --sweep 1,2 -- taskset -c "$cpu" sh -c \
	'trap "kill 0" INT TERM; for i in $(seq {}); do sh -c "while :; do :; done" & done; wait'
if [ -e "$tmp/sweep.json" ]; then
	lost=$(json "$tmp/sweep.json" '" ".join("%.1f" % r["lost_percent"] for r in j["rows"])')
	echo "# 1 and 2 spinners alongside: $lost % lost"
	read -r one two <<< "$lost"
	ktap_check "one competing spinner takes 35-65%" python3 -c "import sys; sys.exit(not 35 <= $one <= 65)"
	ktap_check "two take 50-80%, more than one" python3 -c "import sys; sys.exit(not (50 <= $two <= 80 and $two > $one))"
else
	for c in "one competing spinner takes 35-65%" "two take 50-80%, more than one"; do
		ktap_skip "$c" "the baseline moved by 5% or more in three runs: the host took the CPU"
	done
fi
ktap_check "no spinner is left behind" test -z "$(pgrep -f 'while :; do :; done')"
ktap_finish
