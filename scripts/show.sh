#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Print everything tsc_freq_khz exports, with units, and what it means.
# Usage: show.sh [--load MODULE.ko] [--tsc-report TOOL]
#   --load: insmod the module first (root), unless it is loaded already.
#   --tsc-report: then what libtsc concludes, from that tsc-report.
# Exit: 0 if the TSC can be trusted across CPUs, 1 if not, 2 on error
# (tsc-report failing is an error too).
# Environment: TSC_SYSFS_ROOT, another root than /sys (as for libtsc).

set -u
sys=${TSC_SYSFS_ROOT:-/sys}
cpu=$sys/devices/system/cpu
tsc=$cpu/tsc
params=$sys/module/tsc_freq_khz/parameters
usage="usage: show.sh [--load MODULE.ko] [--tsc-report TOOL]"

ko='' report=''
while [ $# -gt 0 ]; do
	case $1 in
	--load) ko=${2:?$usage}; shift 2 ;;
	--tsc-report) report=${2:?$usage}; shift 2 ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
done
if [ -n "$ko" ] && [ ! -d "$sys/module/tsc_freq_khz" ]; then
	insmod "$ko" || { echo "show: cannot load $ko" >&2; exit 2; }
fi
if [ ! -d "$tsc" ]; then
	echo "show: $tsc missing: is tsc_freq_khz loaded?" >&2
	exit 2
fi

val() { cat "$1" 2>/dev/null || echo "n/a"; }
yesno() { [ "$(val "$1")" = 1 ] && echo yes || echo no; }

khz=$(val "$cpu/cpu0/tsc_freq_khz")
ref=$(val "$tsc/reference_cpu")
skew=$(val "$tsc/max_skew_ticks")

echo "TSC frequency         $khz kHz   ($cpu/cpu0/tsc_freq_khz)"
echo "Kernel clocksource    $(val "$cpu/../clocksource/clocksource0/current_clocksource")"
echo "Marked unstable       $(yesno "$tsc/unstable")"
for f in constant_tsc nonstop_tsc tsc_known_freq tsc_reliable tsc_adjust; do
	printf 'CPU flag %-14s %s\n' "$f" "$(yesno "$tsc/$f")"
done
echo
echo "Offsets against cpu$ref (results generation $(val "$tsc/generation")):"
row='  %-6s %-22s %12s  %-22s %7s %6s %-10s %s\n'
# shellcheck disable=SC2059 # the format is ours
printf "$row" cpu status "offset/ticks" "certainly within" rounds clean consistent TSC_ADJUST
for d in "$cpu"/cpu[0-9]*/tsc; do
	n=${d%/tsc}; n=${n##*/cpu}
	status=$(val "$d/status")
	[ "$status" = unmeasured ] && status="unmeasured: $(val "$d/unmeasured_reason")"
	# shellcheck disable=SC2059
	printf "$row" "cpu$n" "$status" "$(val "$d/offset_ticks")" \
		"[$(val "$d/offset_min_ticks"), $(val "$d/offset_max_ticks")]" \
		"$(val "$d/rounds")" "$(val "$d/clean_rounds")" "$(val "$d/consistent")" \
		"$(val "$d/adjust_ticks")"
done
echo
awk -v t="$skew" -v k="$khz" 'BEGIN { printf "Max skew              %s ticks = %.1f ns (upper bound)\n", t, t * 1e6 / k }'
printf "%-22s%s\n" "Monotonic vs cpu$ref" "$(yesno "$tsc/monotonic_vs_reference")"
# A window ends after its probe, however long that took: one slow probe,
# or time the CPU lost to SMIs, NMIs or the host, takes it past the bound.
irqoff=$(val "$tsc/max_irqoff_ns") bound=$(val "$params/irqoff_max_us")
over=''
if [[ $irqoff =~ ^[0-9]+$ && $bound =~ ^[0-9]+$ ]] && ((irqoff > bound * 1000)); then
	over=": over it, a probe slowed by emulation or time the CPU lost to SMIs, NMIs or the host"
fi
echo "Longest IRQ-off       $irqoff ns (bound $bound us)$over"
awk -v w="$(val "$tsc/last_measured_ns")" \
	'BEGIN { printf "Last measured at      %.3f s of CLOCK_MONOTONIC\n", w / 1e9 }'
echo "Clock disruptions     $(val "$tsc/clock_steps") steps, $(val "$tsc/clock_resumes") resumes," \
	"$(val "$tsc/clocksource_changes") clocksource changes since the load"

# The verdict: can timestamps taken on different CPUs be compared?
why=()
[ "$(val "$tsc/unstable")" = 1 ] && why+=("the kernel marked the TSC unstable")
[ "$(val "$tsc/constant_tsc")" = 1 ] || why+=("no constant_tsc: the rate may follow the core clock")
[ "$(val "$tsc/nonstop_tsc")" = 1 ] || why+=("no nonstop_tsc: the TSC may stop in deep idle")
[ "$(val "$tsc/monotonic_vs_reference")" = 1 ] || why+=("not every CPU proven never to step back against the reference (see the table)")
echo
if [ ${#why[@]} -eq 0 ]; then
	echo "Verdict: TSC trustworthy across CPUs: yes"
	st=0
else
	echo "Verdict: TSC trustworthy across CPUs: no, because"
	printf '  - %s\n' "${why[@]}"
	st=1
fi

# The library's view: what a program using libtsc gets from all this.
if [ -n "$report" ]; then
	echo
	echo "What libtsc concludes ($report):"
	"$report"
	r=$?
	# 0 and 1 are its verdict; anything else is a failure.
	[ $r -le 1 ] || { echo "show: $report failed (exit $r)" >&2; exit 2; }
fi
exit $st
