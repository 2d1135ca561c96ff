#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# clients_test.sh - check that real user-space clients of
# /sys/devices/system/cpu/cpu0/tsc_freq_khz (LLVM X-Ray's runtime and
# Abseil's NominalCPUFrequency()) pick up the value the tsc_freq_khz module
# exports.
#
# Usage: clients_test.sh <path-to-tsc_freq_khz.ko> <dir-with-built-clients>
#
# The client directory must hold xray_client and absl_client (built by
# selftests/clients/clients.mk).  Runs as root; prints KTAP/TAP; exits 0 when
# every test passed or was skipped, 1 if any failed, 4 if all were skipped.
#
# What the clients do (see selftests/clients/*):
#   X-Ray (compiler-rt 14, xray_x86_64.cpp): needs RDTSCP (CPUID 0x80000001
#   EDX bit 27), then reads tsc_freq_khz, else cpufreq/cpuinfo_max_freq, and
#   multiplies by 1000.  If neither works it prints "Unable to determine CPU
#   frequency for TSC accounting." and uses clock_gettime(), so the basic-mode
#   log header says CycleFrequency = 1000000000.  The header (xray_records.h,
#   struct XRayFileHeader, 32 bytes) is: u16 Version @0 (3 for basic mode),
#   u16 Type @2 (0 = NAIVE_LOG), flag bits @4, u64 CycleFrequency @8.
#   Abseil (20220623, sysinfo.cc): tsc_freq_khz * 1e3 if the file parses,
#   else it measures the TSC itself against CLOCK_MONOTONIC_RAW.
#
# Test-only hooks (defaults are the real commands): CLIENTS_TEST_INSMOD and
# CLIENTS_TEST_RMMOD replace "insmod" and "rmmod" (each gets the same
# arguments), for checking this script where the module cannot be loaded.

set -u
# shellcheck source=../testlib/unload.sh
. "$(dirname "$0")/../testlib/unload.sh"

readonly KSFT_PASS=0 KSFT_FAIL=1 KSFT_SKIP=4
readonly MODNAME=tsc_freq_khz
readonly CPU0=/sys/devices/system/cpu/cpu0
readonly TSC_FILE=$CPU0/tsc_freq_khz
readonly CPUFREQ_MAX=$CPU0/cpufreq/cpuinfo_max_freq
readonly XRAY_MSG="Unable to determine CPU frequency for TSC accounting."
readonly XRAY_EMULATED_FREQ=1000000000
readonly NTESTS=13

INSMOD=${CLIENTS_TEST_INSMOD:-insmod}
RMMOD=${CLIENTS_TEST_RMMOD:-rmmod}

if [ $# -ne 2 ]; then
	echo "Usage: $0 <path-to-tsc_freq_khz.ko> <dir-with-built-clients>" >&2
	exit $KSFT_FAIL
fi
KO=$1
CLIENT_DIR=$2
XRAY_CLIENT=$CLIENT_DIR/xray_client
ABSL_CLIENT=$CLIENT_DIR/absl_client

echo "TAP version 13"

if [ "$(id -u)" -ne 0 ]; then
	echo "1..0 # SKIP must be run as root (insmod/rmmod)"
	exit $KSFT_SKIP
fi

echo "1..$NTESTS"

n=0 npass=0 nfail=0 nskip=0
ok()    { n=$((n + 1)); npass=$((npass + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); nfail=$((nfail + 1)); echo "not ok $n - $1"; }
skip()  { n=$((n + 1)); nskip=$((nskip + 1)); echo "ok $n - $1 # SKIP $2"; }
diag()  { local l; while IFS= read -r l; do echo "# $l"; done <<<"$*"; }
# Print a file (e.g. a client's stderr) as diagnostics.
diag_file() { local l; while IFS= read -r l || [ -n "$l" ]; do echo "# $1: $l"; done <"$2"; }
check() { # check <name> <condition-status>
	if [ "$2" -eq 0 ]; then ok "$1"; else notok "$1"; fi
}

is_loaded() {
	if [ -r /proc/modules ]; then
		grep -q "^$MODNAME " /proc/modules
	else
		[ -d "/sys/module/$MODNAME" ]
	fi
}

TMP=
was_loaded=0    # the module was loaded when we started
we_loaded=0     # we inserted it and have not removed it yet
restored=0

restore_state() {
	[ "$restored" -eq 1 ] && return 0
	restored=1
	local rc=0
	if [ "$was_loaded" -eq 1 ]; then
		if ! is_loaded && [ "$we_loaded" -eq 0 ]; then
			$INSMOD "$KO" || rc=1
		fi
	elif [ "$we_loaded" -eq 1 ]; then
		tscfk_unload "$RMMOD" && we_loaded=0 || rc=1
	fi
	return $rc
}

# shellcheck disable=SC2317 # invoked via trap
cleanup() {
	restore_state >/dev/null 2>&1
	[ -n "$TMP" ] && rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit $KSFT_FAIL' INT TERM HUP

bail() {
	echo "Bail out! $*"
	exit $KSFT_FAIL
}

with_timeout() {
	if command -v timeout >/dev/null 2>&1; then
		timeout 120 "$@"
	else
		"$@"
	fi
}

# read_u_le <file> <offset> <size>: unsigned little-endian integer, via od
# bytes so it does not depend on od's or the host's byte order.
read_u_le() {
	local bytes v=0 i=0 b
	bytes=$(od -An -v -t u1 -j "$2" -N "$3" "$1") || return 1
	for b in $bytes; do
		v=$((v + (b << (8 * i))))
		i=$((i + 1))
	done
	[ "$i" -eq "$3" ] || return 1
	echo "$v"
}

# run_xray <label>: run xray_client with X-Ray basic logging into a fresh
# directory; sets XR_RC, XR_DIR (stdout, stderr files), XR_RDTSCP, XR_FREQ
# (CycleFrequency, empty if the log or header is unusable), XR_ERR.
run_xray() {
	XR_DIR=$TMP/xray-$1
	XR_FREQ='' XR_RDTSCP='' XR_ERR=''
	mkdir -p "$XR_DIR/log" || { XR_ERR="mkdir failed"; XR_RC=1; return; }
	# XRAY_BASIC_OPTIONS would override the basic-mode flags; keep defaults.
	with_timeout env -u XRAY_BASIC_OPTIONS -u XRAY_FDR_OPTIONS \
		XRAY_OPTIONS="patch_premain=true xray_mode=xray-basic xray_logfile_base=$XR_DIR/log/xray-log." \
		"$XRAY_CLIENT" hello world \
		>"$XR_DIR/stdout" 2>"$XR_DIR/stderr"
	XR_RC=$?
	XR_RDTSCP=$(sed -n 's/^rdtscp=\([01]\)$/\1/p' "$XR_DIR/stdout")
	diag "xray_client ($1): exit status $XR_RC, rdtscp=${XR_RDTSCP:-?}"
	diag_file "xray_client ($1) stderr" "$XR_DIR/stderr"

	local logs=("$XR_DIR"/log/xray-log.*)
	if [ ! -f "${logs[0]}" ]; then
		XR_ERR="no X-Ray log file written in $XR_DIR/log"
		return
	fi
	if [ ${#logs[@]} -ne 1 ]; then
		XR_ERR="expected 1 X-Ray log file, found ${#logs[@]}"
		return
	fi
	local size version type
	size=$(wc -c <"${logs[0]}")
	version=$(read_u_le "${logs[0]}" 0 2)
	type=$(read_u_le "${logs[0]}" 2 2)
	diag "xray_client ($1): log $(basename "${logs[0]}"), $size bytes, header Version=${version:-?} Type=${type:-?}"
	if [ "$size" -lt 32 ] || [ "$version" != 3 ] || [ "$type" != 0 ]; then
		XR_ERR="log is not an X-Ray basic-mode (version 3, NAIVE_LOG) file"
		return
	fi
	XR_FREQ=$(read_u_le "${logs[0]}" 8 8)
	diag "xray_client ($1): header CycleFrequency=$XR_FREQ"
}

# run_absl <label>: sets AB_RC, AB_RAW, AB_INT ("none" if not integral),
# AB_NS (duration of the first NominalCPUFrequency() call).
run_absl() {
	local out
	out=$(with_timeout "$ABSL_CLIENT" 2>"$TMP/absl-$1.stderr")
	AB_RC=$?
	AB_RAW=$(sed -n 's/^raw //p' <<<"$out")
	AB_INT=$(sed -n 's/^int //p' <<<"$out")
	AB_NS=$(sed -n 's/^elapsed_ns //p' <<<"$out")
	diag "absl_client ($1): exit status $AB_RC, NominalCPUFrequency() = ${AB_RAW:-?} (integer: ${AB_INT:-?}), first call took ${AB_NS:-?} ns"
	diag_file "absl_client ($1) stderr" "$TMP/absl-$1.stderr"
}

# ---------------------------------------------------------------- 1: inputs
missing=()
[ -f "$KO" ] && [ -r "$KO" ] || missing+=("module $KO")
[ -x "$XRAY_CLIENT" ] && [ -f "$XRAY_CLIENT" ] || missing+=("$XRAY_CLIENT")
[ -x "$ABSL_CLIENT" ] && [ -f "$ABSL_CLIENT" ] || missing+=("$ABSL_CLIENT")
if [ ${#missing[@]} -ne 0 ]; then
	notok "module and client binaries present"
	for m in "${missing[@]}"; do diag "missing or not executable/readable: $m"; done
	diag "build the clients with selftests/clients/clients.mk (needs clang-14, libclang-rt-14-dev, libabsl-dev)"
	bail "missing binaries: ${missing[*]}"
fi
ok "module and client binaries present"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/clients_test.XXXXXX") || bail "mktemp failed"

# ------------------------------------------------- 2: start without module
if is_loaded; then
	was_loaded=1
	diag "$MODNAME was loaded; removing it for the 'before' checks (it is reloaded at the end)"
	if tscfk_unload "$RMMOD" && ! is_loaded; then
		ok "start with $MODNAME unloaded"
	else
		notok "start with $MODNAME unloaded"
		bail "cannot rmmod $MODNAME"
	fi
else
	ok "start with $MODNAME unloaded"
fi

# ---------------------------------------------------- 3-5: before the module
before_skip=
if [ -e "$TSC_FILE" ]; then
	before_skip="$TSC_FILE exists without the module (patched kernel?)"
fi

absl_before_int=
if [ -n "$before_skip" ]; then
	skip "before: X-Ray reports '$XRAY_MSG'" "$before_skip"
	skip "before: X-Ray log CycleFrequency == $XRAY_EMULATED_FREQ" "$before_skip"
	skip "before: Abseil measures the TSC itself" "$before_skip"
else
	run_xray before
	cpufreq_khz=
	if [ -r "$CPUFREQ_MAX" ]; then
		cpufreq_khz=$(cat "$CPUFREQ_MAX" 2>/dev/null)
		diag "$CPUFREQ_MAX = ${cpufreq_khz:-unreadable}"
	fi

	name="before: X-Ray reports '$XRAY_MSG'"
	if [ "$XR_RDTSCP" = 0 ]; then
		skip "$name" "CPU lacks RDTSCP: X-Ray reports 'Missing rdtscp support.' and never reads the file"
	elif [ -n "$cpufreq_khz" ]; then
		skip "$name" "X-Ray falls back to $CPUFREQ_MAX"
	else
		grep -qF "$XRAY_MSG" "$XR_DIR/stderr"
		check "$name" $?
	fi

	name="before: X-Ray log CycleFrequency == $XRAY_EMULATED_FREQ"
	if [ "$XR_RDTSCP" != 0 ] && [ -n "$cpufreq_khz" ]; then
		skip "$name" "X-Ray falls back to $CPUFREQ_MAX"
	elif [ -n "$XR_ERR" ] || [ "$XR_RC" -ne 0 ]; then
		diag "${XR_ERR:-xray_client failed}"
		notok "$name"
	else
		diag "CycleFrequency $XR_FREQ vs expected $XRAY_EMULATED_FREQ"
		[ "$XR_FREQ" = "$XRAY_EMULATED_FREQ" ]
		check "$name" $?
	fi

	# Abseil has no fallback file on x86: it measures the TSC rate.  Keep
	# the value for a plausibility check of the module's number (test 11).
	run_absl before
	name="before: Abseil measures the TSC itself"
	int_part=${AB_RAW%%.*}
	if [ "$AB_RC" -eq 0 ] && [[ $int_part =~ ^[0-9]+$ ]] && [ ${#int_part} -le 15 ] &&
	   [ "$int_part" -ge 1000000 ]; then
		absl_before_int=$int_part
		ok "$name"
	else
		diag "expected a measured frequency >= 1 MHz, got '${AB_RAW:-nothing}'"
		notok "$name"
	fi
fi

# ----------------------------------------------------------- 6: insmod
if out=$($INSMOD "$KO" 2>&1); then
	we_loaded=1
	ok "insmod $KO"
else
	diag "$out"
	notok "insmod $KO"
fi

# ---------------------------------------------------------- 7: file format
khz=
name="$TSC_FILE is '<decimal kHz>\\n'"
if [ "$we_loaded" -ne 1 ]; then
	diag "module not loaded"
	notok "$name"
elif [ ! -r "$TSC_FILE" ]; then
	diag "$TSC_FILE missing or unreadable after insmod"
	notok "$name"
else
	# Keep the trailing newline(s): append a sentinel, then strip it.
	content=$(cat "$TSC_FILE"; printf x)
	content=${content%x}
	diag "$TSC_FILE content: $(printf '%q' "$content")"
	# The clients only need leading digits (then '\n' or NUL); take the
	# number even if the format check fails, so tests 8-10 still tell
	# whether the clients agree with it.
	if [[ $content =~ ^([0-9]{1,12}) ]] && [ $((10#${BASH_REMATCH[1]})) -gt 0 ]; then
		khz=$((10#${BASH_REMATCH[1]}))
		diag "tsc_freq_khz = $khz"
	fi
	if [ -n "$khz" ] && [[ $content =~ ^[1-9][0-9]*$'\n'$ ]]; then
		ok "$name"
	else
		diag "content is not 1-12 digits (no leading zero, value > 0) followed by exactly one newline"
		notok "$name"
	fi
fi
expected=
[ -n "$khz" ] && expected=$((khz * 1000))

# ----------------------------------------------------------- 8-9: X-Ray
name1="after: X-Ray does not report '$XRAY_MSG'"
name2="after: X-Ray log CycleFrequency == tsc_freq_khz * 1000"
if [ -z "$expected" ]; then
	notok "$name1"
	notok "$name2"
else
	run_xray after
	if [ "$XR_RDTSCP" = 0 ]; then
		reason="CPU lacks RDTSCP: X-Ray ignores tsc_freq_khz and uses clock_gettime()"
		skip "$name1" "$reason"
		skip "$name2" "$reason"
	else
		# The message's absence only means something if X-Ray really ran
		# and wrote its log.
		if [ "$XR_RC" -eq 0 ] && [ -n "$XR_RDTSCP" ] && [ -z "$XR_ERR" ] &&
		   ! grep -q "Unable to determine CPU frequency" "$XR_DIR/stderr"; then
			ok "$name1"
		else
			diag "xray_client failed (exit status $XR_RC${XR_ERR:+, $XR_ERR}) or the message is present"
			notok "$name1"
		fi
		diag "CycleFrequency ${XR_FREQ:-?} vs tsc_freq_khz*1000 $expected"
		if [ -n "$XR_ERR" ]; then
			diag "$XR_ERR"
			notok "$name2"
		else
			[ "$XR_FREQ" = "$expected" ]
			check "$name2" $?
		fi
	fi
fi

# ---------------------------------------------------------- 10-11: Abseil
name="after: Abseil NominalCPUFrequency() == tsc_freq_khz * 1000"
if [ -z "$expected" ]; then
	notok "$name"
else
	run_absl after
	diag "NominalCPUFrequency ${AB_INT:-?} vs tsc_freq_khz*1000 $expected"
	[ "$AB_RC" -eq 0 ] && [ "$AB_INT" = "$expected" ]
	check "$name" $?
fi

name="tsc_freq_khz within 10% of the TSC rate Abseil measured before"
if [ -z "$absl_before_int" ]; then
	skip "$name" "no 'before' measurement"
elif [ -z "$expected" ]; then
	notok "$name"
else
	d=$((absl_before_int - expected))
	[ $d -lt 0 ] && d=$((-d))
	diag "measured $absl_before_int Hz vs $expected Hz: off by $d Hz ($((d * 1000000 / expected)) ppm)"
	[ $((d * 10)) -le "$expected" ]
	check "$name" $?
fi

# ------------------------------------------------------- 12-13: unload, restore
name="rmmod $MODNAME removes $TSC_FILE"
if [ "$we_loaded" -ne 1 ]; then
	skip "$name" "module was not inserted"
elif [ -n "$before_skip" ]; then
	tscfk_unload "$RMMOD" && we_loaded=0
	skip "$name" "$before_skip"
elif tscfk_unload "$RMMOD"; then
	we_loaded=0
	[ ! -e "$TSC_FILE" ]
	check "$name" $?
else
	notok "$name"
fi

name="module state restored (loaded=$([ $was_loaded -eq 1 ] && echo yes || echo no))"
restore_state
rc=$?
if [ "$was_loaded" -eq 1 ]; then
	[ $rc -eq 0 ] && is_loaded
else
	[ $rc -eq 0 ] && [ "$we_loaded" -eq 0 ] && ! is_loaded
fi
check "$name" $?

diag "$npass passed, $nfail failed, $nskip skipped"
if [ $nfail -gt 0 ]; then
	exit $KSFT_FAIL
elif [ $npass -eq 0 ] && [ $nskip -gt 0 ]; then
	exit $KSFT_SKIP
fi
exit $KSFT_PASS
