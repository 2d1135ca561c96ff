#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# On a CPU without a TSC the module refuses to load with ENODEV, says why in
# one kernel message, and leaves nothing behind.  Boot a guest with
# "-cpu max,-tsc" to run it (make check does).
#
# Usage: no_tsc_test.sh MODULE.ko   (root)

here=$(dirname "$0")
# shellcheck source=../testlib/ktap.sh
. "$here/../testlib/ktap.sh"
ko=${1:?usage: no_tsc_test.sh MODULE.ko}

[ "$(id -u)" -eq 0 ] || ktap_skip_all "needs root"
grep -qw tsc /proc/cpuinfo && ktap_skip_all "this CPU has a TSC (QEMU: -cpu max,-tsc)"

ktap_plan 3
mark="no_tsc_test $$.$RANDOM"
echo "$mark" > /dev/kmsg
err=$(insmod "$ko" 2>&1)
echo "# insmod: $err"
ktap_check "insmod fails with ENODEV" grep -q 'No such device' <<< "$err"
log=$(dmesg | sed -n "/$mark/,\$p" | grep 'tsc_freq_khz:' | grep -v 'taints kernel\|verification failed')
echo "# kernel: $log"
ktap_check "one message says why" test "$log" != "" -a "$(wc -l <<< "$log")" = 1 \
	-a "$(grep -c 'this CPU has no TSC' <<< "$log")" = 1
ktap_check "nothing is left" test ! -e /sys/module/tsc_freq_khz \
	-a ! -e /sys/devices/system/cpu/cpu0/tsc_freq_khz
ktap_finish
