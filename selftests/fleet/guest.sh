#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# The guest's half of prometheus_e2e.py: a machine whose TSC state really
# changes.  Loads the module, puts the shared directory where the packaged
# unit writes (Debian's node_exporter textfile directory), and for each
# state runs the unit's command, then tsc-report --json beside it, and
# waits for the host to have checked Prometheus before the next:
#   1 the clocksource tsc, 2 switched away from tsc, 3 back on tsc,
#   4 the module unloaded (libtsc falls back from its page).
#
# Usage: guest.sh MODULE.ko ROOT SHARED
#   ROOT: the packages tsc-tools and libtsc1 unpacked (dpkg-deb -x)
#   SHARED: the directory the host reads (state-N in words, state-N.json,
#   ready-N; ack-N back)
set -u
ko=${1:?usage: guest.sh MODULE.ko ROOT SHARED} root=${2:?} shared=${3:?}
unit=$root/lib/systemd/system/tsc-report-prometheus.service
textfile=/var/lib/prometheus/node-exporter
cs=/sys/devices/system/clocksource/clocksource0

die() { echo "guest: $*" >&2; touch "$shared/abort"; exit 1; }

# The packaged library, never one installed on the host whose root this is.
lib=$(find "$root" -name libtsc.so.1 -printf '%h\n' -quit)
[[ -n $lib ]] || die "no libtsc.so.1 in $root"

# The unit's ExecStart, its program taken from ROOT (the packaged one,
# linked with the packaged libtsc), and the exit status it accepts.
# systemd is not this guest's init, so the command runs here as the unit
# has it; deb-check has systemd-analyze verify the unit itself.
run_unit() {
	local cmd ok st
	cmd=$(sed -n 's/^ExecStart=//p' "$unit")
	ok=" 0 $(sed -n 's/^SuccessExitStatus=//p' "$unit") "
	[[ $cmd == /* ]] || die "no absolute ExecStart in $unit"
	# shellcheck disable=SC2086 # the unit's words, as systemd splits them
	LD_LIBRARY_PATH=$lib "$root"$cmd; st=$?
	[[ $ok == *" $st "* ]] || die "the unit's command exited $st ($cmd)"
	echo "guest: the unit's command wrote $textfile/tsc.prom (exit $st)"
}

# The host acknowledges state $1 once Prometheus showed it; 300 s at most.
wait_ack() {
	local i
	for ((i = 0; i < 3000; i++)); do
		[[ -e $shared/ack-$1 ]] && return 0
		[[ -e $shared/abort ]] && die "the host gave up in state $1"
		sleep 0.1
	done
	die "no ack of state $1 from the host in 300 s"
}

# State $1, described as $2: the unit's report, and the tool's JSON beside it.
report() {
	run_unit
	LD_LIBRARY_PATH=$lib "$root/usr/bin/tsc-report" --json > "$shared/state-$1.json"
	[[ $? -le 1 ]] || die "tsc-report --json failed in state $1"
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
[[ -d $textfile ]] || die "no $textfile: is prometheus-node-exporter installed?"
mount --bind "$shared/textfile" "$textfile" || die "cannot bind $shared/textfile on $textfile"
other=$(tr ' ' '\n' < "$cs/available_clocksource" | grep -v -x -e tsc -e '' | head -n 1)
[[ -n $other ]] || die "no clocksource but tsc: $(cat "$cs/available_clocksource")"
echo "guest: clocksources: $(cat "$cs/available_clocksource"); switching to $other"
clocksource tsc
report 1 "clocksource tsc"
clocksource "$other"
report 2 "clocksource $other"
clocksource tsc
report 3 "clocksource tsc again"
rmmod tsc_freq_khz || die "rmmod tsc_freq_khz failed"
report 4 "clocksource tsc, the module unloaded"
echo "guest: done"
