#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# show.sh (make run's report) on a sysfs root of our own: the longest
# IRQ-off window is marked, with why it may be, only when it is over
# irqoff_max_us, and a file it cannot read is "n/a", not a shell error.
#
# Usage: show_test.sh

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=testlib/ktap.sh
. "$here/../testlib/ktap.sh"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/devices/system/cpu/cpu0" "$root/devices/system/cpu/tsc" \
	"$root/module/tsc_freq_khz/parameters"
echo 2445431 > "$root/devices/system/cpu/cpu0/tsc_freq_khz"

# irqoff_line MAX_IRQOFF_NS BOUND_US: show.sh's line for them ("-": no file).
irqoff_line() {
	rm -f "$root/devices/system/cpu/tsc/max_irqoff_ns"
	[ "$1" = - ] || echo "$1" > "$root/devices/system/cpu/tsc/max_irqoff_ns"
	echo "$2" > "$root/module/tsc_freq_khz/parameters/irqoff_max_us"
	TSC_SYSFS_ROOT=$root "$here/show.sh" 2>&1 | grep '^Longest IRQ-off'
}

ktap_plan 4
line=$(irqoff_line 118691 20)
ktap_check "a window over the bound is marked, and why: $line" \
	test "$line" = "Longest IRQ-off       118691 ns (bound 20 us): over it, a probe slowed by emulation or time the CPU lost to SMIs, NMIs or the host"
line=$(irqoff_line 15000 20)
ktap_check "within the bound, no mark: $line" \
	test "$line" = "Longest IRQ-off       15000 ns (bound 20 us)"
line=$(irqoff_line 20000 20)
ktap_check "at the bound, no mark: $line" \
	test "$line" = "Longest IRQ-off       20000 ns (bound 20 us)"
line=$(irqoff_line - 20)
ktap_check "no file: n/a, no mark: $line" \
	test "$line" = "Longest IRQ-off       n/a ns (bound 20 us)"
ktap_finish
