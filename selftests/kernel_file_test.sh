#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A kernel that provides cpu0/tsc_freq_khz itself keeps its file: the module
# loads all the same, says so once, provides everything else and, unloaded,
# leaves that file in place.  The "kernel" is tscfk_fake_kernel_file.ko,
# whose file reads 12345.
#
# Usage: kernel_file_test.sh MODULE.ko FAKE.ko   (root, module unloaded)

here=$(dirname "$0")
# shellcheck source=../testlib/ktap.sh
. "$here/../testlib/ktap.sh"
# shellcheck source=../testlib/unload.sh
. "$here/../testlib/unload.sh"
ko=${1:?usage: kernel_file_test.sh MODULE.ko FAKE.ko}
fake=${2:?usage: kernel_file_test.sh MODULE.ko FAKE.ko}
file=/sys/devices/system/cpu/cpu0/tsc_freq_khz

[ "$(id -u)" -eq 0 ] || ktap_skip_all "needs root"
[ -r "$fake" ] || ktap_skip_all "no test module $fake"
[ -e $file ] && ktap_skip_all "this kernel really provides $file"
[ -d /sys/module/tsc_freq_khz ] && ktap_skip_all "tsc_freq_khz is loaded"

ktap_plan 8
mark="kernel_file_test $$.$RANDOM"
echo "$mark" > /dev/kmsg
ktap_check "the stand-in kernel file appears" insmod "$fake"
ktap_check "it reads 12345" test "$(cat $file)" = 12345
ktap_check "tsc_freq_khz loads over it" insmod "$ko"
said=$(dmesg | sed -n "/$mark/,\$p" | grep -c 'cpu0/tsc_freq_khz is provided by the kernel already')
echo "# the module said so $said time(s)"
ktap_check "the module says so, once" test "$said" = 1
ktap_check "the file still reads 12345, and the rest is there" \
	test "$(cat $file)" = 12345 -a -e /sys/devices/system/cpu/tsc/generation \
	-a -e /sys/devices/system/cpu/cpu0/tsc/status
ours=$(find /sys/devices/system/cpu/ -maxdepth 2 -name tsc_freq_khz ! -path '*/cpu0/*' \
	-exec cat {} + | sort -u)
echo "# the other CPUs' files read: ${ours:-(no other CPU)}"
# One value on every other CPU, a frequency, and not the stand-in's.
if [ -z "$ours" ]; then
	ktap_skip "the other CPUs' files are the module's" "one CPU: no other CPU's file to read"
else
	mine=0
	[[ $ours =~ ^[1-9][0-9]*$ ]] && [ "$ours" != 12345 ] && mine=1
	ktap_check "the other CPUs' files are the module's: one kHz value, not 12345" test $mine = 1
fi
tscfk_unload
ktap_check "unloading tsc_freq_khz leaves the kernel's file" test "$(cat $file 2>&1)" = 12345
rmmod tscfk_fake_kernel_file
ktap_check "and nothing else is left" test ! -e $file -a ! -e /sys/devices/system/cpu/tsc \
	-a -z "$(find /sys/devices/system/cpu/ -maxdepth 2 -name tsc_freq_khz)"
ktap_finish
