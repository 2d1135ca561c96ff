#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# guest-init.sh's last lines reach the host before qemu exits.  A real
# guest whose command stops the console's output (tcflow TCOOFF, as if
# the serial interrupt that sends it had not run yet), leaves a process
# to start it again 2 s later, and exits 0.  The status line then waits
# in the kernel's transmit buffer when init writes qemu's exit port: it
# arrives only if init lets the console drain first, and run-in-vm.sh,
# without it, takes the passing run for a dead guest.
#
# Usage: guest-init_test.sh [RELEASE]   (default: run-in-vm.sh's, the
#   newest kernel in /boot)

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=testlib/ktap.sh
. "$here/../../testlib/ktap.sh"
repo=$(cd "$here/../.." && pwd)
log=$repo/build/vm/guest-init-drain.log
kernels=(/boot/vmlinuz-*)
[ -e "${kernels[0]}" ] || ktap_skip_all "no kernel in /boot to boot"
command -v qemu-system-x86_64 > /dev/null || ktap_skip_all "no qemu-system-x86_64"

hold='
import os, termios, time
fd = os.open("/dev/console", os.O_WRONLY | os.O_NOCTTY)
termios.tcflow(fd, termios.TCOOFF)
if os.fork() == 0:
    os.setsid()
    time.sleep(2)
    termios.tcflow(fd, termios.TCOON)
    os._exit(0)
print("guest-init_test: console output held", flush=True)
'
ktap_plan 2
mkdir -p "$repo/build/vm"
vm=("$here/run-in-vm.sh" ${1:+--kernel "$1"} --smp 1 --timeout 120 --log "$log")
"${vm[@]}" -- python3 -c "$hold" > /dev/null 2>&1
st=$?
ktap_check "a passing command whose console was still sending: run-in-vm.sh says 0 (said $st)" \
	test "$st" -eq 0
ktap_check "its status line and what it printed before reached the log, in order" \
	sh -c "grep -a -A1 '^guest-init_test: console output held' '$log' | grep -aq '^vmrun: command exited with status 0'"
ktap_finish
