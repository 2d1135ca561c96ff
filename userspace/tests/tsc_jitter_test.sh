#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tsc-jitter: bad arguments exit 2 before anything runs; stalls of known
# length, injected by a SCHED_FIFO helper on the same CPU, are found with
# the right duration, in the dump and in the JSON, and put down to the
# spinner's being switched out; the JSON validates, and so does the
# Prometheus text; the statistics are ordered as statistics must be;
# counter reads keep to their rate limit.
#
# Usage: tsc_jitter_test.sh TOOL INJECTOR SCHEMA

# shellcheck source=../../testlib/tools_lib.sh
. "$(dirname "$0")/../../testlib/tools_lib.sh"
tool=${1:?usage: tsc_jitter_test.sh TOOL INJECTOR SCHEMA}
inject=${2:?usage}
schema=${3:?usage}

ktap_plan 28
"$tool" --help > "$tmp/help"; st=$?
ktap_check "--help exits 0 with the usage" test $st = 0 -a -n "$(grep -l '^Usage: tsc-jitter' "$tmp/help")"
for args in "--cores 9-2" "--cores a" "--cores 4095" "--cores 0,,1" "--cores 0," \
	    "--threshold 1000000001" "--runtime -1" \
	    "--runtime 0" "--runtime 1e9" "--threshold 0" "--threshold abc" "--bogus" \
	    "--json --prometheus"; do
	# shellcheck disable=SC2086 # the words are separate arguments on purpose
	"$tool" $args --dump "$tmp/never" > /dev/null 2> "$tmp/err"; st=$?
	echo "# $args: $(head -c 150 "$tmp/err" | head -n 1)"
	ktap_check "'$args': exit 2 with a message, nothing run" \
		test $st = 2 -a -s "$tmp/err" -a ! -e "$tmp/never"
	rm -f "$tmp/never"	# one accepted by mistake fails alone
done

# A dump path that is a symbolic link is refused: root writing to /tmp must
# not be steered into another file.
: > "$tmp/target"
ln -s "$tmp/target" "$tmp/link"
"$tool" --runtime 1 --dump "$tmp/link" > /dev/null 2> "$tmp/err"; st=$?
echo "# --dump to a symlink: $(head -n 1 "$tmp/err")"
ktap_check "--dump to a symbolic link: exit 2, the link's target untouched" \
	test $st = 2 -a ! -s "$tmp/target" -a -L "$tmp/link"

# The last CPU we may use; the injector takes it 10 times for 2 ms, from
# 1.5 s after both start until 2.52 s.  The tool spins for 3 s once its
# tsc_clock_init() is done, which calibrates for at most 1 s: whatever
# either's start-up costs, every stall falls within the spinning.
cpu=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
# The interrupt counters need tracefs's ids.
tracefs_for_run
"$inject" "$cpu" 10 2000 100 1500 "$tmp/spans" &
pid=$!
"$tool" --cores "$cpu" --runtime 3 --threshold 20000 --json --dump "$tmp/dump" > "$tmp/out.json"
st=$?
wait $pid; inj=$?
if [ $inj = 4 ]; then
	for n in 1 2 3 4 5 6 7; do ktap_skip "injected stalls ($n)" "SCHED_FIFO refused: cannot inject stalls"; done
else
	# Each injected span must lie inside one detected interruption: none
	# may be missed.  The injector logs TSC readings, put here on the
	# dump's clock with the tool's own anchor and frequency: the two
	# differ from the tool's conversion by a nanosecond or two, not by
	# any system clock's drift, and 1 us is slack enough.
	found=$(python3 - "$tmp/spans" "$tmp/dump" "$tmp/out.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[3]))
ns = lambda t: j["anchor_ns"] + (t - j["anchor_ticks"]) * 1e9 / j["frequency_hz"]
spans = [tuple(ns(int(t)) for t in l.split()) for l in open(sys.argv[1])]
events = [(int(f[1]), int(f[2]), f[3]) for f in (l.split() for l in open(sys.argv[2]))]
excess, preempted, timer = [], 0, 0
for t0, t1 in spans:
    hit = [(s, d, c) for s, d, c in events if s <= t0 + 1000 and s + d >= t1 - 1000]
    if hit:
        s, d, c = hit[0]
        excess.append(d - (t1 - t0))
        preempted += "preempted" in c.split(",")
        timer += "timer" in c.split(",")
        print("#   injected %.1f us, detected %.1f us (+%.1f), causes %s" % ((t1 - t0) / 1e3, d / 1e3, excess[-1] / 1e3, c), file=sys.stderr)
    else:
        print("#   injected %.1f us at %d: not found" % ((t1 - t0) / 1e3, t0), file=sys.stderr)
excess.sort()
print(len(excess), round(excess[len(excess) // 2]) if excess else 10**9, preempted, timer)
PY
)
	read -r found median preempted timer <<< "$found"
	echo "# cpu$cpu: $(wc -l < "$tmp/dump") interruptions over 20 us; $found of 10 injected found, median excess $median ns"
	ktap_check "the run succeeds" test $st = 0 -a $inj = 0
	ktap_check "every injected stall lies inside one found; median excess under 2 ms" \
		test "$found" = 10 -a "$median" -lt 2000000
	ktap_check "the JSON validates against the schema" valid_json "$tmp/out.json" "$schema"
	c='j["cpus"][0]'
	ktap_check "the JSON agrees: max >= 2 ms, stolen >= 20 ms, events = dump lines" test \
		"$(json "$tmp/out.json" "int(${c}['max_ns'] >= 2000000 and ${c}['stolen_ns'] >= 20000000)")" = 1 \
		-a "$(json "$tmp/out.json" "${c}['events']")" = "$(wc -l < "$tmp/dump")"
	# stalls_put_down_to CAUSE COUNT NAME: at least 9 of the 10 stalls
	# were, where the run counts CAUSE.
	stalls_put_down_to() {
		if [ "$(json "$tmp/out.json" "int('$1' in ${c}['causes'])")" = 1 ]; then
			ktap_check "$3 ($2)" test "$2" -ge 9
		else
			ktap_skip "$3" "no $1 counter: $(json "$tmp/out.json" 'j["causes_not_counted"]')"
		fi
	}
	# The injector's thread takes the CPU: the spinner is switched out,
	# which its per-thread context-switch counter sees.  A stall may share
	# a read with gaps just before it, in a storm (reads at most 10,000 a
	# second beyond a burst of 64).
	stalls_put_down_to preempted "$preempted" \
		"at least 9 of the 10 injected stalls are put down to preemption"
	# And it wakes from nanosleep(): an hrtimer armed on this CPU, whose
	# interrupt the spinner takes first.  A counter swapped with another
	# cause's fails one of the two checks.
	stalls_put_down_to timer "$timer" \
		"at least 9 of them are put down to the timer that woke the injector"
	# Every gap is attributed in the dump or counted as not attributed.
	ktap_check "dump lines not attributed (-) = not_attributed in the JSON" test \
		"$(awk '$4 == "-"' "$tmp/dump" | wc -l)" = "$(json "$tmp/out.json" "${c}['not_attributed']")"
fi
# Each percentile is the nearest rank among the gaps the dump lists: the
# smallest with at least that share of them at or below it.
ktap_check "p50, p90, p99 are the dump's nearest ranks" test "$(python3 - "$tmp/dump" "$tmp/out.json" <<'PY'
import json, math, sys
d = sorted(int(l.split()[2]) for l in open(sys.argv[1]))
c = json.load(open(sys.argv[2]))["cpus"][0]
rank = lambda q: d[max(math.ceil(q * len(d) - 1e-9), 1) - 1] if d else 0
print(int(all(c["p%s_ns" % k] == rank(q) for k, q in (("50", .5), ("90", .9), ("99", .99)))))
PY
)" = 1
# The largest threshold is one.
"$tool" --cores "$cpu" --runtime 0.05 --threshold 1000000000 > /dev/null 2> "$tmp/err"; st=$?
ktap_check "--threshold 1000000000, the largest, is taken" test $st = 0
ktap_check "statistics are ordered: min <= p50 <= p90 <= p99 <= p99.9 <= p99.99 <= max" test \
	"$(json "$tmp/out.json" 'int(all(c["min_ns"] <= c["p50_ns"] <= c["p90_ns"] <= c["p99_ns"] <= c["p999_ns"] <= c["p9999_ns"] <= c["max_ns"] and c["dropped"] == 0 for c in j["cpus"]))')" = 1
# A 1 ns threshold makes nearly every read an event, millions a second:
# each gap over the threshold must be kept or counted as dropped, none lost
# silently.  Not every read is one: two reads can fall within a tick or two
# of each other (seen under TCG, once in 1.5 million), so the tool counts
# the gaps it finds, and the flood must be one (at least 1000 of them).
# At most one per read, and one more per counter read (a read longer than
# reads are is a gap of its own: under TCG, often).
"$tool" --cores "$cpu" --runtime 0.05 --threshold 1 --json > "$tmp/flood.json"
c='j["cpus"][0]'
echo "# flood: $(json "$tmp/flood.json" "(${c}['events'], ${c}['dropped'], ${c}['gaps'], ${c}['loops'])") (events, dropped, gaps, loops)"
ktap_check "every gap is kept or counted as dropped" test "$(json "$tmp/flood.json" \
	"int(${c}['events'] + ${c}['dropped'] == ${c}['gaps'] and 1000 < ${c}['gaps'] <= ${c}['loops'] + ${c}['counter_reads'])")" = 1
# The flood is the storm the rate limit is for: reads at most one per
# read_interval_ns and a burst (50 ms: 500 and 64), the rest not attributed.
# Over the time the spinner watched, which may end a gap past the runtime.
echo "# flood: $(json "$tmp/flood.json" "(${c}['counter_reads'], ${c}['not_attributed'], ${c}['watched_ns'])") (counter reads, not attributed, watched ns)"
ktap_check "counter reads keep to one per read_interval_ns and a burst in a storm of gaps" test \
	"$(json "$tmp/flood.json" "int(${c}['counter_reads'] <= ${c}['watched_ns'] / j['read_interval_ns'] + j['read_burst'] + 1)")" = 1
"$tool" --cores "$cpu" --runtime 0.2 --prometheus > "$tmp/out.prom" 2> "$tmp/err"
echo "# --prometheus: $(grep -c '^tsc_jitter' "$tmp/out.prom") samples; $(head -n 1 "$tmp/err")"
ktap_check "promtool accepts the Prometheus text" promtool check metrics < "$tmp/out.prom"
ktap_finish
