#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tsc-jitter's causes beside rtla osnoise's, on the same injections: one
# cause at a time into the watched CPU from another (the selftests'
# cause_inject: a timer, IPIs, softirqs; nothing, for the background), each
# watched by one tool and then by the other, since both spin on the CPU.
# rtla reads the kernel's osnoise tracer (tracefs, root); tsc-jitter only
# counts.  Prints one table: what was injected, our gaps by cause, and
# rtla's noise counts by class (HW, NMI, IRQ, Softirq, Thread).  For a
# guest of Debian's kernels, whose osnoise tracer rtla needs:
# 'make vm-bench-causes'.
#
# Usage: jitter_vs_rtla.sh TSC_JITTER CAUSE_INJECT

# The tools' tests' helpers: $tmp, tracefs_for_run.
. "$(dirname "$0")/../testlib/tools_lib.sh"
tool=${1:?usage: jitter_vs_rtla.sh TSC_JITTER CAUSE_INJECT}
inject=${2:?usage}
die() { echo "jitter_vs_rtla: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root"
command -v rtla > /dev/null || die "no rtla (apt-get install rtla)"
cpus=$(python3 -c 'import os; a = sorted(os.sched_getaffinity(0)); print(a[0], a[-1]) if len(a) > 1 else None')
read -r helper target <<< "$cpus"
[ -n "$target" ] || die "needs two CPUs"
ip link set lo up 2> /dev/null
tracefs_for_run || die "no tracefs at /sys/kernel/tracing"
grep -qw osnoise /sys/kernel/tracing/available_tracers || die "no osnoise tracer in this kernel"

rate=1000 threshold_us=2
# tsc-jitter: the injection 1.5 s into a 4 s watch (the tool first
# calibrates for up to 1 s), 2 s long: 2000 injected.  rtla: its set-up
# (the tracer, under TCG) takes seconds of its own, so the injection runs
# from before its watch to after it: 4 s watched, 4000 injected in it.
run() {
	local mode=$1 who=$2 pid=''

	if [ "$who" = ours ]; then
		[ "$mode" = none ] ||
			{ taskset -c "$helper" "$inject" "$mode" "$target" $rate 2 1500 > "$tmp/$mode.out" & pid=$!; }
		"$tool" --cores "$target" --runtime 4 --threshold $((threshold_us * 1000)) --json > "$tmp/$mode.json"
	else
		[ "$mode" = none ] ||
			{ taskset -c "$helper" "$inject" "$mode" "$target" $rate 60 0 > /dev/null & pid=$!; }
		# -T: the least noise counted, as our threshold; -q: the summary only.
		rtla osnoise top -c "$target" -d 4s -T $threshold_us -q > "$tmp/$mode.rtla" 2>&1
		[ -z "$pid" ] || kill -INT $pid
	fi
	[ -z "$pid" ] || wait $pid
}

printf "%-8s %8s | %-58s | %s\n" "injected" "count" \
	"tsc-jitter, 4 s: gaps by cause" "rtla osnoise top, 4 s (4000 injected): HW NMI IRQ Softirq Thread"
for mode in none timer ipi softirq; do
	run $mode ours
	run $mode rtla
	count=$(awk '{ print $2 }' "$tmp/$mode.out" 2> /dev/null)
	ours=$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["cpus"][0]
print(" ".join("%s %d" % (k, v["gaps"]) for k, v in c["causes"].items() if v["gaps"]), "| held", c["not_attributed"])' "$tmp/$mode.json")
	# The last line of rtla's table whose first field is the CPU.
	theirs=$(awk -v c="$target" '$1 == c { l = $0 } END { n = split(l, f); print f[n - 4], f[n - 3], f[n - 2], f[n - 1], f[n] }' "$tmp/$mode.rtla")
	printf "%-8s %8s | %-58s | %s\n" "$mode" "${count:--}" "$ours" "${theirs:-$(tail -n 1 "$tmp/$mode.rtla")}"
done
