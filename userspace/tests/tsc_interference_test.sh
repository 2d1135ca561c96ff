#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tsc-interference: bad arguments exit 2; a command that sleeps costs
# nothing; competing spinners pinned to the same CPU cost what the
# scheduler's fair share says (one: about half, two: about two thirds),
# and the sweep table orders them; the JSON validates.
#
# Usage: tsc_interference_test.sh TOOL SCHEMA

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../selftests/ktap.sh"
tool=${1:?usage: tsc_interference_test.sh TOOL SCHEMA}
schema=${2:?usage}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

json() { python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$1"; }
cpu=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')

ktap_plan 12
"$tool" --help | grep -q '^Usage: tsc-interference'
ktap_check "--help prints the usage" test "${PIPESTATUS[0]}" = 0
for args in "--sweep 1,2" "-- echo {}" "--cpu 4095" "--seconds 0" "--runs 0" "--sweep , -- echo {}"; do
	# shellcheck disable=SC2086 # the words are separate arguments on purpose
	"$tool" $args > /dev/null 2> "$tmp/err"; st=$?
	echo "# $args: $(head -n 1 "$tmp/err")"
	ktap_check "'$args': exit 2 with a message" test $st = 2 -a -s "$tmp/err"
done

run() { "$tool" --cpu "$cpu" --seconds 0.2 --runs 3 --json "$@"; }

run -- sleep 60 > "$tmp/sleep.json"
echo "# sleep alongside: $(json "$tmp/sleep.json" 'j["rows"][0]["lost_percent"]')% lost"
ktap_check "a sleeping command costs under 10%" test \
	"$(json "$tmp/sleep.json" 'int(j["rows"][0]["lost_percent"] < 10)')" = 1
ktap_check "the JSON validates against the schema" python3 -c 'import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))' "$tmp/sleep.json" "$schema"

# {} spinners pinned to our CPU, all stopped together on SIGINT.
run --sweep 1,2 -- taskset -c "$cpu" sh -c \
	'trap "kill 0" INT TERM; for i in $(seq {}); do sh -c "while :; do :; done" & done; wait' \
	> "$tmp/sweep.json"
lost=$(json "$tmp/sweep.json" '" ".join("%.1f" % r["lost_percent"] for r in j["rows"])')
echo "# 1 and 2 spinners alongside: $lost % lost"
read -r one two <<< "$lost"
ktap_check "one competing spinner takes 35-65%" python3 -c "import sys; sys.exit(not 35 <= $one <= 65)"
ktap_check "two take 50-80%, more than one" python3 -c "import sys; sys.exit(not (50 <= $two <= 80 and $two > $one))"
ktap_check "no spinner is left behind" test -z "$(pgrep -f 'while :; do :; done')"
ktap_finish
