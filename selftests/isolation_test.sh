#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# An isolated CPU (the guest boots with isolcpus=1 nohz_full=1) is left
# alone: nothing of the module runs on cpu1 during load and remeasure, as
# the kernel's own tracepoints show (no thread of the module switched to or
# woken there, no work item of it run there; where the kernel traces IPIs,
# none to cpu1 from the module or for its MSR read: under QEMU's TCG, whose
# CPUs have no TSC_ADJUST, the module sends no IPI at all), and cpu1 reads
# unmeasured / isolated, so that monotonic_vs_reference claims nothing
# (0).  With measure_isolated=1 it is measured, the
# tracepoints show the module's thread on it (so the observable can see
# it), yet its threads there end on cpu0: the module moves a side that is
# done off an isolated CPU before it exits (sched_process_exit), and its
# longest interrupts-off window is within irqoff_max_us + 1 ms in the best
# of three measurements, as sysfs_test holds it.  The isolated CPU cannot
# be made the reference either, which spins as much: reference_cpu=1
# fails the load (EINVAL, and the kernel log says why) unless
# measure_isolated=1, with which cpu1 is the reference.
#
# Usage: isolation_test.sh MODULE.ko   (root, module unloaded)

here=$(dirname "$0")
# shellcheck source=../testlib/ktap.sh
. "$here/../testlib/ktap.sh"
# shellcheck source=../testlib/unload.sh
. "$here/../testlib/unload.sh"
ko=${1:?usage: isolation_test.sh MODULE.ko}
cpu=/sys/devices/system/cpu
tr=/sys/kernel/tracing

[ "$(id -u)" -eq 0 ] || ktap_skip_all "needs root"
[ -d /sys/module/tsc_freq_khz ] && ktap_skip_all "tsc_freq_khz is loaded"
[ "$(cat $cpu/isolated)" = 1 ] ||
	ktap_skip_all "cpu1 is not isolated (isolated: '$(cat $cpu/isolated)'); boot with isolcpus=1 nohz_full=1"
mountpoint -q $tr || mount -t tracefs nodev $tr ||
	ktap_skip_all "no tracefs"

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	echo 0 > "$tr/events/enable"
	echo > "$tr/trace"
	[ -d /sys/module/tsc_freq_khz ] && tscfk_unload
}
trap cleanup EXIT

# Start tracing context switches, wake-ups, exits, work items and IPIs; print the
# module's ones on cpu1 after: its threads are named tscfk/N, its work item
# is measure_requested.  ipi_send_cpu (6.6 and later) names the function an
# IPI runs.
ipi=$tr/events/ipi/ipi_send_cpu
trace_start() {
	echo 0 > $tr/events/enable
	echo > $tr/trace
	echo 1 > $tr/events/sched/sched_switch/enable
	echo 1 > $tr/events/sched/sched_wakeup/enable
	echo 1 > $tr/events/sched/sched_process_exit/enable
	echo 1 > $tr/events/workqueue/workqueue_execute_start/enable
	[ -e $ipi ] && echo 1 > $ipi/enable
}
ours_on_cpu1() {
	echo 0 > $tr/events/enable
	{
		grep -E 'comm=tscfk/|measure_requested' $tr/per_cpu/cpu1/trace
		grep -E 'sched_wakeup: comm=tscfk/.* target_cpu=0*1$' $tr/trace
		grep -E 'ipi_send_cpu: cpu=1 .*(tsc_freq_khz|rdmsr)' $tr/trace
	} | grep -v '^#'
}

ktap_plan 14
echo "# isolated: $(cat $cpu/isolated), nohz_full: $(cat $cpu/nohz_full 2> /dev/null);" \
	"IPIs traced: $([ -e $ipi ] && echo yes || echo "no (this kernel has no ipi_send_cpu)")"
mark="isolation_test $$.$RANDOM"
echo "$mark" > /dev/kmsg

trace_start
insmod "$ko" && echo 1 > $cpu/tsc/remeasure
ktap_check "the module loads and measures" test -d $cpu/tsc
ktap_check "cpu1 reads unmeasured: isolated" \
	test "$(cat $cpu/cpu1/tsc/status) $(cat $cpu/cpu1/tsc/unmeasured_reason)" = \
	"unmeasured isolated"
ktap_check "the reference is cpu0" test "$(cat $cpu/tsc/reference_cpu)" = 0
# Nothing is claimed of a CPU not measured, whatever the others showed.
ktap_check "monotonic_vs_reference reads 0: not every online CPU was measured" \
	test "$(cat $cpu/tsc/monotonic_vs_reference)" = 0
said=$(dmesg | sed -n "/$mark/,\$p" | grep -c 'not measuring isolated CPUs 1 ')
ktap_check "the kernel log says so once" test "$said" = 1
seen=$(ours_on_cpu1)
# shellcheck disable=SC2001 # every line, not the string
[ -z "$seen" ] || sed 's/^/# /' <<< "$seen"
ktap_check "nothing of the module ran or was woken on cpu1" test -z "$seen"
tscfk_unload

trace_start
insmod "$ko" measure_isolated=1
ktap_check "with measure_isolated=1 cpu1 is measured" \
	test "$(cat $cpu/cpu1/tsc/status)" = measured
# cpu1's side ends once its pair is released, after the measurement's
# turn: wait for its exit (up to 5 s), wherever it is.
exits=''
for _ in $(seq 100); do
	exits=$(grep -E 'sched_process_exit: comm=tscfk/1 ' $tr/trace | grep -v '^#')
	[ -n "$exits" ] && break
	sleep 0.05
done
echo "# exits of cpu1's threads: $(grep -c . <<< "$exits")${exits:+, e.g.:}"
[ -n "$exits" ] || echo "# none seen in 5 s"
head -n 2 <<< "$exits" | sed 's/^/# /'
ktap_check "cpu1's threads ended" test -n "$exits"
ktap_check "none of them on cpu1" \
	test -z "$(grep -E 'sched_process_exit: comm=tscfk/' $tr/per_cpu/cpu1/trace | grep -v '^#')"
seen=$(ours_on_cpu1)
echo "# $(grep -c . <<< "$seen") events of the module's on cpu1, e.g.:"
head -n 2 <<< "$seen" | sed 's/^/# /'
ktap_check "and the tracepoints show the module's work on cpu1" test -n "$seen"

bound=$(($(cat /sys/module/tsc_freq_khz/parameters/irqoff_max_us) * 1000 + 1000000))
best=''
for _ in 1 2 3; do
	w=$(cat $cpu/tsc/max_irqoff_ns)
	if [ -z "$best" ] || [ "$w" -lt "$best" ]; then best=$w; fi
	echo 1 > $cpu/tsc/remeasure
done
echo "# longest interrupts-off window, best of three: $best ns (bound $bound ns)"
ktap_check "its interrupts-off windows are within the bound" test "$best" -le "$bound"
tscfk_unload

err=$(insmod "$ko" reference_cpu=1 2>&1)
st=$?
echo "# insmod reference_cpu=1: exit $st: $err"
ktap_check "reference_cpu=1, isolated, fails the load" test $st -ne 0 -a ! -d $cpu/tsc
ktap_check "the kernel log says why" \
	test "$(dmesg | sed -n "/$mark/,\$p" | grep -c 'reference_cpu=1 is isolated (.*measure_isolated=1 is needed')" = 1
insmod "$ko" reference_cpu=1 measure_isolated=1
ktap_check "with measure_isolated=1 cpu1 is the reference" \
	test "$(cat $cpu/tsc/reference_cpu 2>&1) $(cat $cpu/cpu1/tsc/status 2>&1)" = "1 reference"
ktap_finish
