#!/bin/bash
# Run a command inside a QEMU guest that sees the host's filesystem.
#
# The host kernel cannot load modules, so module tests boot a stock Debian
# kernel under TCG (KVM hangs here) whose root is the host's / (read-only 9p)
# with the repository mounted writable at the same path. The command runs
# as root in `chroot /host` with cwd = repository root; its exit status comes
# back through qemu's isa-debug-exit device.
#
# Exit: the command's status; 124 on timeout (or twice no command within the
# boot timeout); 125 if the guest died without
# reporting or the kernel log shows a panic/BUG/Oops/WARNING, a lockup, an RCU
# stall or a hung task; 130 on Ctrl-C.
# Concurrent runs of the same kernel and --smp need distinct --log files.
set -euo pipefail

usage() {
	cat >&2 <<EOF
usage: $0 [--kernel RELEASE | --image BZIMAGE] [--smp N] [--mem MB] [--timeout SEC]
          [--boot-timeout SEC] [--cpu MODEL] [--append "kernel args"] [--env NAME]... [--log FILE] [--quiet]
          [--errors-on-console] [--power-button] -- COMMAND [ARG]...
--quiet: show only the command's output (the log keeps the whole console)
--power-button: press the guest's ACPI power button N seconds after each
          line "vmrun: press the power button in N s" on its console (a
          wake-up source from suspend-to-idle; needs python3)
--errors-on-console: the kernel prints only errors to the console as they
          come (loglevel=4), its whole log when the command ends
--image: a kernel of our own with virtio-pci and 9p built in (no modules)
--boot-timeout: a guest whose command has not started by then is booted once more
defaults: newest /boot/vmlinuz-*, --smp 1, --mem 1024, --timeout 600,
          --boot-timeout 180, --cpu max,
          --log build/vm/RELEASE-smpN.log; \$CI is always passed to the guest.
EOF
	exit 2
}
die() { echo "run-in-vm: $*" >&2; exit 125; }

here=$(cd "$(dirname "$0")" && pwd -P)
repo=$(git -C "$here" rev-parse --show-toplevel 2>/dev/null) || repo=$(cd "$here/../.." && pwd -P)
build=$repo/build/vm

kernel='' kroot='' image='' smp=1 mem=1024 tmo=600 boot_tmo=180 cpu=max append='' log='' envs=(CI) quiet='' button=''
while (($#)); do
	case $1 in
	--kernel) kernel=${2:?}; shift 2 ;;
	--image) image=${2:?}; shift 2 ;;
	--smp) smp=${2:?}; shift 2 ;;
	--mem) mem=${2:?}; shift 2 ;;
	--timeout) tmo=${2:?}; shift 2 ;;
	--boot-timeout) boot_tmo=${2:?}; shift 2 ;;
	--cpu) cpu=${2:?}; shift 2 ;;
	--append) append="$append ${2?}"; shift 2 ;;
	--log) log=${2:?}; shift 2 ;;
	--quiet) quiet=1; shift ;;
	--power-button) button=1; shift ;;
	# 6.1's lockdep flags any console write from a hard interrupt
	# (printk takes the serial port's spinlock_t under the raw
	# console_owner: "Invalid wait context"; fixed upstream by "printk:
	# Avoid false positive lockdep report for legacy printing"), and then
	# turns itself off.  With warnings kept off the console as they come,
	# the debug kernel's lockdep stays on for our code.
	--errors-on-console) append="$append loglevel=4 vmrun.dmesg=1"; shift ;;
	--env) [[ ${2:-} =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || usage; envs+=("$2"); shift 2 ;;
	--) shift; break ;;
	*) usage ;;
	esac
done
(($#)) || usage
[[ $tmo =~ ^[1-9][0-9]*$ && $boot_tmo =~ ^[1-9][0-9]*$ ]] ||
	die "--timeout and --boot-timeout take whole seconds, at least 1"
((boot_tmo <= tmo)) || boot_tmo=$tmo
if [[ -n $image ]]; then
	[[ -z $kernel ]] || usage
	[[ -r $image ]] || die "no readable $image"
	kernel=image
	vmlinuz=$image
else
	if [[ -z $kernel ]]; then
		kernel=$(find /boot -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -n1)
		kernel=${kernel#/boot/vmlinuz-}
	fi
	# A kernel this machine has, or one of the kernel roots'
	# (scripts/kernel-roots.sh): its image and modules are there.
	[[ -n $kernel ]] || die "no kernel in /boot"
	[[ -r /boot/vmlinuz-$kernel ]] || kroot=$("$repo/scripts/kernel-roots.sh" root "$kernel") ||
		die "no readable /boot/vmlinuz-$kernel, nor a kernel root with it"
	vmlinuz=$kroot/boot/vmlinuz-$kernel
	[[ -r $vmlinuz ]] || die "no readable $vmlinuz"
fi
# The repo path travels on the kernel command line, which splits on spaces.
[[ $repo != *[[:space:]]* ]] || die "repository path contains whitespace: $repo"
log=${log:-$build/$kernel-smp$smp.log}
mkdir -p "$build" "$(dirname "$log")"

# Rebuild the cached initramfs when its inputs change (scripts, busybox, kernel
# modules; an --image has none).
initrd=$build/initramfs-$kernel.cpio.gz
deps=("$here/mkinitramfs.sh" "$here/guest-init.sh" "$(command -v busybox || echo /bin/busybox)")
[[ -n $image ]] || deps+=("$kroot/lib/modules/$kernel/modules.dep")
for dep in "${deps[@]}"; do
	if [[ ! -e $initrd || $dep -nt $initrd ]]; then
		if [[ -n $image ]]; then
			"$here/mkinitramfs.sh" --builtin "$initrd"
		else
			"$here/mkinitramfs.sh" "$kernel" "$initrd" ${kroot:+"$kroot"}
		fi || die "initramfs build failed"
		break
	fi
done

# The command goes through a file in the writable share rather than the kernel
# command line: no quoting or length limits, and the pid keeps concurrent runs apart.
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
cmdrel=build/vm/cmd.$$
# QEMU's monitor, for --power-button: a socket of this run's own.
mon=$build/monitor.$$
trap 'rm -f "$repo/$cmdrel" "$log.pid" "$log.hung-mark" "$mon"' EXIT
{
	echo "cd $(q "$repo") || exit 125"
	echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb"
	for name in "${envs[@]}"; do
		[[ -v $name ]] && echo "export $name=$(q "${!name}")"
	done
	printf 'exec'
	for arg in "$@"; do printf ' %s' "$(q "$arg")"; done
	echo
} >"$repo/$cmdrel"

# tsc=nowatchdog: under TCG the clocksource watchdog compares two emulated
# clocks with the host's scheduling between them.  7.3 marks the TSC
# unstable ("frequency skew") a few seconds into most boots on an AMD Zen 5
# host: every test of the page's exactness then skips, and the static keys'
# live patching that follows risks the emulator's int3 race (below), which
# kills the guest; under the timekeeper stall test's readers it also takes
# the notifier's p99 to milliseconds (13-22 us without).  6.1's own
# boot-time sync check still marks the TSC unstable with 2 CPUs or more
# (mk/vm.mk, clocks_on_tsc).  migrate_test.py boots with the same line.
cmdline="console=ttyS0 panic=-1 oops=panic printk.time=1 tsc=nowatchdog"
# shellcheck disable=SC2054 # commas are part of qemu option values
qemu=(qemu-system-x86_64 -accel tcg -cpu "$cpu" -smp "$smp" -m "$mem"
	-nographic -no-reboot -nic none -pidfile "$log.pid"
	-device isa-debug-exit,iobase=0x501,iosize=0x01
	-kernel "$vmlinuz" -initrd "$initrd"
	-append "$cmdline vmrun.repo=$repo vmrun.cmd=$cmdrel $append"
	-virtfs local,path=/,mount_tag=host,security_model=passthrough,readonly=on,multidevs=remap
	-virtfs "local,path=$repo,mount_tag=work,security_model=passthrough,multidevs=remap")
[[ -z $button ]] || qemu+=(-monitor "unix:$mon,server=on,wait=off")

now() { local t=${EPOCHREALTIME//[!0-9]/}; echo $((10#$t / 1000)); } # ms
secs() { printf '%d.%01d s' $(($1 / 1000)) $(($1 % 1000 / 100)); }
# The kernel patches its own text live (static keys, e.g. sched_clock's when
# the TSC is marked unstable): int3 first, then the new bytes, with an IPI
# to every CPU between.  Under multi-threaded TCG a vCPU can still take
# the int3 after the patch is complete, and the kernel, no longer patching,
# oopses (seen once, 6.12 with 4 vCPUs: sched_clock_idle_wakeup_event).
# Hardware does not do this and none of our code is on the trace: such a
# death is the emulator's, and the guest runs once more, saying so.  An
# int3 with a frame of ours on its trace is ours, and fails.
text_poke_trap() {
	local oops
	oops=$(sed -n '/\] Oops: int3/,/Kernel panic/p' "$log")
	[[ -n $oops ]] && ! grep -aqE '\[(tsc_freq_khz|tscfk_[a-z_]+)\]' <<<"$oops"
}
# A guest whose command has not started within boot_tmo has hung in its
# kernel's boot, before anything of ours ran (seen once: 6.1 with 4 vCPUs,
# a CPU stuck leaving idle at 1.2 s, RCU stalls until the timeout).  It is
# stopped and booted once more, its log kept aside, rather than spending
# the whole timeout.  It marks the stop ($log.hung-mark) before it kills:
# the guest's end wakes the caller, who then stops this watcher, perhaps
# before it could return, so no exit status of its can say so; from the
# mark on it ignores that, so that a mark always comes with its kill.
boot_watch() {
	local waited=0
	while ((waited < boot_tmo)); do
		sleep 1
		waited=$((waited + 1))
		grep -aq 'vmrun: starting command' "$log" 2>/dev/null && return 0
	done
	# Only our qemu: the pid file may be a dead one's, its pid reused.
	local pid
	pid=$(cat "$log.pid") && grep -aqF -- "$log.pid" "/proc/$pid/cmdline" || return 1
	trap '' TERM
	: >"$log.hung-mark"
	kill "$pid" || rm -f "$log.hung-mark"
	# run-in-vm_test.sh's: a watcher slow to return after its kill.
	sleep "${TSCFK_TEST_WATCH_LAG:-0}"
}
# --power-button: the guest asks for a press of its ACPI power button, its
# wake-up source from suspend-to-idle, with a line "vmrun: press the power
# button in N s".  QEMU's RTC cannot end an s2idle: it raises its wake
# event only for a guest QEMU suspended itself.  The monitor's
# system_powerdown raises the button's fixed ACPI event.
press_power_button() {
	python3 - "$mon" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b"system_powerdown\n")
seen = b""
while seen.count(b"(qemu)") < 2:  # the banner's prompt, then the command's
    data = s.recv(4096)
    if not data:
        break
    seen += data
EOF
}
button_watch() {
	local pressed=0 asks
	while sleep 0.2; do
		mapfile -t asks < <(sed -n 's/^vmrun: press the power button in \([0-9]\{1,2\}\) s$/\1/p' "$log" 2>/dev/null)
		while ((pressed < ${#asks[@]})); do
			sleep "${asks[pressed]}"
			if press_power_button; then
				echo "vmrun: pressed the power button (asked $((pressed + 1)))"
			else
				echo "vmrun: could not press the power button"
			fi
			pressed=$((pressed + 1))
		done
	done
}
start=$(now) booted=''
# Stream the console to stdout and the log; note when the command starts.
# lastpipe keeps `booted` set by the loop; \r comes from the serial line.
shopt -s lastpipe
# --foreground keeps qemu in our process group so that Ctrl-C reaches it.
interrupted=''
trap 'interrupted=1' INT TERM
: >"$log"
rm -f "$log.hung-mark"
set +e
# A guest that stops before the command starts never ran anything of ours:
# that is the emulator (seen once in hundreds of boots: 6.1, 4 vCPUs, gone
# during PCI enumeration), and it is booted once more, saying so.  Any
# kernel trouble in the first boot is still in the log and still fails.
# The emulator's int3 race below is booted again twice: the 7.3 kernel
# under 2 vCPUs met it twice in one guest's run, at boot and when
# tsc-jitter's tracepoints were switched on.  tsc-jitter's tests, which
# set it off most, patch nothing (selftests/perf_keys_hold.c).  Each kind
# counts on its own: a hang after an int3 is booted again too (the 8-vCPU
# scaling guest met both in one run).
hangs=0 stops=0
for attempt in 1 2 3; do
	boot_watch </dev/null >/dev/null 2>&1 &
	watch=$!
	bwatch=''
	if [[ -n $button ]]; then
		button_watch </dev/null >"$log.button" 2>&1 &
		bwatch=$!
	fi
	timeout --foreground -k 10 "$tmo" "${qemu[@]}" </dev/null 2>&1 |
		while IFS= read -r line || [[ -n $line ]]; do
			line=${line%$'\r'}
			printf '%s\n' "$line" >&3
			# Quiet: the command's own lines, not firmware, kernel or vmrun ones.
			if [[ -z $quiet ]] || [[ -n $booted && $line != '['*']'* && $line != vmrun:* ]]; then
				printf '%s\n' "$line"
			fi
			[[ -z $booted && $line == *'vmrun: starting command'* ]] && booted=$(now)
		done 3>>"$log"
	rc=${PIPESTATUS[0]}
	[[ -z $bwatch ]] || { kill "$bwatch" 2>/dev/null; wait "$bwatch"; }
	kill "$watch" 2>/dev/null
	wait "$watch"
	hung=0
	[[ ! -e $log.hung-mark ]] || hung=1
	rm -f "$log.hung-mark"
	if ((hung)) && [[ -z $interrupted ]]; then
		((hangs++ == 0 && attempt < 3)) || break
		mv "$log" "$log.hung"
		echo "run-in-vm: the guest's command had not started after ${boot_tmo}s, a hang in its kernel's boot (kept in $log.hung): booting it again" |
			tee "$log" >&2
		continue
	fi
	if [[ -n $interrupted ]] || ((rc == 124 || rc == 137 || attempt == 3)); then
		break
	fi
	# Before the command, an int3 of the kernel's own is the race below
	# too: it takes that path, which keeps it out of the log it judges.
	if [[ -z $booted ]] && ! text_poke_trap; then
		((stops++ == 0)) || break
		echo "run-in-vm: the guest stopped before the command started (qemu exit $rc): booting it again" |
			tee -a "$log" >&2
		continue
	fi
	text_poke_trap || break
	kept=$log.int3$( ((attempt == 1)) || echo ".$attempt")
	mv "$log" "$kept"
	echo "run-in-vm: the guest died of an int3 trap in the kernel's own text, none of ours, the emulator's race with live text patching (kept in $kept): running it again" |
		tee "$log" >&2
	booted=''
done
set -e
trap - INT TERM
end=$(now)
echo "run-in-vm: kernel $kernel smp $smp: boot $(if [[ -n $booted ]]; then secs $((booted - start)); else echo n/a; fi), total $(secs $((end - start))), log $log" >&2

# Kernel trouble fails the run even if the command passed. Only lines with a
# printk timestamp count, so a test printing "WARNING:" itself is not flagged.
trouble=$(grep -E '\[ *[0-9]+\.[0-9]+\].*(Kernel panic|BUG:|Oops|WARNING:|soft lockup|hard LOCKUP|rcu.*(stall|Stall)|blocked for more than)' \
	"$log" | head -n 20) || true
[[ -z $trouble ]] || printf 'run-in-vm: kernel log shows:\n%s\n' "$trouble" >&2
[[ -z $interrupted ]] || { echo "run-in-vm: interrupted" >&2; exit 130; }
# qemu exits with ((status << 1) | 1) & 0xff, so only 7 bits survive; the full
# status is also printed by the guest init. Odd rc 1 without that line is qemu
# failing on its own.
reported=$(sed -n 's/.*vmrun: command exited with status \([0-9]*\).*/\1/p' "$log" | tail -n1)
if ((hung)); then
	echo "run-in-vm: timeout: the last boot allowed ($attempt of 3, $hangs hung) had not started the command after ${boot_tmo}s" >&2
	exit 124
fi
# timeout gives 124, or 137 after -k; a status of 68 also makes qemu exit 137.
if ((rc == 124 || rc == 137)) && [[ -z $reported ]]; then
	echo "run-in-vm: timeout: no result after ${tmo}s" >&2
	exit 124
fi
# qemu's own exits are odd: 124 is timeout's, after the command's status.
if ((rc == 124)); then
	echo "run-in-vm: timeout: the command exited with status $reported, but the guest did not end within ${tmo}s" >&2
	exit 124
fi
if ((rc % 2 == 0)) || [[ $rc == 1 && -z $reported ]]; then
	die "guest died: qemu exited $rc without a status (panic, reset or qemu error; see $log)"
fi
status=$((rc >> 1))
[[ -n $reported ]] && ((reported % 128 == status)) && status=$reported
[[ -z $trouble ]] || die "failing: kernel problems above (command status $status)"
exit "$status"
