#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A CPU that a real-time task owns: a SCHED_FIFO spinner on cpu1 with RT
# throttling off (and, from 6.12, the fair servers off), the usual
# isolated-core busy-poll setup.  No ordinary thread runs on cpu1 while it
# spins.
#
# 1. The spinner owns cpu1 first, so the module's thread there never starts.
#    Loading the module, writing remeasure, taking cpu1 offline and back,
#    and unloading must each return within the bound (timeout_ms, plus the
#    module's 100 ms of slack and this margin for an emulated machine), and
#    cpu1 must read unmeasured / not_started, said once in the kernel log.
#    rmmod during a measurement returns at once, and the module is gone,
#    retried, within the bound.
#    The kernel itself cannot take a CPU offline while such a task owns it,
#    module or not: the teardown runs in cpuhp/1, an ordinary kthread on
#    that CPU (seen here with 6.1 and 6.12: the write never returns).  So the
#    spinner is stopped (SIGSTOP) for the hotplug, while a measurement that
#    began with cpu1 owned is under way, and continued after.
# 2. The spinner takes a CPU whose thread has started: with three CPUs or
#    more, it holds cpu1 while a measurement begins, so that cpu2's thread
#    starts and waits for its turn behind cpu1's, then moves to cpu2.  The
#    measurement still ends within the bound after cpu1's pair (timed by the
#    kernel's trace clock), cpu2 reads stalled (cpu1, freed, measured), and
#    rmmod succeeds within the bound while the
#    spinner still owns cpu2: the module moved cpu2's thread, given up on,
#    to cpu0, where it ended (the sched_migrate_task tracepoint shows it),
#    and never to cpu3, where the guest has a CPU isolated by isolcpus=
#    alone, which the kernel's housekeeping mask for kthreads includes.  An
#    rmmod while cpu1's thread waits to start is refused: the thread holds
#    the module, so rmmod can never be let in to wait for a thread a
#    spinner then starves.
# 3. While a measurement waits for cpu1's thread, which the spinner keeps
#    from starting, cpu2 goes offline at once: the wait is outside the
#    hotplug lock.  A writer of remeasure waiting for it is gone at once
#    when killed, and the measurement goes on.
# 4. While a pair's turn waits for its stalled side (the spinner moved onto
#    cpu2 after its thread started), the hotplug lock is free: cpu1 goes
#    offline at once, and so does an unrelated reader of that lock that
#    comes behind it (a flip of the schedstats static key, which takes
#    cpus_read_lock(), and which a waiting hotplug writer would block).
#    These steps run on cpu3: the reference's side spins on cpu0 for the
#    whole turn (nice -20, waiting for answers that do not come), and the
#    test's own commands would crawl there.
#
# The spinner starves whatever else the kernel runs as a thread on its
# CPU: ksoftirqd, and with it RCU's softirq (seen on the debug kernel: an
# RCU stall, and rmmod hung in synchronize_rcu()); on PREEMPT_RT also
# cpu1's rcuc and the threads of the interrupts routed there, FIFO 50
# like the spinner (the serial console's, here: the guest froze).  Real
# deployments make such CPUs nohz_full and route interrupts elsewhere, and
# so must the guest: make check boots it with nohz_full=1,2 irqaffinity=0.
# Where cpu1 is isolated, the module is asked to measure it all the same
# (measure_isolated=1): the bounds must hold for those who ask.
#
# Usage: rt_spinner_test.sh MODULE.ko SPINNER   (root, module unloaded)
# Environment: TSCFK_MARGIN_MS, the margin (default 1500 ms; the debug
#   kernel's checkers make loading a module itself take seconds).

here=$(dirname "$0")
# shellcheck source=../testlib/ktap.sh
. "$here/../testlib/ktap.sh"
ko=${1:?usage: rt_spinner_test.sh MODULE.ko SPINNER}
spinner=${2:?usage: rt_spinner_test.sh MODULE.ko SPINNER}
cpu=/sys/devices/system/cpu
timeout_ms=500
margin_ms=${TSCFK_MARGIN_MS:-1500}
[[ $margin_ms =~ ^[0-9]+$ ]] || { echo "rt_spinner_test: TSCFK_MARGIN_MS=$margin_ms: not a number" >&2; exit 1; }
bound_ms=$((timeout_ms + margin_ms))

[ "$(id -u)" -eq 0 ] || ktap_skip_all "needs root"
[ -d /sys/module/tsc_freq_khz ] && ktap_skip_all "tsc_freq_khz is loaded"
[ -w $cpu/cpu1/online ] || ktap_skip_all "no cpu1 that can go offline"
[ -x "$spinner" ] || ktap_skip_all "no spinner $spinner"

# Is CPU $1 in the kernel's CPU list $2 ("1-2,5")?
in_list() {
	local range lo hi
	for range in ${2//,/ }; do
		[[ $range =~ ^[0-9]+(-[0-9]+)?$ ]] || continue
		lo=${range%-*} hi=${range#*-}
		[ "$1" -ge "$lo" ] && [ "$1" -le "$hi" ] && return 0
	done
	return 1
}
nohz=$(cat $cpu/nohz_full 2> /dev/null)
irqs=$((16#$(tr -d ',\n' < /proc/irq/default_smp_affinity)))
taken=1
[ -d $cpu/cpu2 ] && taken="1 2"
for c in $taken; do
	in_list "$c" "$nohz" ||
		ktap_skip_all "cpu$c is not nohz_full: the spinner would starve its ksoftirqd and RCU with it; boot with nohz_full=1,2 irqaffinity=0"
done
if uname -v | grep -q PREEMPT_RT && [ $((irqs & 6)) -ne 0 ]; then
	ktap_skip_all "PREEMPT_RT: the spinner would starve the IRQ threads on cpu1 and cpu2; boot with irqaffinity=0"
fi
params=''
in_list 1 "$(cat $cpu/isolated)$([ -n "$nohz" ] && echo ",$nohz")" && params=measure_isolated=1

tmp=$(mktemp -d)
rt_runtime=$(cat /proc/sys/kernel/sched_rt_runtime_us)
fair=/sys/kernel/debug/sched/fair_server
spid='' canary=''
stop_spinner() {
	[ -n "$spid" ] || return 0
	kill -KILL "$spid" 2> /dev/null
	wait "$spid" 2> /dev/null
	spid=''
}
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	stop_spinner
	[ -n "$canary" ] && wait "$canary" 2> /dev/null
	[ -s "$tmp/fair" ] && while read -r f runtime; do echo "$runtime" > "$f"; done < "$tmp/fair"
	echo "$rt_runtime" > /proc/sys/kernel/sched_rt_runtime_us
	echo 1 > "$cpu/cpu1/online" 2> /dev/null
	[ -e "$cpu/cpu2/online" ] && echo 1 > "$cpu/cpu2/online" 2> /dev/null
	for _ in $(seq 50); do
		[ -d /sys/module/tsc_freq_khz ] || break
		rmmod tsc_freq_khz 2> /dev/null || sleep 0.1
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

# Start the spinner on cpu1 (and its next CPU) and wait until it spins.
start_spinner() {
	: > "$tmp/spinner"
	"$spinner" 1 "$@" > "$tmp/spinner" &
	spid=$!
	spinning_on 1
}
spinning_on() {
	for _ in $(seq 100); do
		grep -q "spinning on cpu$1" "$tmp/spinner" && return 0
		sleep 0.05
	done
	return 1
}

# Milliseconds a command took; its status in $st.
ms_now() { echo $(($(date +%s%N) / 1000000)); }
timed() {
	local t0
	t0=$(ms_now)
	"$@"
	st=$?
	took=$(($(ms_now) - t0))
}
reason() { cat $cpu/cpu1/tsc/unmeasured_reason 2>&1; }
# Wait, polling up to $1 times, until the module's threads hold it.
held_by_its_threads() {
	local n
	for _ in $(seq "$1"); do
		read -r n < /sys/module/tsc_freq_khz/refcnt && [ "$n" -gt 0 ] && return 0
		sleep 0.02
	done
	return 1
}

ktap_plan 27
# This shell and all it starts stay on cpu0: a task of ours caught on a
# CPU the spinner takes would wait there for good.
taskset -p -c 0 $$ > /dev/null
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
echo -1 > /proc/sys/kernel/sched_rt_runtime_us
# From 6.12 a deadline server gives ordinary tasks 50 ms a second on
# every CPU, real-time tasks or not: off on cpu1 and cpu2, which the
# spinner takes.
for f in $fair/cpu1/runtime $fair/cpu2/runtime; do
	[ -e "$f" ] || continue
	echo "$f $(cat "$f")" >> "$tmp/fair"
	echo 0 > "$f"
done
[ -s "$tmp/fair" ] && echo "# fair servers off: $(tr '\n' ' ' < "$tmp/fair")"

# --- 1. The spinner owns cpu1 before the module comes ---
ktap_check "the spinner owns cpu1 (SCHED_FIFO, RT throttling off)" start_spinner

# Proof of the setup: an ordinary task pinned to cpu1 does not run.
taskset -c 1 sh -c "echo ran > $tmp/canary" &
canary=$!
sleep 2
ktap_check "an ordinary task on cpu1 did not run in 2 s" test ! -e "$tmp/canary"

mark="rt_spinner_test $$.$RANDOM"
echo "$mark" > /dev/kmsg
said() { dmesg | sed -n "/$mark/,\$p" | grep -c "cpu1: $1"; }

timed insmod "$ko" timeout_ms=$timeout_ms $params
echo "# insmod: exit $st, $took ms (bound $bound_ms ms)"
ktap_check "insmod returns within the bound" test $st -eq 0 -a $took -le $bound_ms
ktap_check "cpu1 reads unmeasured: not_started" \
	test "$(cat $cpu/cpu1/tsc/status) $(reason)" = "unmeasured not_started"
ktap_check "the kernel log says so once" test "$(said 'its side did not run')" = 1

timed sh -c "echo 1 > $cpu/tsc/remeasure"
echo "# remeasure: exit $st, $took ms"
# What a measurement takes here besides waiting out cpu1: the other
# pairs' turns, under emulation, which part 2's bound must allow as well.
rest_ms=$((took > timeout_ms ? took - timeout_ms : 0))
ktap_check "remeasure returns within the bound" test $st -eq 0 -a $took -le $bound_ms
ktap_check "cpu1 is still not_started, and the log said it only once" \
	test "$(reason) $(said 'its side did not run')" = "not_started 1"

# Offline waits for the pair under way: both within the bound.
sh -c "echo 1 > $cpu/tsc/remeasure" &
rpid=$!
sleep 0.1
kill -STOP "$spid"
timed sh -c "echo 0 > $cpu/cpu1/online"
echo "# cpu1 offline during a measurement: exit $st, $took ms"
ktap_check "cpu1 goes offline within the bound" test $st -eq 0 -a $took -le $bound_ms
wait $rpid
ktap_check "cpu1 reads offline" test "$(reason)" = offline

timed sh -c "echo 1 > $cpu/cpu1/online"
echo "# cpu1 online: exit $st, $took ms"
kill -CONT "$spid"
ktap_check "cpu1 comes online within the bound" test $st -eq 0 -a $took -le $bound_ms
# Measured alone now; the spinner may or may not be back on it first.
for _ in $(seq 100); do
	[ "$(reason)" = pending ] || break
	sleep 0.05
done
echo "# cpu1 after coming back: $(cat $cpu/cpu1/tsc/status), $(reason)"
ktap_check "cpu1 is judged within the bound" test "$(reason)" != pending

# Unloading never waits for a measurement: while a thread of the module
# may run it holds the module (refcnt), and rmmod is refused at once; retried,
# it succeeds once the measurement gave up on cpu1.  Whether the first
# try falls in the measurement depends on how fast the guest is (the
# debug kernel's rmmod takes a second): the deterministic refusal is in
# part 2.
sh -c "echo 1 > $cpu/tsc/remeasure" 2> /dev/null &
rpid=$!
held_by_its_threads 100
timed rmmod tsc_freq_khz 2> "$tmp/rmmod"
echo "# rmmod during a measurement: exit $st, $took ms: $(cat "$tmp/rmmod")"
ktap_check "rmmod during a measurement returns within the bound" test $took -le $bound_ms
gone_within() {
	for _ in $(seq 50); do
		[ -d /sys/module/tsc_freq_khz ] || return 0
		rmmod tsc_freq_khz 2> /dev/null || sleep 0.05
	done
	[ ! -d /sys/module/tsc_freq_khz ]
}
timed gone_within
echo "# rmmod, retried, gone after $took ms (bound $bound_ms ms)"
ktap_check "the module is gone within the bound" test $st -eq 0 -a $took -le $bound_ms
wait $rpid

# The spinner gone, cpu1 serves everyone again.
stop_spinner
wait $canary
ktap_check "with the spinner gone, the ordinary task ran" test -e "$tmp/canary"
canary=''

# --- 2. The spinner takes a CPU whose thread has started ---
# The spinner moves once cpu2's thread has started and sleeps until its
# turn (within half of timeout_ms) and an rmmod tried then has returned:
# well before cpu1's thread is given up on, timeout_ms after the
# measurement began: 7 s, and three margins more where the margin is
# wider (a slower kernel).  All of this runs on cpu0 beside kthreadd,
# which makes the module's threads: on the KASAN kernel the move came
# 8.3 s after the write on one run and, with timeout_ms 11.5 s, too late
# on another (cpu1 given up on, cpu2 measured before the spinner came).
no_cpu2=''
if [ ! -w $cpu/cpu2/online ] || [ "$(cat $cpu/cpu2/online)" != 1 ]; then
	no_cpu2="needs a third CPU, cpu2, online"
fi
part2_skip=$no_cpu2
# Wait, up to half of timeout_ms after $t0, until cpu2's thread sleeps
# (idle, state I) till its turn.  Shell builtins only: a command per
# process would take seconds under TCG.
idle_on_cpu2() {
	local f comm stat
	while [ $(($(ms_now) - t0)) -lt $((long_ms / 2)) ]; do
		for f in /proc/[0-9]*/comm; do
			if read -r comm < "$f" && [ "$comm" = tscfk/2 ] &&
				read -r stat < "${f%comm}stat" && [[ $stat == *') I '* ]]; then
				return 0
			fi
		done 2> /dev/null
		sleep 0.02
	done
	return 1
}
# Wait, up to 4 s, until no thread named $1 is left.
threads_gone() {
	local f comm t
	t=$(ms_now)
	while [ $(($(ms_now) - t)) -lt 4000 ]; do
		for f in /proc/[0-9]*/comm; do
			if read -r comm < "$f" && [ "$comm" = "$1" ]; then
				sleep 0.02
				continue 2
			fi
		done 2> /dev/null
		return 0
	done
	return 1
}
part2_names=("the measurement ends within the bound" "cpu2 reads stalled, cpu1 measured"
	"the reference CPU had interrupts off a tenth of the measurement at most"
	"the kernel log says so once"
	"rmmod succeeds within the bound while the spinner owns cpu2"
	"the spinner still spins on cpu2"
	"cpu2's thread, given up on, was moved to cpu0"
	"no thread of the module was moved to cpu3, isolated by isolcpus= alone"
	"rmmod while cpu1's thread waits to start is refused")
tr=/sys/kernel/tracing
migrate=$tr/events/sched/sched_migrate_task
# Trace task migrations, from now on (false without tracefs).  A thread of
# the module is placed on its CPU when it is made; a move that is not to
# its own CPU is one the module made.
trace_migrations() {
	{ mountpoint -q $tr || mount -t tracefs nodev $tr; } 2> /dev/null &&
		[ -e $migrate/enable ] || return 1
	echo 0 > $tr/tracing_on
	echo > $tr/trace
	echo 1 > $migrate/enable
	echo 1 > $tr/tracing_on
}
# The trace clock's milliseconds from the first line of the trace that
# matches $1 to the first after it that matches $2; empty if either is
# missing.
ms_between() {
	awk -v from="$1" -v to="$2" '
		function ts(	i) {
			for (i = 1; i <= NF; i++)
				if ($i ~ /^[0-9]+\.[0-9]+:$/)
					return substr($i, 1, length($i) - 1)
		}
		t0 == "" && $0 ~ from { t0 = ts(); next }
		t0 != "" && $0 ~ to { printf "%d\n", (ts() - t0) * 1000; exit }
	' $tr/trace
}
returned="rt_spinner_test: remeasure returned"
long_ms=$((2500 + 3 * margin_ms))
# What a stalled pair's turn waits past timeout_ms: the slack for a last
# window, PP_SLACK_MS in module/pingpong.c (and irqoff_max_us, 20 us).
slack_ms=100
part2() {
	insmod "$ko" timeout_ms=$long_ms $params
	# Before the spinner: enabling an event first sizes the trace buffers
	# with a work item on every CPU, which the spinner would starve.
	traced=$(trace_migrations && echo 1)
	start_spinner 2 || echo "# the spinner did not start"
	t0=$(ms_now)
	taskset -c 0 sh -c "echo 1 > $cpu/tsc/remeasure
		[ -n '$traced' ] && echo '$returned' > $tr/trace_marker" &
	rpid=$!
	# cpu1's pair waits for its thread to start (up to timeout_ms); cpu2's
	# thread starts and waits for its turn.  Both hold the module then: an
	# rmmod must be refused, not let in to wait for cpu2's thread, which
	# the spinner is about to starve.
	idle_on_cpu2 || echo "# cpu2's thread was not seen waiting for its turn"
	held_by_its_threads 50
	timed rmmod tsc_freq_khz 2> "$tmp/rmmod"
	echo "# rmmod while cpu1's thread waits to start (refcnt $(cat /sys/module/tsc_freq_khz/refcnt 2>&1)): exit $st, $took ms: $(cat "$tmp/rmmod")"
	refused_early=$([ $st -ne 0 ] && [ -d /sys/module/tsc_freq_khz ] && echo 1)
	told=$(($(ms_now) - t0))
	kill -USR1 "$spid"
	spinning_on 2 || echo "# the spinner did not move to cpu2"
	moved=$(($(ms_now) - t0))
	wait $rpid
	took=$(($(ms_now) - t0))
	echo "# remeasure, the spinner told to move from cpu1 at $told ms, seen on cpu2 at $moved ms: $took ms"
	echo "# cpu1: $(cat $cpu/cpu1/tsc/status); cpu2: $(cat $cpu/cpu2/tsc/status), $(cat $cpu/cpu2/tsc/unmeasured_reason 2>&1)"
	# The stalled turn and what follows it are timed from the end of
	# cpu1's pair (its side moved to cpu0 to end) to the writer's return,
	# both on the kernel's trace clock: not from the move, after which
	# cpu1's pair, under emulation, took from 20 ms to 1.7 s, and not
	# with this shell's clock, which the reference's side, spinning at
	# nice -20 on cpu0 for the whole turn, held up for seconds.
	if [ -n "$traced" ]; then
		turn=$(ms_between 'comm=tscfk/1 .*orig_cpu=1 dest_cpu=0$' "$returned")
		bound2=$((long_ms + slack_ms + rest_ms + margin_ms))
		echo "# from cpu1's pair's end to the writer's return: ${turn:-not traced} ms (bound $bound2 ms: timeout_ms $long_ms and the last window's $slack_ms, the other pairs' $rest_ms, the margin)"
		ktap_check "the measurement ends within the bound" test "${turn:-$((bound2 + 1))}" -le $bound2
	else
		ktap_skip "the measurement ends within the bound" "no sched_migrate_task tracepoint to time cpu2's turn by"
	fi
	ktap_check "cpu2 reads stalled, cpu1 measured" \
		test "$(cat $cpu/cpu2/tsc/unmeasured_reason 2>&1) $(cat $cpu/cpu1/tsc/status)" = \
		"stalled measured"
	# The reference's side waited the whole stalled turn for answers that
	# did not come: after each unanswered window, once nothing came for
	# a jiffy, interrupts on for a jiffy or nine times its length,
	# whichever is longer (module/pingpong.c, pp_pause()).  The answered
	# pair, cpu1's, adds its 1000 rounds' windows (200 ms of them seen
	# with 4 vCPUs on 2 host CPUs).
	irqoff=$(cat $cpu/tsc/reference_irqoff_ns)
	span=$(($(cat $cpu/tsc/last_measured_ns) - $(cat $cpu/tsc/measured_since_ns)))
	echo "# the reference CPU's interrupts-off time: $irqoff ns of the measurement's $span ns ($((irqoff * 1000 / (span > 0 ? span : 1))) per mille)"
	ktap_check "the reference CPU had interrupts off a tenth of the measurement at most" \
		test "$span" -gt 0 -a $((irqoff * 10)) -le "$span"
	ktap_check "the kernel log says so once" \
		test "$(dmesg | sed -n "/$mark/,\$p" | grep -c 'cpu2: left unmeasured: stalled')" = 1

	# cpu2's thread, given up on, was moved to cpu0 and ended there: nothing
	# of the module waits for cpu2 any more.
	timed gone_within
	echo "# rmmod, the spinner on cpu2: exit $st, $took ms (bound $bound_ms ms)"
	ktap_check "rmmod succeeds within the bound while the spinner owns cpu2" \
		test $st -eq 0 -a $took -le $bound_ms
	on=$(kill -0 "$spid" 2> /dev/null && awk '{ print $39 }' "/proc/$spid/stat")
	echo "# the spinner: $( [ -n "$on" ] && echo "alive, last on cpu$on" || echo gone)"
	ktap_check "the spinner still spins on cpu2" test "$on" = 2
	stop_spinner
	if [ -n "$traced" ]; then
		echo 0 > $migrate/enable
		moves=$(grep -oE 'comm=tscfk/[0-9]+ .*orig_cpu=[0-9]+ dest_cpu=[0-9]+' $tr/trace |
			awk '{ split($1, c, "/"); split($NF, d, "="); if (c[2] != d[2]) print }')
		echo "# moves of the module's threads off their CPUs: $(grep -c . <<< "$moves")"
		[ -z "$moves" ] || head -n 4 <<< "$moves" | sed 's/^/#   /'
		ktap_check "cpu2's thread, given up on, was moved to cpu0" \
			grep -q 'comm=tscfk/2 .*orig_cpu=2 dest_cpu=0$' <<< "$moves"
		if in_list 3 "$(cat $cpu/isolated)" && ! in_list 3 "$nohz"; then
			ktap_check "no thread of the module was moved to cpu3, isolated by isolcpus= alone" \
				test -z "$(grep 'dest_cpu=3$' <<< "$moves")"
		else
			ktap_skip "no thread of the module was moved to cpu3, isolated by isolcpus= alone" \
				"no cpu3 isolated by isolcpus= alone (boot with isolcpus=3)"
		fi
		echo > $tr/trace
	else
		ktap_skip "cpu2's thread, given up on, was moved to cpu0" "no sched_migrate_task tracepoint"
		ktap_skip "no thread of the module was moved to cpu3, isolated by isolcpus= alone" \
			"no sched_migrate_task tracepoint"
	fi
	ktap_check "rmmod while cpu1's thread waits to start is refused" test "$refused_early" = 1
}

# --- 3. What waits for a CPU whose thread does not start, and what not ---
# The spinner owns cpu1 and the measurement waits timeout_ms (6 s) for its
# thread, outside the hotplug lock: cpu2 goes offline meanwhile at once,
# not after that wait.  A writer of remeasure waits for the measurement
# interruptibly: killed, it is gone at once, while the measurement goes on.
# Both steps together, each within the margin, must end well before the
# 6 s they must not wait for.
part3_names=("a CPU goes offline at once while another's thread is awaited"
	"a killed remeasure writer is gone at once, the measurement going on")
wait3_ms=6000
part3_skip=$no_cpu2
[ -z "$part3_skip" ] && [ $((2 * margin_ms + 1000)) -ge $wait3_ms ] &&
	part3_skip="the margin, $margin_ms ms, twice, is not well below timeout_ms=$wait3_ms: no wait could be told from none"
# shellcheck disable=SC2317 # run by its part's steps, by name
kill_writer() { kill -TERM "$wpid"; wait "$wpid" 2> /dev/null; }
part3() {
	insmod "$ko" timeout_ms=$wait3_ms $params
	start_spinner || echo "# the spinner did not start"
	sh -c "echo 1 > $cpu/tsc/remeasure" 2> /dev/null &
	wpid=$!
	held_by_its_threads 50
	sleep 0.2
	timed sh -c "echo 0 > $cpu/cpu2/online"
	echo "# cpu2 offline while cpu1's thread is awaited for $wait3_ms ms: exit $st, $took ms (bound $margin_ms ms)"
	ktap_check "a CPU goes offline at once while another's thread is awaited" \
		test $st -eq 0 -a $took -le "$margin_ms"
	timed kill_writer
	held=$(cat /sys/module/tsc_freq_khz/refcnt)
	echo "# the writer killed: gone after $took ms (bound $margin_ms ms), the module's threads holding it: $held"
	ktap_check "a killed remeasure writer is gone at once, the measurement going on" \
		test $took -le "$margin_ms" -a "$held" -gt 0
	echo 1 > $cpu/cpu2/online
	stop_spinner
	gone_within || echo "# the module did not unload"
}

# --- 4. A pair's turn waiting for a stalled side holds no hotplug lock ---
part4_names=("a CPU goes offline at once during a stalled pair's turn"
	"a cpus_read_lock() user behind it returns at once")
wait4_ms=6000
part4_skip=$part3_skip
[ -z "$part4_skip" ] && [ ! -d $cpu/cpu3 ] &&
	part4_skip="needs a fourth CPU, cpu3, to run its steps on: the reference's side keeps cpu0 busy during a stalled turn"
[ -z "$part4_skip" ] && [ ! -w /proc/sys/kernel/sched_schedstats ] &&
	part4_skip="no /proc/sys/kernel/sched_schedstats (CONFIG_SCHEDSTATS) to flip a static key with"
# shellcheck disable=SC2317 # run by its part's steps, by name
flip_schedstats() { echo $((1 - schedstats)) > /proc/sys/kernel/sched_schedstats; }
part4() {
	schedstats=$(cat /proc/sys/kernel/sched_schedstats)
	insmod "$ko" timeout_ms=$wait4_ms $params
	start_spinner 2 || echo "# the spinner did not start"
	t0=$(ms_now)
	long_ms=$wait4_ms
	taskset -c 0 sh -c "echo 1 > $cpu/tsc/remeasure" &
	rpid=$!
	idle_on_cpu2 || echo "# cpu2's thread was not seen waiting for its turn"
	(
		taskset -p -c 3 $BASHPID > /dev/null
		kill -USR1 "$spid"
		spinning_on 2 || echo "# the spinner did not move to cpu2"
		# cpu1's pair, its thread free to start now, is measured and
		# released (its threads end); then cpu2's turn waits up to 6 s
		# for its stalled side.
		threads_gone tscfk/1 || echo "# cpu1's threads did not end"
		sleep 0.5
		(timed sh -c "echo 0 > $cpu/cpu1/online"; echo "$st $took" > "$tmp/offline") &
		sleep 0.2
		timed flip_schedstats
		echo "$took" > "$tmp/flip"
		wait
	)
	read -r st took < "$tmp/offline"
	read -r flip < "$tmp/flip"
	echo "# during cpu2's stalled turn: cpu1 offline exit $st, $took ms; the schedstats key flipped in $flip ms (bound $margin_ms ms, the turn lasting $wait4_ms ms)"
	ktap_check "a CPU goes offline at once during a stalled pair's turn" \
		test "$st" -eq 0 -a "$took" -le "$margin_ms"
	ktap_check "a cpus_read_lock() user behind it returns at once" test "$flip" -le "$margin_ms"
	echo "$schedstats" > /proc/sys/kernel/sched_schedstats
	echo 1 > $cpu/cpu1/online
	stop_spinner
	wait $rpid
	gone_within || echo "# the module did not unload"
}

if [ -n "$part2_skip" ]; then
	for name in "${part2_names[@]}"; do ktap_skip "$name" "$part2_skip"; done
else
	part2
fi
if [ -n "$part3_skip" ]; then
	for name in "${part3_names[@]}"; do ktap_skip "$name" "$part3_skip"; done
else
	part3
fi
if [ -n "$part4_skip" ]; then
	for name in "${part4_names[@]}"; do ktap_skip "$name" "$part4_skip"; done
else
	part4
fi
ktap_finish
