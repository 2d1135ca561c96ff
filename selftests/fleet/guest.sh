#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# The guest's half of prometheus_e2e.py: a machine whose TSC state really
# changes, where systemd starts the packaged unit.  The guest's init is not
# systemd, so systemd runs as a container's would: in namespaces of its
# own, on an overlay of this root with the packages tsc-tools and libtsc1
# where they install.  Debian's node_exporter textfile directory there is
# the directory the host reads.  For each state, systemd starts
# tsc-report-prometheus.service, which writes tsc.prom, then the same unit
# with --json for --prometheus, then root runs tsc-report --json outside
# the sandbox, and the guest waits for the host to have checked Prometheus
# before the next:
#   1 the clocksource tsc, 2 switched away from tsc, 3 back on tsc, with
#   perf_event_paranoid 2 (upstream's default, where the unit may use
#   perf), 4 the module unloaded (libtsc falls back from its page).
# Throughout, chronyd keeps the guest's clock, as on a fleet's host: the
# kernel's maxerror, esterror and status bits, which the time's bound
# starts from, are its.  Each state is reported once the kernel says the
# clock is synchronised again (a clocksource change clears its NTP state
# until the daemon's next update), so that both runs of a state see it so.
#
# Usage: guest.sh MODULE.ko ROOT SHARED CHRONYD
#   ROOT: the packages tsc-tools and libtsc1 unpacked (dpkg-deb -x)
#   SHARED: the directory the host reads (textfile/; state-N in words,
#   state-N.json, state-N.root.json, state-N.paranoid, ready-N; ack-N back)
#   CHRONYD: Debian's chronyd, unpacked from its package on the host
set -u -o pipefail
ko=${1:?usage: guest.sh MODULE.ko ROOT SHARED CHRONYD} root=${2:?} shared=${3:?} chronyd=${4:?}
here=$(cd "$(dirname "$0")" && pwd -P)
unit=tsc-report-prometheus.service
json_unit=tsc-report-json.service
timer=tsc-report-prometheus.timer
textfile=/var/lib/prometheus/node-exporter
cs=/sys/devices/system/clocksource/clocksource0
paranoid=/proc/sys/kernel/perf_event_paranoid
# The overlay: its layer in the guest's memory, the root systemd sees.
layer=/tmp/fleet-layer
top=/tmp/fleet-root
sd=''

die() { echo "guest: $*" >&2; touch "$shared/abort"; exit 1; }

# A command in systemd's namespaces and root, as its own services see them;
# 180 s at most (a unit's start: its TimeoutStartSec is 2 min).
in_systemd() { timeout 180 nsenter --target "$sd" --mount --pid --root --wd "$@"; }
ctl() { in_systemd systemctl "$@"; }

# Microseconds since the epoch.
now_us() { echo $((${EPOCHREALTIME/./})); }

# systemd starts unit $1 and waits for it (a oneshot: until it is done).
start_unit() {
	ctl start "$1" || die "systemctl start $1 failed: $(ctl status --no-pager "$1")"
}

# This root, read-only over 9p, under a writable layer in memory, with the
# packages' files at their paths and the loader's cache rebuilt: what
# installing them leaves.  deb-check installs them with dpkg itself; here,
# dpkg would read a database of 220000 files over 9p under TCG, two minutes.
install_packages() {
	local kroot='' lib want
	# The kernel's modules: in /lib/modules, or in the root the kernel
	# came from (scripts/kernel-roots.sh).
	if ! grep -qw overlay /proc/filesystems; then
		[[ -d /lib/modules/$(uname -r) ]] ||
			kroot=$("$here/../../scripts/kernel-roots.sh" root "$(uname -r)") ||
			die "no modules of $(uname -r) here nor in a kernel root"
		modprobe ${kroot:+-d "$kroot"} overlay || die "cannot load overlayfs"
	fi
	mkdir -p "$layer/upper" "$layer/work" "$top" || die "cannot make $layer"
	mount -t overlay overlay -o "lowerdir=/,upperdir=$layer/upper,workdir=$layer/work" "$top" ||
		die "cannot mount an overlay of / on $top"
	# Debian's /lib is a link to usr/lib: kept, as dpkg keeps it.
	tar -C "$root" -cf - . | tar -C "$top" --keep-directory-symlink --no-overwrite-dir -xf - ||
		die "cannot copy the packages' files from $root"
	# A fleet's host has these packages, not a build of ours installed
	# by hand nor an administrator's drop-in: none of this root's.
	rm -rf "${top:?}"/usr/local/lib/libtsc.so* "$top"/etc/systemd/system/tsc-report-prometheus.* ||
		die "cannot hide this root's own libtsc and units"
	chroot "$top" ldconfig || die "ldconfig failed"
	lib=$(chroot "$top" ldd /usr/bin/tsc-report | awk '$1 == "libtsc.so.1" { print $3 }')
	want=$(cd "$root" && find . -name libtsc.so.1 -printf '/%P\n' -quit)
	[[ -n $lib && -n $want && $(chroot "$top" realpath "$lib") == $(chroot "$top" realpath "$want") ]] ||
		die "tsc-report loads libtsc.so.1 from '$lib', not the packaged $want"
	# A container's, as systemd-nspawn leaves it: the devices, its own
	# /run and /tmp, /sys read-only (so that this root's udev rules and
	# units do not act on the guest's kernel; /proc/sys too, below).
	mount --rbind /dev "$top/dev" || die "cannot bind /dev on $top"
	mount -t tmpfs -o mode=755 run "$top/run" || die "cannot mount $top/run"
	mount -t tmpfs -o mode=1777 tmp "$top/tmp" || die "cannot mount $top/tmp"
	mount -t sysfs -o ro sysfs "$top/sys" || die "cannot mount $top/sys"
	[[ -d $top$textfile ]] || die "no $textfile: is prometheus-node-exporter installed?"
	mount --bind "$shared/textfile" "$top$textfile" ||
		die "cannot bind $shared/textfile on $textfile"
}

# The packaged unit with --json for --prometheus, writing tsc.json beside
# tsc.prom, and nothing else changed: each state's JSON comes from the same
# sandbox as its report.  Root outside it may see more: Debian's
# perf_event_paranoid refuses perf to the unit, not to root.
make_json_unit() {
	local src=$top/lib/systemd/system/$unit dst=$top/run/systemd/system/$json_unit
	mkdir -p "${dst%/*}" || die "cannot make ${dst%/*}"
	sed "s|^\(ExecStart=.*\) --prometheus --output $textfile/tsc\.prom\$|\1 --json --output $textfile/tsc.json|" \
		"$src" > "$dst" || die "cannot write $dst"
	[[ $(diff "$src" "$dst" | grep -c '^[<>]') == 2 ]] ||
		die "$unit's ExecStart is not '... --prometheus --output $textfile/tsc.prom'"
}

# systemd as PID 1 of a PID namespace, $container set, up to sysinit.target:
# what a service's default dependencies require.  Not basic.target, which
# wants timers.target: this host's enabled timers would run in the guest,
# node_exporter's among them, writing their files beside tsc.prom.  Its
# /proc is the namespace's, /proc/sys read-only.  Its log goes to the
# kernel's.  Up in 2 to 8 s under TCG; 300 s at most.
start_systemd() {
	local pid t0 end=$((SECONDS + 300)) state='' us
	t0=$(now_us)
	# shellcheck disable=SC2016 # expanded by that shell
	unshare --pid --mount --fork --propagation private --mount-proc="$top/proc" \
		/bin/sh -c 'top=$1; shift
			mount --bind "$top/proc/sys" "$top/proc/sys" &&
			mount -o remount,bind,ro "$top/proc/sys" &&
			exec chroot "$top" /usr/bin/env container=tsc-fleet-e2e /lib/systemd/systemd "$@"' \
		sh "$top" --unit=sysinit.target --log-target=kmsg --log-level=notice --show-status=no \
		</dev/null >/dev/null 2>&1 &
	pid=$!
	while ((SECONDS < end)); do
		[[ -n $sd ]] || sd=$(pgrep -P "$pid" -x systemd)
		[[ -n $sd ]] && state=$(ctl is-system-running 2>/dev/null)
		[[ $state == running || $state == degraded ]] && break
		kill -0 "$pid" 2>/dev/null || die "systemd exited (the kernel's log has why)"
		sleep 0.1
	done
	[[ $state == running || $state == degraded ]] ||
		die "systemd not up in 300 s: ${state:-no manager}"
	us=$(($(now_us) - t0))
	echo "guest: systemd up ($state) in $((us / 1000000)).$((us / 100000 % 10)) s"
	[[ $state == running ]] || ctl --failed --no-pager
}

# The unit systemd loaded is the packaged file, with no drop-in.
check_unit() {
	local frag drop
	frag=$(ctl show --property=FragmentPath --value "$unit")
	drop=$(ctl show --property=DropInPaths --value "$unit")
	if [[ -z $frag || ! -e $root$frag || -n $drop ]] || ! cmp -s "$root$frag" "$top$frag"; then
		die "$unit: loaded from '$frag' with drop-ins '$drop', not as packaged"
	fi
}

# The packaged timer starts and waits to start the unit (its first run
# is two minutes after boot: a state's run is started by hand).
check_timer() {
	local sub triggers
	start_unit "$timer"
	sub=$(ctl show --property=SubState --value "$timer")
	triggers=$(ctl show --property=Triggers --value "$timer")
	ctl stop "$timer" || die "systemctl stop $timer failed"
	[[ $sub == waiting && $triggers == "$unit" ]] ||
		die "$timer: $sub, triggers '$triggers'; not waiting to start $unit"
	echo "guest: $timer started: waiting, to start $unit"
}

# systemd starts the packaged unit, which must run (its condition met),
# succeed as the unit counts success, and write a new tsc.prom (--output
# renames a new file over it: another inode).  Its properties cannot
# tell: once it is done, nothing references it, and systemd unloads it.
run_unit() {
	local before after
	before=$(stat -c '%i %y' "$shared/textfile/tsc.prom" 2>/dev/null)
	start_unit "$unit"
	after=$(stat -c '%i %y' "$shared/textfile/tsc.prom" 2>/dev/null)
	[[ -n $after && $after != "$before" ]] ||
		die "$unit did not write $textfile/tsc.prom (its condition not met?)"
	echo "guest: systemd ran $unit, which wrote $textfile/tsc.prom"
}

# chronyd as ntp_bound_test runs it: a second chronyd serving this clock
# as "local stratum 1" on loopback (-x: it leaves the clock alone), and
# the daemon under test configured as Debian's (rtcsync, which clears
# STA_UNSYNC; makestep 1 3), polling once a second: more often, the two
# daemons load the emulated CPUs enough to spoil a calibration's
# precision; slewing at most 500 ppm, so that the kernel's rate stays
# within 1000 ppm of nominal (prometheus_e2e.py compares two runs' rates).
# Outside systemd's sandbox: the guest's daemon, not the container's.
# Stopped when this script ends.
ntp=/tmp/fleet-ntp ntp_pids=''
start_ntp() {
	mkdir -p "$ntp" || die "cannot make $ntp"
	ip link set lo up || die "cannot bring loopback up"
	printf '%s\n' 'local stratum 1' 'allow 127.0.0.1' 'port 11123' 'cmdport 0' \
		'bindcmdaddress /' "pidfile $ntp/server.pid" > "$ntp/server.conf"
	printf '%s\n' 'server 127.0.0.1 port 11123 iburst minpoll 0 maxpoll 0' 'rtcsync' \
		'makestep 1 3' 'maxslewrate 500' 'port 0' 'cmdport 0' 'bindcmdaddress /' \
		"pidfile $ntp/client.pid" > "$ntp/client.conf"
	# -d: in the foreground, its messages to its log; -u root: no _chrony user here.
	"$chronyd" -d -x -u root -f "$ntp/server.conf" > "$ntp/server.log" 2>&1 &
	ntp_pids=$!
	"$chronyd" -d -u root -f "$ntp/client.conf" > "$ntp/client.log" 2>&1 &
	ntp_pids+=" $!"
	trap 'kill $ntp_pids 2> /dev/null' EXIT
	# Each writes its pidfile once it is up; 30 s at most.
	local end=$((SECONDS + 30))
	while [[ ! -s $ntp/server.pid || ! -s $ntp/client.pid ]]; do
		# shellcheck disable=SC2086 # two pids
		kill -0 $ntp_pids 2> /dev/null ||
			die "chronyd exited: $(tail -n 5 "$ntp/server.log" "$ntp/client.log")"
		((SECONDS < end)) || die "chronyd not up in 30 s"
		sleep 0.1
	done
	echo "guest: chronyd started, syncing to a chronyd on loopback"
}

# Until the time has a bound again (tsc-report's flags: no unsynced), 60 s
# at most; asked once a second, as each run calibrates for 200 ms.
wait_synced() {
	local end=$((SECONDS + 60)) flags='' json
	while ((SECONDS < end)); do
		json=$(in_systemd /usr/bin/tsc-report --json)
		[[ $? -le 1 ]] || die "tsc-report --json failed"
		flags=$(python3 -c 'import json, sys; print(" ".join(json.load(sys.stdin)["time_bound"]["flags"]))' \
			<<< "$json") || die "tsc-report --json: no time_bound's flags"
		[[ " $flags " == *" unsynced "* ]] || return 0
		sleep 1
	done
	tail -n 20 "$ntp/client.log" >&2
	die "the clock not synchronised in 60 s (flags: $flags)"
}

# The host acknowledges state $1 once Prometheus showed it; 300 s at most.
wait_ack() {
	local end=$((SECONDS + 300))
	while ((SECONDS < end)); do
		[[ -e $shared/ack-$1 ]] && return 0
		[[ -e $shared/abort ]] && die "the host gave up in state $1"
		sleep 0.1
	done
	die "no ack of state $1 from the host in 300 s"
}

# State $1, described as $2: the unit's report, and the tool's JSON beside it.
report() {
	wait_synced
	run_unit
	start_unit "$json_unit"
	mv "$shared/textfile/tsc.json" "$shared/state-$1.json" ||
		die "$json_unit wrote no tsc.json in state $1"
	# Root's, outside the sandbox: what the unit may not see.
	in_systemd /usr/bin/tsc-report --json > "$shared/state-$1.root.json"
	[[ $? -le 1 ]] || die "tsc-report --json as root failed in state $1"
	cat "$paranoid" > "$shared/state-$1.paranoid" || die "no $paranoid"
	echo "$2" > "$shared/state-$1"
	echo "guest: state $1: $2"
	touch "$shared/ready-$1"
	wait_ack "$1"
}

clocksource() {
	echo "$1" > "$cs/current_clocksource" || die "cannot select clocksource $1"
	[[ $(cat "$cs/current_clocksource") == "$1" ]] || die "clocksource $(cat "$cs/current_clocksource"), not $1"
}

insmod "$ko" || die "insmod $ko failed"
install_packages
make_json_unit
start_systemd
check_unit
check_timer
start_ntp
other=$(tr ' ' '\n' < "$cs/available_clocksource" | grep -v -x -e tsc -e '' | head -n 1)
[[ -n $other ]] || die "no clocksource but tsc: $(cat "$cs/available_clocksource")"
echo "guest: clocksources: $(cat "$cs/available_clocksource"); switching to $other"
clocksource tsc
report 1 "clocksource tsc"
clocksource "$other"
report 2 "clocksource $other"
clocksource tsc
was=$(cat "$paranoid")
echo 2 > "$paranoid" || die "cannot set $paranoid to 2"
report 3 "clocksource tsc again, perf_event_paranoid 2"
echo "$was" > "$paranoid" || die "cannot set $paranoid back to $was"
rmmod tsc_freq_khz || die "rmmod tsc_freq_khz failed"
report 4 "clocksource tsc, the module unloaded"
echo "guest: done"
