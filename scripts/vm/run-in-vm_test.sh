#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# run-in-vm.sh's judgement of a guest's death, against a fake qemu:
# each case scripts what the console prints and how qemu exits, boot by
# boot.  An int3 in the kernel's own text (the emulator's race with live
# text patching) boots the guest again, before the command or during it,
# twice at most;
# an int3 with a frame of the module fails; a guest that stopped before
# the command for another reason boots again, its trouble still judged;
# a guest hung in its boot is stopped at the boot timeout and booted again;
# a guest that outlives its timeout is a timeout, whether its command
# reported a status or not, and a status of 68 (qemu's 137, as timeout
# -k's) is the command's.  A hang is seen though the watcher that stopped
# the guest is slow to return (TSCFK_TEST_WATCH_LAG).

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=testlib/ktap.sh
. "$here/../../testlib/ktap.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kernels=(/boot/vmlinuz-*)
[ -e "${kernels[0]}" ] || ktap_skip_all "no kernel in /boot to name"
kernel=${kernels[0]#/boot/vmlinuz-}

int3='[    1.49] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI
[    1.49] RIP: 0010:sched_clock_cpu+0x9/0x190
[    1.50] Kernel panic - not syncing: Fatal exception in interrupt'
ours='[    5.00] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI
[    5.00]  pp_target+0x10/0x90 [tsc_freq_khz]
[    5.01] Kernel panic - not syncing: Fatal exception'
started='vmrun: starting command (guest uptime 2.32s)'
passed='vmrun: command exited with status 0'

# boot N prints $tmp/out.N and exits with $tmp/rc.N; rc "hang" never exits.
mkdir "$tmp/bin"
cat > "$tmp/bin/qemu-system-x86_64" <<EOS
#!/bin/bash
n=\$((\$(cat $tmp/boots) + 1)); echo \$n > $tmp/boots
args="\$*"
while ((\$#)); do [[ \$1 == -pidfile ]] && echo \$\$ > "\$2"; shift; done
cat $tmp/out.\$n
rc=\$(cat $tmp/rc.\$n)
# Hangs as qemu, its arguments in its command line, where run-in-vm looks.
[[ \$rc == hang ]] && exec -a "qemu-system-x86_64 \$args" sleep 60
exit \$rc
EOS
chmod +x "$tmp/bin/qemu-system-x86_64"

# run BOOT1_OUT BOOT1_RC [BOOT2_OUT BOOT2_RC [BOOT3_OUT BOOT3_RC]]:
# run-in-vm's status in $st.
run() {
	rm -f "$tmp"/out.* "$tmp"/rc.* "$tmp"/log*
	echo 0 > "$tmp/boots"
	printf '%s\n' "$1" > "$tmp/out.1"; echo "$2" > "$tmp/rc.1"
	printf '%s\n' "${3:-}" > "$tmp/out.2"; echo "${4:-0}" > "$tmp/rc.2"
	printf '%s\n' "${5:-}" > "$tmp/out.3"; echo "${6:-0}" > "$tmp/rc.3"
	PATH=$tmp/bin:$PATH "$here/run-in-vm.sh" --kernel "$kernel" --log "$tmp/log" \
		--boot-timeout 3 -- true \
		> "$tmp/stdout" 2>&1
	st=$?
	boots=$(cat "$tmp/boots")
}

ktap_plan 14
run "$int3" 0 "$started
$passed" 1
ktap_check "an int3 of the kernel's before the command: booted again, passes" \
	test "$st $boots" = "0 2" -a -e "$tmp/log.int3"
run "$started
$int3" 0 "$started
$passed" 1
ktap_check "an int3 of the kernel's during the command: booted again, passes" \
	test "$st $boots" = "0 2" -a -e "$tmp/log.int3"
run "$int3" 0 "$started
$int3" 0 "$started
$passed" 1
ktap_check "an int3 of the kernel's twice: booted again twice, passes, both logs kept" \
	test "$st $boots" = "0 3" -a -e "$tmp/log.int3" -a -e "$tmp/log.int3.2"
run "$int3" 0 "$int3" 0 "$int3" 0
ktap_check "an int3 of the kernel's three times: fails" test "$st" -ne 0 -a "$boots" = 3
run "[    0.50] BUG: something else" 0 "[    0.50] BUG: something else" 0 "$started
$passed" 1
ktap_check "another death before the command twice: booted again once only, fails" \
	test "$st" -ne 0 -a "$boots" = 2
run "$started
$ours" 0 "$started
$passed" 1
ktap_check "an int3 with a frame of the module fails, not run again" \
	test "$st" -ne 0 -a "$boots" = 1
run "[    0.50] BUG: something else" 0 "$started
$passed" 1
ktap_check "another death before the command: booted again, and its trouble still fails" \
	test "$st" -ne 0 -a "$boots" = 2
run "[    1.17] secondary_startup_64_no_verify+0xe5/0xeb" hang "$started
$passed" 1
ktap_check "a guest hung before the command: stopped at the boot timeout, booted again, passes (said $st, $boots boots)" \
	test "$st $boots" = "0 2" -a -e "$tmp/log.hung"
run "" hang "" hang
ktap_check "a guest hung before the command twice: a timeout (said $st, $boots boots)" \
	test "$st $boots" = "124 2"
# The caller, woken by the guest's end, stops a watcher that has not
# returned yet: the hang is still seen.
TSCFK_TEST_WATCH_LAG=0.5 run "" hang "$started
$passed" 1
ktap_check "a hang, its watcher slow to return: booted again, passes (said $st, $boots boots)" \
	test "$st $boots" = "0 2" -a -e "$tmp/log.hung"
TSCFK_TEST_WATCH_LAG=0.5 run "" hang "" hang
ktap_check "two hangs, the watcher slow to return: a timeout (said $st, $boots boots)" \
	test "$st $boots" = "124 2"
run "$started" 124
ktap_check "no status when the timeout ends the guest: a timeout (said $st)" test "$st" = 124
run "$started
$passed" 124
ktap_check "a status, then the timeout: a timeout, not a death (said $st)" \
	test "$st" = 124 -a -z "$(grep 'guest died' "$tmp/stdout")"
run "$started
vmrun: command exited with status 68" 137
ktap_check "a reported status of 68, qemu's 137: the command's 68 (said $st)" test "$st" = 68
ktap_finish
