#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# What the interrupts-off window length buys: for irqoff_max_us of 1, 5,
# 20 and 100 (and any given), the width of every measured CPU's offset
# interval, the share of probes that were clean (cpuN/tsc/clean_rounds:
# no slower than twice the fastest), and the longest window the module
# kept.  The lengths take turns, load after load, so that a change of the
# machine's mood falls on all of them alike.  Medians over the rounds and
# CPUs, and each length's width against the longest one's.
#
# Usage: irqoff_windows.sh MODULE.ko [--quick | --loads N] [US...]
#   (root, module unloaded); --loads: loads per length (default 15).

set -eu
. "$(dirname "$0")/../testlib/unload.sh"
usage="usage: irqoff_windows.sh MODULE.ko [--quick | --loads N] [US...]"
ko=${1:?$usage}
shift
repeats=15 remeasures=4
case ${1:-} in
--quick) repeats=2 remeasures=1; shift ;;
--loads) repeats=${2:?$usage}; shift 2 ;;
esac
case $repeats in ''|*[!0-9]*|0) echo "$usage" >&2; exit 2 ;; esac
windows=${*:-1 5 20 100}
cpu=/sys/devices/system/cpu
[ "$(id -u)" -eq 0 ] || { echo "irqoff_windows: needs root" >&2; exit 2; }
[ -d /sys/module/tsc_freq_khz ] && { echo "irqoff_windows: unload tsc_freq_khz first" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ -d /sys/module/tsc_freq_khz ] && tscfk_unload' EXIT

# One line per measured CPU: window width clean_share max_irqoff_ns
sample() {
	local w=$1 d lo hi rounds clean irqoff
	irqoff=$(cat $cpu/tsc/max_irqoff_ns)
	for d in "$cpu"/cpu[0-9]*/tsc; do
		[ "$(cat "$d/status")" = measured ] || continue
		lo=$(cat "$d/offset_min_ticks") hi=$(cat "$d/offset_max_ticks")
		rounds=$(cat "$d/rounds") clean=$(cat "$d/clean_rounds")
		echo "$w $((hi - lo)) $((clean * 1000 / rounds)) $irqoff"
	done >> "$tmp/samples"
}

for _ in $(seq "$repeats"); do
	for w in $windows; do
		insmod "$ko" irqoff_max_us="$w"
		sample "$w"
		for _ in $(seq "$remeasures"); do
			echo 1 > $cpu/tsc/remeasure
			sample "$w"
		done
		tscfk_unload
	done
done
[ -s "$tmp/samples" ] || { echo "irqoff_windows: no CPU was measured (one CPU?)" >&2; exit 2; }

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
longest=$(for w in $windows; do echo "$w"; done | sort -n | tail -n1)
ref=$(awk -v w="$longest" '$1 == w { print $2 }' "$tmp/samples" | median)
echo "irqoff_max_us: $repeats loads each, taking turns, $((remeasures + 1)) measurements per load"
printf '%14s %9s %12s %14s %16s\n' irqoff_max_us samples "width/ticks" "clean probes" "longest window"
for w in $windows; do
	n=$(awk -v w="$w" '$1 == w' "$tmp/samples" | wc -l)
	width=$(awk -v w="$w" '$1 == w { print $2 }' "$tmp/samples" | median)
	clean=$(awk -v w="$w" '$1 == w { print $3 }' "$tmp/samples" | median)
	irqoff=$(awk -v w="$w" '$1 == w { print $4 }' "$tmp/samples" | median)
	printf '%14s %9s %12s %13s%% %13s ns   width %s x %s us\n' "$w" "$n" "$width" \
		"$(awk -v c="$clean" 'BEGIN { printf "%.1f", c / 10 }')" "$irqoff" \
		"$(awk -v a="$width" -v b="$ref" 'BEGIN { printf "%.2f", b ? a / b : 0 }')" "$longest"
done
