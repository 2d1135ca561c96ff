#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tsc-coreclock: bad arguments exit 2; the JSON validates; and, on a real
# CPU (not an emulated one, whose timings are the emulator's), the
# measurement holds together: the imul chain gives the same clock at 3
# cycles per imul, halving the chain changes nothing (no loop overhead),
# two chains retire two adds per cycle, more never fewer.
#
# Usage: tsc_coreclock_test.sh TOOL SCHEMA

. "$(dirname "$0")/tools_lib.sh"
tool=${1:?usage: tsc_coreclock_test.sh TOOL SCHEMA}
schema=${2:?usage}

ktap_plan 12
"$tool" --help | grep -q '^Usage: tsc-coreclock'
ktap_check "--help prints the usage" test "${PIPESTATUS[0]}" = 0
usage_errors "$tool" "--cpu 4095" "--cpu x" "--ms 0" "--reps 2" "--bogus"

# Nine repetitions: a clock step during one moves that one's ratios, and
# the median outvotes up to four.
"$tool" --reps 9 --ms 10 --json > "$tmp/out.json"; st=$?
ktap_check "a run succeeds" test $st = 0
ktap_check "the JSON validates against the schema" valid_json "$tmp/out.json" "$schema"
echo "# $(json "$tmp/out.json" '"core %.0f MHz (%.3f x TSC), imul %.0f MHz, overhead %+.2f%%, IPC %s" % (j["core_hz"] / 1e6, j["core_to_tsc"], j["core_hz_by_imul"] / 1e6, j["loop_overhead"] * 100, [round(v["ipc"], 2) for v in j["variants"]])')"

if emulated; then
	for n in "imul cross-check" "no loop overhead" "two chains, two adds per cycle" "more chains, never fewer"; do
		ktap_skip "$n" "emulated CPU (QEMU TCG): timings are the emulator's"
	done
else
	ktap_check "the imul chain agrees on the clock within 3%" test \
		"$(json "$tmp/out.json" 'int(abs(j["core_hz_by_imul"] / j["core_hz"] - 1) < 0.03)')" = 1
	ktap_check "halving the chain changes the time per add by under 3%" test \
		"$(json "$tmp/out.json" 'int(abs(j["loop_overhead"]) < 0.03)')" = 1
	ktap_check "two independent chains retire 1.8 to 2.2 adds per cycle" test \
		"$(json "$tmp/out.json" 'int(1.8 <= j["variants"][2]["ipc"] <= 2.2)')" = 1
	ktap_check "four and eight chains retire no fewer than two" test \
		"$(json "$tmp/out.json" 'int(min(j["variants"][3]["ipc"], j["variants"][4]["ipc"]) >= 1.8)')" = 1
fi
ktap_finish
