#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tsc-report: usage errors exit 2; against a fake sysfs holding the module's
# files, the JSON validates against the schema and carries those values,
# promtool accepts the Prometheus text, and the exit status is the verdict;
# bad files fall back instead of failing; the time's bound, the module's
# disruption counts and a fake vmclock page (in a mount namespace of its
# own, readable and then not) as JSON and Prometheus give them; seccomp
# filters; on the real system it agrees with what is there.
#
# Usage: tsc_report_test.sh [--system] TOOL SCHEMA [SECCOMP_RUN]
#   --system: only the checks against this system (the guest's run)
#   (needs python3-jsonschema, promtool; SECCOMP_RUN: tests/seccomp_run.c)

# shellcheck source=../../testlib/tools_lib.sh
. "$(dirname "$0")/../../testlib/tools_lib.sh"
system_only=
if [ "${1:-}" = --system ]; then
	system_only=1
	shift
fi
tool=${1:?usage: tsc_report_test.sh [--system] TOOL SCHEMA}
schema=${2:?usage: tsc_report_test.sh [--system] TOOL SCHEMA [SECCOMP_RUN]}
seccomp=${3:-}

# A sysfs tree as the module writes it; $1 dir, $2 unstable, $3 khz.
fake_root() {
	local d=$1/devices/system/cpu
	mkdir -p "$d/tsc" "$d/cpu0/tsc" "$d/cpu1/tsc" "$1/devices/system/clocksource/clocksource0"
	echo "$3" > "$d/cpu0/tsc_freq_khz"
	echo 0-1 > "$d/possible"
	echo "$2" > "$d/tsc/unstable"
	echo 3 > "$d/tsc/generation"; echo 0 > "$d/tsc/reference_cpu"
	echo 2 > "$d/tsc/clock_steps"; echo 1 > "$d/tsc/clock_resumes"; echo 3 > "$d/tsc/clocksource_changes"
	echo 250 > "$d/tsc/max_skew_ticks"; echo 1 > "$d/tsc/monotonic_vs_reference"
	echo reference > "$d/cpu0/tsc/status"
	for f in offset_ticks offset_min_ticks offset_max_ticks rounds; do echo 0 > "$d/cpu0/tsc/$f"; done
	echo 1 > "$d/cpu0/tsc/consistent"
	echo measured > "$d/cpu1/tsc/status"; echo -40 > "$d/cpu1/tsc/offset_ticks"
	echo -150 > "$d/cpu1/tsc/offset_min_ticks"; echo 100 > "$d/cpu1/tsc/offset_max_ticks"
	echo 1000 > "$d/cpu1/tsc/rounds"; echo 1 > "$d/cpu1/tsc/consistent"
	echo tsc > "$1/devices/system/clocksource/clocksource0/current_clocksource"
}

# The module's clock page ($1 root) as a file: layout 1, the kernel's
# clocks on the TSC, seq even; cycle_interval $2 ticks per timekeeping
# interval of ntp_tick $3 (ns << 32).  The rest of the mapping is zero.
fake_clock_page() {
	python3 - "$1/devices/system/cpu/tsc/clock_page" "$2" "$3" <<'PY'
import struct, sys
page = bytearray(4096)
struct.pack_into("<HHII", page, 0, 1, 1, 2, 7)
struct.pack_into("<QQ", page, 104, int(sys.argv[2]), int(sys.argv[3]))
open(sys.argv[1], "wb").write(page)
PY
}

# The checks against this system, as it is: with the module loaded, it
# must be what the tool reads.  With --system, only these (the guests'
# run, with the module: the fake roots' checks below run on the host, in
# libtsc's check).
system_checks() {
	local st got file mhz

	"$tool" --json > "$tmp/real.json"; st=$?
	ktap_check "on this system: exit 0 or 1" test $st -le 1
	ktap_check "on this system: JSON valid against the schema" valid_json "$tmp/real.json" "$schema"
	if [ -d /sys/devices/system/cpu/tsc ] && [ "$(cat /sys/devices/system/cpu/tsc/unstable)" = 1 ]; then
		# The kernel's kHz may never have been refined: another source wins.
		ktap_check "the module is loaded, the TSC unstable: its offsets are used, not its frequency" \
			test "$(json "$tmp/real.json" '(j["frequency"]["source"] != "sysfs", j["offsets"]["source"])')" = "(True, 'module')"
	elif [ -d /sys/devices/system/cpu/tsc ]; then
		ktap_check "the module is loaded: its frequency and offsets are used" \
			test "$(json "$tmp/real.json" '(j["frequency"]["source"], j["offsets"]["source"])')" = "('sysfs', 'module')"
	else
		ktap_check "no module: the offsets are not the module's" \
			test "$(json "$tmp/real.json" 'j["offsets"]["source"]')" != module
	fi
	got=$(json "$tmp/real.json" '[(s["source"], s["hz"]) for s in j["frequency_sources"]["sources"]]')
	echo "# sources here: $got, agree: $(json "$tmp/real.json" 'j["frequency_sources"]["agree"]')"
	ktap_check "on this system: a calibration among the sources" \
		test "$(json "$tmp/real.json" '"calibration" in [s["source"] for s in j["frequency_sources"]["sources"]]')" = True
	# A source read twice gives the same value; only a calibration varies.
	ktap_check "on this system: the chosen source among them, with its value (unless a calibration)" \
		test "$(json "$tmp/real.json" 'j["frequency"]["source"] == "calibration" or (j["frequency"]["source"], j["frequency"]["hz"]) in [(s["source"], s["hz"]) for s in j["frequency_sources"]["sources"]]')" = True
	file=/sys/devices/system/cpu/tsc/timekeeper_freq_millihz
	if [ -r $file ] && mhz=$(cat $file 2>/dev/null); then
		ktap_check "on this system: the kernel's page, at the module's timekeeper rate" \
			test "$(json "$tmp/real.json" '(j["sysclock"]["path"], j["sysclock"]["rate_millihz"])')" = "('kernel', $mhz)"
	else
		ktap_check "on this system: no timekeeper rate (module absent, or not on tsc): none claimed" \
			test "$(json "$tmp/real.json" 'j["sysclock"]["rate_millihz"]')" = None
	fi
}

# What the kernel says of the CPU: both flags mean CPUID's invariant TSC.
invariant=False
grep -qw constant_tsc /proc/cpuinfo && grep -qw nonstop_tsc /proc/cpuinfo && invariant=True

if [ -n "$system_only" ]; then
	ktap_plan 6
	system_checks
	ktap_finish
fi
ktap_plan 56
"$tool" --help > "$tmp/help"; st=$?
ktap_check "--help exits 0 with the usage" test $st = 0 -a -n "$(grep -l '^Usage: tsc-report' "$tmp/help")"
usage_errors "$tool" "--bogus" "extra" "--json --prometheus" "--prometheus --json" "--sysfs-root" \
	"--sysfs-root $tmp/missing" "--sysfs-root /dev/null" \
	"--output $tmp/missing/tsc.prom" "--output $tmp"

fake_root "$tmp/good" 0 2600002
# 1 ms of 2600002 kHz, which NTP wants to last 10 ns less: +10 ppm.
ci=2600002 tick=$(((1000000 - 10) << 32))
fake_clock_page "$tmp/good" $ci $tick
rate=$(python3 -c "print($ci * 1000 * 10**9 * 2**32 // $tick)")
"$tool" --sysfs-root "$tmp/good" --json > "$tmp/good.json"; st=$?
ktap_check "JSON from the module's files validates against the schema" valid_json "$tmp/good.json" "$schema"
got=$(json "$tmp/good.json" '(j["frequency"]["source"], j["frequency"]["hz"], j["frequency"]["precision_of"], j["offsets"]["source"], j["offsets"]["cpus"][1], j["kernel"])')
echo "# $got"
ktap_check "and carries their values" test "$got" = "('sysfs', 2600002000.0, 'kernel', 'module', {'cpu': 1, 'status': 'measured', 'offset_ticks': -40, 'min_ticks': -150, 'max_ticks': 100, 'probes': 1000, 'consistent': True}, {'clocksource': 'tsc', 'unstable': False})"
got=$(json "$tmp/good.json" '(j["sysclock"]["path"], j["sysclock"]["rate_millihz"])')
echo "# sysclock: $got; $(json "$tmp/good.json" 'j["sysclock"]["why"]')"
ktap_check "the system clock: the page's path, at its rate ($rate mHz)" test "$got" = "('kernel', $rate)"
# The kernel's rounding of 2600002 kHz into a mult of 2^22..2^23: a hard bound.
got=$(json "$tmp/good.json" '(abs(j["frequency"]["bound_ppm"] / j["frequency"]["precision_ppm"] - 1) < 1e-5, 0.5e6 / 2**23 < j["frequency"]["bound_ppm"] < 0.5e6 / 2**22)')
ktap_check "sysfs's precision is a hard bound, the kernel's rounding ($(json "$tmp/good.json" 'j["frequency"]["bound_ppm"]') ppm)" \
	test "$got" = "(True, True)"
want=$([ $invariant = True ] && echo 0 || echo 1)
echo "# invariant TSC per /proc/cpuinfo: $invariant, exit $st"
ktap_check "exit status is the verdict ($want)" test $st = "$want" -a "$(json "$tmp/good.json" 'j["verdict"]["trustworthy"]')" = $invariant

# The same format twice is that format, not a clash with the other.
"$tool" --sysfs-root "$tmp/good" --json --json > "$tmp/twice.json" 2> "$tmp/err"; st=$?
echo "# --json --json: exit $st: $(head -n 1 "$tmp/err")"
ktap_check "--json twice: JSON, no usage error" \
	test $st -le 1 -a "$(json "$tmp/twice.json" 'j["schema_version"]')" = 1

"$tool" --sysfs-root "$tmp/good" --prometheus > "$tmp/good.prom"
ktap_check "promtool accepts the Prometheus text" promtool check metrics < "$tmp/good.prom"
ktap_check "which carries the values" grep -qx 'tsc_frequency_hertz{source="sysfs"} 2600002000.000' "$tmp/good.prom"
# shellcheck disable=SC2016 # awk's own $1 and $2
ktap_check "and what the precision is of" awk '$1 == "tsc_frequency_precision_ratio{of=\"kernel\"}" &&
	$2 > 0.5 / 2^23 && $2 < 0.5 / 2^22 { ok = 1 } END { exit !ok }' "$tmp/good.prom"
ktap_check "offsets in seconds" grep -qx 'tsc_offset_seconds{cpu="1",measured_by="module"} -1.53846e-08' "$tmp/good.prom"
ktap_check "the timekeeper's rate in hertz, to the millihertz" \
	grep -qx "tsc_timekeeper_frequency_hertz $((rate / 1000)).$(printf %03d $((rate % 1000)))" "$tmp/good.prom"

# The time: a bound that its terms add up to, or none, with a flag that
# says why, in JSON as in Prometheus; the module's counts of disruptions
# as they are in its files, and none without them (a module before 1.4),
# or with one that is not a count.
# (Each run reads the kernel's NTP state anew: where a daemon keeps the
# clock, maxerror grows 500 us a second between two runs.  So each run's
# bound is checked against its own terms.)
got=$(json "$tmp/good.json" 'j["time_bound"]["bound_ns"] == (None if {"unsynced", "disrupted"} & set(j["time_bound"]["flags"]) else sum(j["time_bound"]["terms_ns"].values()))')
echo "# time_bound: $(json "$tmp/good.json" 'j["time_bound"]')"
ktap_check "the time's bound: the sum of its terms, or null with the flag that says why" test "$got" = True
# shellcheck disable=SC2016 # awk's own $1 and $2
got=$(awk '$1 == "tsc_time_bound_seconds" { b = $2 } $1 ~ /^tsc_time_bound_term_seconds/ { sum += $2 }
	$1 ~ /^tsc_time_bound_flag\{flag="(unsynced|disrupted)"\}/ { none += $2 }
	END { print (none ? b == "+Inf" : b != "+Inf" && (b - sum) ^ 2 < 1e-16) }' "$tmp/good.prom")
echo "# $(grep '^tsc_time_bound_seconds' "$tmp/good.prom")"
ktap_check "and in Prometheus: the sum of its terms, or +Inf with the flag" test "$got" = 1
boot=$(cat /proc/sys/kernel/random/boot_id)
ktap_check "the module's counts of disruptions, in JSON, of this boot" \
	test "$(json "$tmp/good.json" 'j["disruptions"]')" = \
	"{'clock_steps': 2, 'clock_resumes': 1, 'clocksource_changes': 3, 'boot_id': '$boot'}"
ktap_check "and in Prometheus, a counter by cause, labelled with the boot" \
	test "$(grep '^tsc_clock_disruptions_total' "$tmp/good.prom" | tr '\n' ' ')" = \
	"tsc_clock_disruptions_total{cause=\"step\",boot_id=\"$boot\"} 2 tsc_clock_disruptions_total{cause=\"resume\",boot_id=\"$boot\"} 1 tsc_clock_disruptions_total{cause=\"clocksource\",boot_id=\"$boot\"} 3 "
cp -a "$tmp/good" "$tmp/old"
rm "$tmp/old/devices/system/cpu/tsc/clock_resumes"
cp -a "$tmp/good" "$tmp/junk"
echo x > "$tmp/junk/devices/system/cpu/tsc/clock_steps"
for r in old junk; do
	"$tool" --sysfs-root "$tmp/$r" --json > "$tmp/$r.json"
	"$tool" --sysfs-root "$tmp/$r" --prometheus > "$tmp/$r.prom"
	"$tool" --sysfs-root "$tmp/$r" > "$tmp/$r.txt"
done
ktap_check "no counts where a file is missing or not a count: null, no series, 'unknown'" test \
	"$(json "$tmp/old.json" 'j["disruptions"]') $(json "$tmp/junk.json" 'j["disruptions"]')" = "None None" \
	-a -z "$(grep -h tsc_clock_disruptions "$tmp/old.prom" "$tmp/junk.prom")" \
	-a "$(grep -h -c '^Disruptions  *unknown' "$tmp/old.txt" "$tmp/junk.txt" | tr '\n' ' ')" = "1 1 "

# The hypervisor's clock page, /dev/vmclock0, as the bounded read sees
# it: a fake page (layout 1, status synchronized, the marker past 2^52)
# in a mount namespace of its own, readable and then not to this user;
# and on this system, its device or none.
python3 -c 'import struct, sys
pg = bytearray(4096)
pg[0:12] = b"VCLK" + struct.pack("<IHBB", 4096, 1, 255, 0)
pg[12] = 2                                              # seq_count, even
pg[16:24] = struct.pack("<Q", (1 << 60) + 7)            # disruption_marker
pg[34] = 2                                              # clock_status
open(sys.argv[1], "wb").write(pg)' "$tmp/vmclock0"
chmod 644 "$tmp/vmclock0"
# shellcheck disable=SC2317 # run by ktap_check
valid_json_all() { for f; do valid_json "$f" "$schema" || return 1; done; }
# $1: setpriv's arguments, or none; then the tool's.
with_vmclock() {
	local who=$1
	shift
	# shellcheck disable=SC2086,SC2016 # who: words or none; the inner shell's $0 and $@
	unshare -m sh -c 'mount -t tmpfs none /dev && cp -p "$0" /dev/vmclock0 && exec "$@"' \
		"$tmp/vmclock0" ${who:+setpriv $who} "$tool" "$@"
}
who="--reuid=65534 --regid=65534 --clear-groups"
chmod 755 "$tmp"
# shellcheck disable=SC2086 # who: its words
if [ "$(id -u)" != 0 ] || ! unshare -m sh -c 'mount -t tmpfs none /dev' 2>/dev/null ||
   ! setpriv $who test -x "$tool" 2>/dev/null; then
	for t in "the VM clock page: its status and marker" "and in Prometheus, the marker's low 52 bits" \
		 "unreadable to the user: said so" "and in Prometheus" "both valid against the schema"; do
		ktap_skip "$t" "needs root, a mount namespace with a tmpfs on /dev, and $tool open to nobody"
	done
else
	with_vmclock "" --sysfs-root "$tmp/good" --json > "$tmp/vm.json"
	with_vmclock "" --sysfs-root "$tmp/good" --prometheus > "$tmp/vm.prom"
	with_vmclock "" --sysfs-root "$tmp/good" > "$tmp/vm.txt"
	ktap_check "the VM clock page: its status and marker" test \
		"$(json "$tmp/vm.json" 'j["vmclock"]')" = "{'clock_status': 'synchronized', 'disruption_marker': 1152921504606846983}" \
		-a "$(grep -c '^VM clock  */dev/vmclock0: clock synchronized, disruption marker 1152921504606846983$' "$tmp/vm.txt")" = 1
	ktap_check "and in Prometheus, the marker's low 52 bits" test \
		"$(grep -e '^tsc_vmclock_disruption_marker ' -e '^tsc_vmclock_status.* 1$' "$tmp/vm.prom" | tr '\n' ' ')" = \
		'tsc_vmclock_status{status="synchronized"} 1 tsc_vmclock_disruption_marker 7 '
	chmod 600 "$tmp/vmclock0"
	with_vmclock "$who" --sysfs-root "$tmp/good" --json > "$tmp/vm-user.json"
	with_vmclock "$who" --sysfs-root "$tmp/good" --prometheus > "$tmp/vm-user.prom"
	with_vmclock "$who" --sysfs-root "$tmp/good" > "$tmp/vm-user.txt"
	ktap_check "unreadable to the user: said so" test \
		"$(json "$tmp/vm-user.json" 'j["vmclock"]')" = "{'clock_status': 'unreadable', 'disruption_marker': None}" \
		-a "$(grep -c '^VM clock .* cannot be opened by this user' "$tmp/vm-user.txt")" = 1
	ktap_check "and in Prometheus" test \
		"$(grep -e '^tsc_vmclock_disruption_marker' -e '^tsc_vmclock_status.* 1$' "$tmp/vm-user.prom" | tr '\n' ' ')" = \
		'tsc_vmclock_status{status="unreadable"} 1 '
	ktap_check "both valid against the schema" valid_json_all "$tmp/vm.json" "$tmp/vm-user.json"
fi
chmod 700 "$tmp"
if [ -e /dev/vmclock0 ]; then
	ktap_check "on this system: its vmclock device read" test "$(json "$tmp/good.json" 'j["vmclock"] is not None')" = True
else
	ktap_check "on this system: no vmclock device, none in JSON or Prometheus" test \
		"$(json "$tmp/good.json" 'j["vmclock"]')" = None -a -z "$(grep tsc_vmclock "$tmp/good.prom")"
fi
# In a sandbox: under a seccomp filter that allows adjtimex(), the tool
# reads the kernel's NTP state (its maxerror, never 0 once read); under
# one that kills the caller for it or fails it, as systemd's
# SystemCallFilter= and ProtectClock= do, the tool lives on and says the
# state is unknown (unsynced, the terms it would give 0).
names=("under a seccomp filter that allows adjtimex(): the kernel's NTP state read"
	"under one that kills the caller of adjtimex(): the tool lives, the state unknown"
	"under one that fails adjtimex() (EPERM): the state unknown")
if [ -x "$seccomp" ]; then
	i=0
	for mode in allow kill-adjtimex eperm-adjtimex; do
		"$seccomp" $mode "$tool" --sysfs-root "$tmp/good" --json > "$tmp/$mode.json" 2> "$tmp/$mode.err"
		st=$?
		got=$(json "$tmp/$mode.json" '(j["time_bound"]["terms_ns"]["maxerror"] > 0, "unsynced" in j["time_bound"]["flags"])' 2>&1)
		echo "# $mode: exit $st, (maxerror read, unsynced): $got $(head -n 1 "$tmp/$mode.err")"
		want="(False, True)"
		[ $mode = allow ] && want="(True, $(json "$tmp/good.json" '"unsynced" in j["time_bound"]["flags"]'))"
		ktap_check "${names[i]}" test $st -le 1 -a "$got" = "$want"
		i=$((i + 1))
	done
else
	for name in "${names[@]}"; do ktap_skip "$name" "no seccomp_run helper given (tests/seccomp_run.c)"; done
fi

# --output, as the systemd service uses it: the whole report, renamed over
# the target (a new inode: never rewritten in place), mode 0644, no
# temporary file left, nothing on standard output; a report that fails
# leaves the target as it was.
mkdir "$tmp/textfile"
echo old > "$tmp/textfile/tsc.prom"
ino=$(stat -c %i "$tmp/textfile/tsc.prom")
"$tool" --sysfs-root "$tmp/good" --prometheus --output "$tmp/textfile/tsc.prom" > "$tmp/stdout"; st=$?
ktap_check "--output: replaced by rename, 0644, nothing else left, nothing on stdout" \
	test $st -le 1 -a "$(stat -c %i "$tmp/textfile/tsc.prom")" != "$ino" \
	-a "$(stat -c %a "$tmp/textfile/tsc.prom")" = 644 -a "$(ls -A "$tmp/textfile")" = tsc.prom \
	-a ! -s "$tmp/stdout"
# Each run calibrates anew, and reads the kernel's NTP state anew: those
# lines differ, and whether the sources agree may too; every other is the
# same.
# (Files, not <(...): the guests have no /dev/fd.)
same_but_calibration() {
	grep -v -e 'source="calibration"' -e '^tsc_frequency_sources_agree ' -e '^tsc_time_bound_seconds ' \
		-e '^tsc_time_bound_term_seconds{term="\(maxerror\|growth\|slewing\)"}' \
		-e '^tsc_time_esterror_seconds ' "$1" > "$2"
}
same_but_calibration "$tmp/textfile/tsc.prom" "$tmp/output.same"
same_but_calibration "$tmp/good.prom" "$tmp/stdout.same"
ktap_check "--output: the same text as on standard output, but for the calibration" \
	cmp "$tmp/output.same" "$tmp/stdout.same"
# Only a regular file is replaced: a symbolic link is refused, before
# anything is measured, and its target left alone.
ln -s "$tmp/textfile/tsc.prom" "$tmp/link.prom"
cp "$tmp/textfile/tsc.prom" "$tmp/before"
"$tool" --sysfs-root "$tmp/good" --prometheus --output "$tmp/link.prom" 2> "$tmp/err"; st=$?
echo "# --output to a symlink: exit $st: $(head -n 1 "$tmp/err")"
ktap_check "--output to a symbolic link: exit 2, the link and its target untouched" \
	test $st = 2 -a -L "$tmp/link.prom" -a -n "$(grep -l 'symbolic link' "$tmp/err")" \
	-a "$(cat "$tmp/textfile/tsc.prom")" = "$(cat "$tmp/before")"
# 1 MHz, which no TSC here runs at: --verify fails (exit 3).
fake_root "$tmp/wrong" 0 1000
ino=$(stat -c %i "$tmp/textfile/tsc.prom")
cp "$tmp/textfile/tsc.prom" "$tmp/before"
"$tool" --sysfs-root "$tmp/wrong" --verify --prometheus --output "$tmp/textfile/tsc.prom" 2> "$tmp/err"; st=$?
echo "# failing report: exit $st: $(head -n 1 "$tmp/err")"
ktap_check "--output: a failed report (exit 3) leaves the file as it was, no temporary file" \
	test $st = 3 -a "$(stat -c %i "$tmp/textfile/tsc.prom")" = "$ino" -a "$(ls -A "$tmp/textfile")" = tsc.prom
ktap_check "--output: its content unchanged" cmp "$tmp/textfile/tsc.prom" "$tmp/before"
# Killed while it works, as a systemd timeout would: no temporary file
# left behind.  It is held there, whatever the machine's speed (under TCG
# a calibration against a TSC clocksource ends at once), by a root whose
# tsc_freq_khz is a FIFO with no writer: the temporary file, its first
# work, is made before it reads that.
cp -a "$tmp/good" "$tmp/stuck"
fifo=$tmp/stuck/devices/system/cpu/cpu0/tsc_freq_khz
rm "$fifo" && mkfifo "$fifo"
"$tool" --sysfs-root "$tmp/stuck" --prometheus --output "$tmp/textfile/tsc.prom" &
pid=$!
for _ in $(seq 1000); do
	[ "$(find "$tmp/textfile" -mindepth 1 | wc -l)" -gt 1 ] && break
	sleep 0.01
done
seen=$(find "$tmp/textfile" -mindepth 1 | wc -l)
kill -TERM $pid
wait $pid; st=$?
echo "# killed while working: exit $st, files seen before: $seen, after: $(find "$tmp/textfile" -mindepth 1 -printf '%f ')"
ktap_check "--output: killed by SIGTERM, its temporary file removed, the file as it was" \
	test $st = 143 -a "$seen" = 2 -a "$(ls -A "$tmp/textfile")" = tsc.prom
# A SIGTERM its starter ignores stays ignored: held the same way, the
# tool is still there after it; then it is killed for good.
(trap '' TERM; exec "$tool" --sysfs-root "$tmp/stuck" --prometheus \
	--output "$tmp/textfile/tsc.prom") &
pid=$!
for _ in $(seq 1000); do
	[ "$(find "$tmp/textfile" -mindepth 1 | wc -l)" -gt 1 ] && break
	sleep 0.01
done
kill -TERM $pid
sleep 0.5
kill -0 $pid 2> /dev/null; alive=$?
kill -KILL $pid
wait $pid 2> /dev/null
find "$tmp/textfile" -name '.tsc.prom.*' -delete
echo "# SIGTERM ignored by its starter: still running after it: $((!alive))"
ktap_check "--output: a SIGTERM ignored by its starter stays ignored" test $alive = 0
# Standard output that cannot be written (a full disk): the report is
# lost, which fails the run (exit 3), whatever the verdict.
name="standard output not written (/dev/full): exit 3 with a message"
if [ -c /dev/full ]; then
	"$tool" --sysfs-root "$tmp/good" --json > /dev/full 2> "$tmp/err"; st=$?
	echo "# to /dev/full: exit $st: $(head -n 1 "$tmp/err")"
	ktap_check "$name" test $st = 3 -a -n "$(grep -l 'standard output' "$tmp/err")"
else
	ktap_skip "$name" "no /dev/full here"
fi

# Each source on its own beside the chosen one: the fake 1 MHz file and
# this machine's calibration, which cannot agree.
"$tool" --sysfs-root "$tmp/wrong" --prometheus > "$tmp/wrong.prom"; st=$?
grep '^tsc_frequency_source' "$tmp/wrong.prom" | sed 's/^/# /'
ktap_check "sources that disagree: each listed, agreement 0, and no failure" \
	test $st -le 1 -a -n "$(grep -lx 'tsc_frequency_source_hertz{source="sysfs"} 1000000.000' "$tmp/wrong.prom")" \
	-a -n "$(grep -l '^tsc_frequency_source_hertz{source="calibration"} ' "$tmp/wrong.prom")" \
	-a -n "$(grep -lx 'tsc_frequency_sources_agree 0' "$tmp/wrong.prom")"
"$tool" --sysfs-root "$tmp/wrong" > "$tmp/wrong.txt"
"$tool" --sysfs-root "$tmp/wrong" --json > "$tmp/wrong.json"
# Sources are compared in the order listed, sysfs first: its 1 MHz
# disagrees with the next that answers here (perf, the hypervisor, CPUID
# or the calibration), which the tool's own list names.
next=$(json "$tmp/wrong.json" 'j["frequency_sources"]["sources"][1]["source"]')
ktap_check "and in words: which two (sysfs and $next), how far apart" \
	grep -Eq "^ *DISAGREE: sysfs is [-+][0-9.e+]+ ppm from $next, more than" "$tmp/wrong.txt"

fake_root "$tmp/unstable" 1 2600002
"$tool" --sysfs-root "$tmp/unstable" > "$tmp/unstable.txt"; st=$?
ktap_check "the kernel marking the TSC unstable means exit 1, and why" \
	test $st = 1 -a -n "$(grep -l '^Verdict        no: .*marked the TSC unstable' "$tmp/unstable.txt")"

fake_root "$tmp/bad" 0 abc
"$tool" --sysfs-root "$tmp/bad" --json > "$tmp/bad.json"; st=$?
echo "# $(json "$tmp/bad.json" 'j["frequency"]["detail"][:160]')"
ktap_check "a bad frequency file is not believed, and not fatal" \
	test $st != 3 -a "$(json "$tmp/bad.json" 'j["frequency"]["source"]')" != sysfs \
	-a -n "$(grep -l 'not a plain decimal' "$tmp/bad.json")"
ktap_check "a source without a hard bound gives none (null), perf's is one" \
	test "$(json "$tmp/bad.json" '(j["frequency"]["bound_ppm"] is None) == (j["frequency"]["source"] != "perf")')" = True
got=$(json "$tmp/bad.json" '(j["sysclock"]["path"], j["sysclock"]["rate_millihz"], "module" in j["sysclock"]["why"])')
ktap_check "no clock page: clock_gettime(), no rate, and why" test "$got" = "('syscall', None, True)"
"$tool" --sysfs-root "$tmp/bad" --prometheus > "$tmp/bad.prom"
ktap_check "and in Prometheus: the path, no rate" \
	test -n "$(grep -l '^tsc_sysclock_info{path="syscall"} 1$' "$tmp/bad.prom")" \
	-a -z "$(grep -l timekeeper "$tmp/bad.prom")"

system_checks
ktap_finish
