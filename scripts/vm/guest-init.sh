#!/bin/sh
# /init of the test VM (busybox sh; built into the initramfs by mkinitramfs.sh).
#
# Mounts the host root (read-only, 9p tag "host") at /host and the repository
# (writable, tag "work") at the same path inside it, then runs the command
# file written by run-in-vm.sh in `chroot /host`, so that guest paths and
# binaries are the host's. The exit status leaves through the isa-debug-exit
# port 0x501; qemu exits on that write, so no shutdown sequence is needed.
# Kernel command line: vmrun.repo=/abs/repo vmrun.cmd=repo-relative/file
#
# Or vmrun.local=/path: a program in the initramfs itself (an archive
# appended to this one), run with no share mounted, after the modules
# listed in /modules/local.order: a guest that QEMU can migrate, which a
# mounted 9p share forbids (scripts/vm/migrate_test.py).

export PATH=/sbin:/bin:/usr/sbin:/usr/bin

# echo returns once its bytes are in the kernel's transmit buffer, and the
# serial interrupt that empties it may run on another vCPU, later: qemu
# exits on a reset or on the exit port's write at once, and whatever is
# still queued is lost (seen once: a debug guest with three vCPUs, its
# kernel log cut mid-line and its status line gone, a passing run
# reported as a dead guest).  stty sets the line's modes with TCSADRAIN,
# which returns only once the UART has sent everything; the modes it sets
# are the ones it read.
drain_console() {
	timeout 30 stty -F /dev/console "$(stty -F /dev/console -g)" ||
		echo "vmrun: the console did not drain within 30 s"
}

# PID 1 must never exit (that panics): on a setup error, say so and reset,
# which qemu's -no-reboot turns into an exit without a status ("guest died").
fail() {
	echo "vmrun: setup failed: $*"
	drain_console
	reboot -f
	sleep 1000
}

must() { "$@" || fail "$*"; }

must mount -t proc proc /proc
must mount -t sysfs sys /sys
must mount -t devtmpfs dev /dev

read -r cmdline </proc/cmdline
for arg in $cmdline; do
	case $arg in
	vmrun.repo=*) repo=${arg#*=} ;;
	vmrun.cmd=*) cmd=${arg#*=} ;;
	vmrun.local=*) local_cmd=${arg#*=} ;;
	esac
done
if [ -z "${local_cmd:-}" ] && { [ -z "${repo:-}" ] || [ -z "${cmd:-}" ]; }; then
	fail "no vmrun.repo/vmrun.cmd on the kernel command line"
fi

load_modules() {
	while read -r mod; do
		must insmod "/modules/$mod.ko"
	done <"$1"
}

# The command's status, its line for run-in-vm.sh, and out through the port.
finish() {
	status=$1
	sync
	# Booted with the console showing only the kernel's errors as they come
	# (run-in-vm.sh --errors-on-console): the rest of its log, now.
	case " $cmdline " in
	*" vmrun.dmesg=1 "*) echo "vmrun: the kernel log:"; dmesg ;;
	esac
	echo "vmrun: command exited with status $status"
	drain_console
	# qemu exits with (byte << 1) | 1 on this write; run-in-vm.sh recovers the
	# 8th bit, lost in qemu's 8-bit exit code, from the line echoed above.
	# shellcheck disable=SC2059 # the format is the octal escape of the status byte
	printf "\\$(printf %o "$status")" | dd of=/dev/port bs=1 seek=1281 count=1 conv=notrunc 2>/dev/null
	fail "isa-debug-exit port write did not stop qemu"
}

if [ -n "${local_cmd:-}" ]; then
	load_modules /modules/local.order
	echo "vmrun: starting command (guest uptime $(cut -d' ' -f1 /proc/uptime)s)"
	env -i PATH="$PATH" "$local_cmd" </dev/null
	finish $?
fi

load_modules /modules/order

# Large msize: 9p throughput is bound by message size. cache=loose on the
# read-only root makes exec/reads of host binaries much faster; the writable
# share stays uncached so the host sees writes at once.
p9="trans=virtio,version=9p2000.L,msize=512000"
must mount -t 9p -o "$p9,ro,cache=loose" host /host
# The host's /tmp and /run content is not meant for the guest; give it its own.
must mount -t tmpfs -o mode=1777 tmp /host/tmp
must mount -t tmpfs -o mode=755 run /host/run
must mount -t proc proc /host/proc
must mount -t sysfs sys /host/sys
must mount -t devtmpfs dev /host/dev
mkdir -p /host/dev/pts /host/dev/shm
must mount -t devpts -o newinstance,ptmxmode=0666 devpts /host/dev/pts
must mount -t tmpfs -o mode=1777 shm /host/dev/shm
# mkdir only succeeds where writable (repo under /tmp); otherwise it exists.
mkdir -p "/host$repo" 2>/dev/null
must mount -t 9p -o "$p9,cache=none" work "/host$repo"
[ -r "/host$repo/$cmd" ] || fail "command file $repo/$cmd not found"

# The marker lets run-in-vm.sh measure boot time.
echo "vmrun: starting command (guest uptime $(cut -d' ' -f1 /proc/uptime)s)"
# A clean environment: run-in-vm.sh's command file exports what it needs.
env -i chroot /host /bin/sh "$repo/$cmd" </dev/null
finish $?
