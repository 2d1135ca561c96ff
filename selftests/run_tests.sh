#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Run every tsc_freq_khz selftest, in the order their module state needs,
# as one KTAP stream.  Runs wherever the module can be loaded: on a host as
# root, or in the QEMU guest (scripts/vm/run-in-vm.sh).
#
# Usage: run_tests.sh MODULE.ko [BINDIR]
#   BINDIR holds the built tests (default: build/selftests next to this dir).
# Environment: TSCFK_CYCLES (load/unload cycles, default 200),
#   TSCFK_CHRONYD (chronyd for ntp_bound_test, unpacked on the host),
#   TSCFK_FAKE_KO (selftests/kmod's module, built for this kernel),
#   TSCFK_SKIP (tests not to run here, each reported as a skip, with
#   TSCFK_SKIP_WHY as the reason), or TSCFK_ONLY (the only tests to run
#   here, the others skipped with that reason; load and unload always run;
#   one of them that skips itself whole each time it runs fails),
#   TSCFK_CLOCKS_ON_TSC (1: the kernel's clocks must read the TSC here:
#   sysclock_exact_test, and ntp_bound_test's terms on the page, fail
#   where they would skip).
# Exit: 0 all passed, 1 something failed, 4 everything was skipped, 2 a
# name in TSCFK_SKIP or TSCFK_ONLY that is no test.
# Unlike kselftest's run_tests, a failure makes the exit status non-zero.

set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../testlib/unload.sh
. "$here/../testlib/unload.sh"
ko=${1:?usage: run_tests.sh MODULE.ko [BINDIR]}
bin=${2:-$here/../build/selftests}
ko=$(realpath "$ko")

# Under QEMU's TCG with two CPUs or more, jitter_causes_test, which runs
# tsc-jitter, runs with its perf events held open by perf_keys_hold, so
# that its own opens and closes leave the kernel's text alone: a race of
# the emulator's with the kernel's live text patching kills the guest
# otherwise (the helper says how).  The hold's start flips each key once;
# it is never released, as its end would flip them again: the guest powers
# off with it.  tracefs, which the holder needs for the tracepoints' ids,
# is mounted if nobody has.
keys_holder=''
keys_hold() {
	local tr=/sys/kernel/tracing
	grep -q 'QEMU TCG' /proc/cpuinfo && [ "$(nproc)" -ge 2 ] || return 0
	[ -z "$keys_holder" ] || return 0
	[ -e $tr/events ] || mount -t tracefs nodev $tr 2> /dev/null
	"$bin/perf_keys_hold" > "$tmp/keys" 2>&1 &
	keys_holder=$!
	# Its line says the events are open; up to 10 s for it, under TCG.
	for _ in $(seq 100); do
		[ -s "$tmp/keys" ] || ! kill -0 "$keys_holder" 2> /dev/null && break
		sleep 0.1
	done
	echo "# $(head -n 1 "$tmp/keys")"
}

# lifecycle_test loads with finit_module(2) itself and needs a plain .ko:
# DKMS 3.0.10 compresses with xz's default CRC64 check, which the kernel's
# own xz decoder refuses (EINVAL); kmod's insmod inflates it in userspace.
plain_ko=$ko
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $ko in
*.xz) plain_ko=$tmp/tsc_freq_khz.ko; xz -dc "$ko" > "$plain_ko" ;;
esac

# Of the tools' tests, only what needs the module runs here: tsc-report's
# checks against the system, with the module loaded.  The rest would run
# in a guest as they do on the host, where libtsc's check runs them whole.
tests=(estimator_test unload lifecycle_test clock_page_test stress_test scaling_test clients_test
       load sysfs_test trigger_test hotplug_test libtsc_test sysclock_exact_test ntp_bound_test
       timekeeper_stall_test tsc_report_test
       unload libtsc_test jitter_causes_test rt_spinner_test kernel_file_test kmemleak dmesg_clean)

# A name in TSCFK_SKIP or TSCFK_ONLY that is no test here is a mistake (a
# test renamed, a typo): it would leave a test running that should not,
# or silently drop the one a guest exists for.
for t in ${TSCFK_SKIP:-} ${TSCFK_ONLY:-}; do
	if [[ " ${tests[*]} " != *" $t "* ]]; then
		echo "run_tests.sh: no test named '$t' (TSCFK_SKIP, TSCFK_ONLY)" >&2
		exit 2
	fi
done
n=0 passed=0 failed=0 skipped=0

echo "TAP version 13"
echo "1..${#tests[@]}"

# Where each test runs last, and which have run (not skipped whole).
declare -A last_at ran
for i in "${!tests[@]}"; do
	last_at[${tests[$i]}]=$((i + 1))
done

# Record one result; $1 is the exit status (0 pass, 4 skip, else fail).
# A test that TSCFK_ONLY names is what this guest is for: if it skipped
# itself whole every time it was run (some run twice, with and without
# the module, and skip a case in one for the other), the last time
# fails, lest the guest pass having tested nothing.
result() {
	local status=$1 name=$2 reason=${3:-}
	n=$((n + 1))
	[ "$status" = 4 ] || ran[$name]=1
	if [ "$status" = 4 ] && [[ " ${TSCFK_ONLY:-} " == *" $name "* ]] &&
		[ "${last_at[$name]}" = $n ] && [ -z "${ran[$name]:-}" ]; then
		echo "# $name skipped itself whole each time, but TSCFK_ONLY names it: this guest runs it for its purpose"
		status=1
	fi
	case $status in
	0) passed=$((passed + 1)); echo "ok $n selftests: tsc_freq_khz: $name" ;;
	4) skipped=$((skipped + 1))
	   echo "ok $n selftests: tsc_freq_khz: $name # SKIP $reason" ;;
	*) failed=$((failed + 1))
	   echo "not ok $n selftests: tsc_freq_khz: $name # exit=$status" ;;
	esac
}

# A test program's output is nested under "# ", as kselftest does, with
# how long it took.  A program whose every test skipped is a skip, with
# its first reason, even if it exited 0 (kselftest_harness.h in 6.1 does).
run() {
	local name=$1 status out=$tmp/out t0=$EPOCHREALTIME
	shift
	echo "# selftests: tsc_freq_khz: $name"
	"$@" 2>&1 | tee "$out" | sed -u 's/^/# /'
	status=${PIPESTATUS[0]}
	awk -v a="$t0" -v b="$EPOCHREALTIME" -v n="$name" 'BEGIN { printf "# %s took %.1f s\n", n, b - a }'
	if [ "$status" -eq 0 ] && grep -q '^# Totals: pass:0 fail:0 .*skip:[1-9]' "$out"; then
		status=4
	fi
	result "$status" "$name" "$(sed -n -e 's/^ok .* # SKIP //p' -e 's/^1\.\.0 # SKIP //p' "$out" | head -n1)"
}

loaded() { [ -d /sys/module/tsc_freq_khz ]; }

mark="tsc_freq_khz selftests start $$.$RANDOM"
root=0
if [ "$(id -u)" -eq 0 ] && [ -w /dev/kmsg ]; then
	root=1
	echo "$mark" > /dev/kmsg
fi

# A kernel with kmemleak (the debug kernel of make check): what was
# allocated before the tests is not theirs to report.
kmemleak=/sys/kernel/debug/kmemleak
if [ $root -eq 1 ]; then
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug 2> /dev/null
	[ -w $kmemleak ] && echo clear > $kmemleak
fi

for t in "${tests[@]}"; do
	if [[ " ${TSCFK_SKIP:-} " == *" $t "* ]] ||
		[[ -n ${TSCFK_ONLY:-} && $t != load && $t != unload && " $TSCFK_ONLY " != *" $t "* ]]; then
		result 4 "$t" "${TSCFK_SKIP_WHY:-TSCFK_SKIP or TSCFK_ONLY}"
		continue
	fi
	case $t in
	estimator_test)
		run $t "$bin/$t" ;;
	*) if [ $root -eq 0 ]; then
		result 4 "$t" "needs root and /dev/kmsg"
		continue
	   fi ;;&
	unload)
		if loaded; then tscfk_unload; fi
		loaded; result $(( $? == 0 ? 1 : 0 )) "$t" ;;
	load)
		insmod "$ko"; st=$?
		[ $st -eq 0 ] && ! loaded && st=1
		result $st "$t" ;;
	lifecycle_test|clock_page_test|stress_test|scaling_test)
		run $t env TSCFK_KO="$plain_ko" "$bin/$t" ;;
	clients_test)
		run $t "$here/clients_test.sh" "$ko" "$bin" ;;
	tsc_report_test)
		# libtsc's tool, from the same build tree as the tests.
		run $t "$here/../userspace/tests/$t.sh" --system "$bin/../userspace/tsc-report" \
			"$here/../userspace/tools/tsc-report.schema.json" ;;
	jitter_causes_test)
		keys_hold
		run $t "$here/$t.sh" "$bin/../userspace/tsc-jitter" "$bin/cause_inject" ;;
	rt_spinner_test)
		run $t "$here/$t.sh" "$plain_ko" "$bin/rt_spinner" ;;
	kmemleak)
		# kmemleak reports no object younger than 5 s (MSECS_MIN_AGE in
		# mm/kmemleak.c): let the last test's allocations age first.
		if [ ! -w $kmemleak ]; then
			result 4 "$t" "no $kmemleak: the kernel has no DEBUG_KMEMLEAK"
			continue
		fi
		sleep 6
		echo scan > $kmemleak
		leaks=$(cat $kmemleak)
		echo "# selftests: tsc_freq_khz: $t"
		# shellcheck disable=SC2001 # every line, not the string
		sed 's/^/# /' <<< "$leaks"
		result "$([ -z "$leaks" ] && echo 0 || echo 1)" "$t" ;;
	kernel_file_test)
		if [ -z "${TSCFK_FAKE_KO:-}" ]; then
			result 4 "$t" "TSCFK_FAKE_KO not set"
		else
			run $t "$here/$t.sh" "$ko" "$TSCFK_FAKE_KO"
		fi ;;
	dmesg_clean)
		# Everything the kernel said since we started; the module's own
		# messages are summarised, counted, for the record.
		log=$(dmesg | sed -n "/$mark/,\$p" | sed 's/^\[[^]]*\] //')
		# BUG: and WARNING: cover lockdep, KASAN, KCSAN, debug objects
		# and sleeping in atomic context too.  A function of ours in
		# brackets is the kernel complaining about it (a deprecated
		# workqueue, say), or a trace.
		bad=$(grep -E 'WARNING:|BUG:|Oops|Call Trace|general protection|soft lockup|hard LOCKUP|rcu.*(stall|Stall)|blocked for more than|refcount_t|kmemleak: .*suspected|ODEBUG|lockdep|\[tsc_freq_khz\]' <<< "$log")
		echo "# selftests: tsc_freq_khz: $t"
		grep 'tsc_freq_khz:' <<< "$log" | sort | uniq -c | sort -rn | head -5 | sed 's/^/# /'
		if [ -z "$log" ]; then
			echo "# the start marker is gone from the kernel log"
			result 1 "$t"
		elif [ -n "$bad" ]; then
			# shellcheck disable=SC2001 # every line, not the string
			sed 's/^/# /' <<< "$bad"
			result 1 "$t"
		else
			result 0 "$t"
		fi ;;
	*_test)
		run $t "$bin/$t" ;;
	esac
done

echo "# Totals: pass:$passed fail:$failed xfail:0 xpass:0 skip:$skipped error:0"
if [ $failed -gt 0 ]; then
	exit 1
elif [ $passed -eq 0 ]; then
	exit 4
fi
exit 0
