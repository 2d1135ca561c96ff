#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# The guest's half of prometheus_e2e.py: a machine whose TSC state really
# changes.  Loads the module, puts the shared directory where the packaged
# unit writes (Debian's node_exporter textfile directory), and for each
# state runs the unit's command, then tsc-report --json beside it, and
# waits for the host to have checked Prometheus before the next:
#   1 the clocksource tsc, 2 switched away from tsc, 3 back on tsc.
#
# Usage: guest.sh MODULE.ko ROOT SHARED
#   ROOT: the packages tsc-tools and libtsc1 unpacked (dpkg-deb -x)
#   SHARED: the directory the host reads (state-N.json, ready-N; ack-N back)
set -u
ko=${1:?usage: guest.sh MODULE.ko ROOT SHARED} root=${2:?} shared=${3:?}
unit=$root/lib/systemd/system/tsc-report-prometheus.service
textfile=/var/lib/prometheus/node-exporter
cs=/sys/devices/system/clocksource/clocksource0

die() { echo "guest: $*" >&2; touch "$shared/abort"; exit 1; }

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
	LD_LIBRARY_PATH=$(dirname "$(find "$root" -name 'libtsc.so.1' | head -n 1)") \
		"$root"$cmd; st=$?
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

state() {
	local n=$1 want=$2
	echo "$want" > "$cs/current_clocksource" || die "cannot select clocksource $want"
	[[ $(cat "$cs/current_clocksource") == "$want" ]] || die "clocksource $(cat "$cs/current_clocksource"), not $want"
	run_unit
	LD_LIBRARY_PATH=$(dirname "$(find "$root" -name 'libtsc.so.1' | head -n 1)") \
		"$root/usr/bin/tsc-report" --json > "$shared/state-$n.json"
	[[ $? -le 1 ]] || die "tsc-report --json failed in state $n"
	echo "guest: state $n: clocksource $want"
	touch "$shared/ready-$n"
	wait_ack "$n"
}

insmod "$ko" || die "insmod $ko failed"
[[ -d $textfile ]] || die "no $textfile: is prometheus-node-exporter installed?"
mount --bind "$shared/textfile" "$textfile" || die "cannot bind $shared/textfile on $textfile"
other=$(tr ' ' '\n' < "$cs/available_clocksource" | grep -v -x -e tsc -e '' | head -n 1)
[[ -n $other ]] || die "no clocksource but tsc: $(cat "$cs/available_clocksource")"
echo "guest: clocksources: $(cat "$cs/available_clocksource"); switching to $other"
echo "$other" > "$shared/other-clocksource"
state 1 tsc
state 2 "$other"
state 3 tsc
echo "guest: done"
