#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tsc-jitter: bad arguments exit 2 before anything runs; stalls of known
# length, injected by a SCHED_FIFO helper on the same CPU, are found with
# the right duration, in the dump and in the JSON; the JSON validates; the
# statistics are ordered as statistics must be.
#
# Usage: tsc_jitter_test.sh TOOL INJECTOR SCHEMA

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../selftests/ktap.sh"
tool=${1:?usage: tsc_jitter_test.sh TOOL INJECTOR SCHEMA}
inject=${2:?usage}
schema=${3:?usage}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

json() { python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$1"; }

ktap_plan 16
"$tool" --help | grep -q '^Usage: tsc-jitter'
ktap_check "--help prints the usage" test "${PIPESTATUS[0]}" = 0
for args in "--cores 9-2" "--cores a" "--cores 4095" "--cores 0,,1" "--runtime -1" \
	    "--runtime 0" "--runtime 1e9" "--threshold 0" "--threshold abc" "--bogus"; do
	# shellcheck disable=SC2086 # the words are separate arguments on purpose
	"$tool" $args --dump "$tmp/never" > /dev/null 2> "$tmp/err"; st=$?
	echo "# $args: $(head -c 150 "$tmp/err" | head -n 1)"
	ktap_check "'$args': exit 2 with a message, nothing run" \
		test $st = 2 -a -s "$tmp/err" -a ! -e "$tmp/never"
done

# The last CPU we may use; the injector takes it 10 times for 2 ms.
cpu=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
"$inject" "$cpu" 10 2000 100 300 &
pid=$!
"$tool" --cores "$cpu" --runtime 2 --threshold 20000 --json --dump "$tmp/dump" > "$tmp/out.json"
st=$?
wait $pid; inj=$?
if [ $inj = 4 ]; then
	for n in 1 2 3 4; do ktap_skip "injected stalls ($n)" "SCHED_FIFO refused: cannot inject stalls"; done
else
	hits=$(awk '$3 >= 2000000 && $3 <= 2500000' "$tmp/dump" | wc -l)
	echo "# cpu$cpu: $(wc -l < "$tmp/dump") events over 20 us; $hits of 2.0-2.5 ms (10 injected)"
	awk '$3 >= 1000000 { printf "#   cpu%s at %s ns: %.1f us\n", $1, $2, $3 / 1000 }' "$tmp/dump"
	ktap_check "the run succeeds" test $st = 0 -a $inj = 0
	ktap_check "every 2 ms stall is found, 2.0-2.5 ms long" test "$hits" -ge 10
	ktap_check "the JSON validates against the schema" python3 -c 'import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))' "$tmp/out.json" "$schema"
	c='j["cpus"][0]'
	ktap_check "the JSON agrees: max >= 2 ms, stolen >= 20 ms, events = dump lines" test \
		"$(json "$tmp/out.json" "int($c['max_ns'] >= 2000000 and $c['stolen_ns'] >= 20000000)")" = 1 \
		-a "$(json "$tmp/out.json" "$c['events']")" = "$(wc -l < "$tmp/dump")"
fi
ktap_check "statistics are ordered: min <= p50 <= p90 <= p99 <= p99.9 <= p99.99 <= max" test \
	"$(json "$tmp/out.json" 'int(all(c["min_ns"] <= c["p50_ns"] <= c["p90_ns"] <= c["p99_ns"] <= c["p999_ns"] <= c["p9999_ns"] <= c["max_ns"] and c["dropped"] == 0 for c in j["cpus"]))')" = 1
ktap_finish
