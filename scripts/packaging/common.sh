# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # the variables are for the callers
#
# Shared by the packaging checks (deb-check.sh, dkms-exclusive-check.sh):
# sourced, not run.  The caller has set -Eeuo pipefail.

# kselftest's exit codes.
KSFT_PASS=0
KSFT_FAIL=1
KSFT_SKIP=4

# What the packaging checks run (dpkg-buildpackage, dkms, apt and the
# packages' scripts) runs as a packager and a fleet run it, with its own
# make's -j: not inside the caller's make, whose jobserver a recipe
# without '+' does not pass on (a make would warn "jobserver unavailable").
unset MAKEFLAGS MFLAGS MAKELEVEL

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
conf=$top/dkms.conf

# dkms.conf's values, read the way the Makefile reads PACKAGE_VERSION.
pkg_name=$(sed -n 's/^PACKAGE_NAME="\(.*\)"/\1/p' "$conf")
pkg_version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$conf")
module=$(sed -n 's/^BUILT_MODULE_NAME\[0\]="\(.*\)"/\1/p' "$conf")

# The binary packages of packaging/debian/control, and where each .deb is
# in the directory $out (the caller's).
deb_packages=("$pkg_name-dkms" libtsc1 libtsc-dev tsc-tools)
deb_file() {
	local a=all
	[[ $1 == *-dkms ]] || a=$(dpkg --print-architecture)
	# shellcheck disable=SC2154 # $out is the caller's
	echo "$out/${1}_${pkg_version}_$a.deb"
}

# The files DKMS builds the module from, relative to the top, sorted: what
# the Makefile's dkms-check copies (Kbuild dkms.conf module common),
# sources only (not the probes' answers of an in-tree build), and what the
# DKMS package ships.
module_sources() {
	(cd "$top" && printf '%s\n' Kbuild dkms.conf module/*.[ch] module/compat/* \
		common/*.[ch] | grep -vx module/compat-probes.h | LC_ALL=C sort)
}

# To stderr: inside $(...) it would otherwise be captured, and lost.
fail() {
	echo "FAIL: $*" >&2
	exit "$KSFT_FAIL"
}

skip() {
	echo "SKIP: $*"
	exit "$KSFT_SKIP"
}

# A command failing where nobody tests its status is a failure of the
# check (exit 1, not the command's own code, which could read as a skip),
# and says where.
trap 'fail "line $LINENO: \"$BASH_COMMAND\" exited with $?"' ERR
trap 'exit 130' INT TERM

# Steps are timed; the EXIT trap prints the list whatever the outcome.
times=()
elapsed() {
	awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}
timed() {
	local name=$1 t0=$EPOCHREALTIME dt
	shift
	echo "$name:"
	"$@"
	dt=$(elapsed "$t0")
	times+=("$name $dt s")
	echo "$name: ok ($dt s)"
}
print_times() {
	local t line=
	for t in "${times[@]}"; do
		line+="${line:+, }$t"
	done
	echo "times: ${line:-none}"
}

installed() {
	local st
	st=$(dpkg-query -W -f '${db:Status-Abbrev}' "$1" 2> /dev/null) || return 1
	[[ $st == ii* ]]
}

# Kernels with a build tree here, oldest first (as the Makefile's KERNELS).
kernels_with_headers() {
	local b
	for b in /lib/modules/*/build; do
		[[ -e $b/include ]] && basename "$(dirname "$b")"
	done | sort -V
}

# Why DKMS would skip kernel $1 on arch $2, or nothing if it would build
# there: the test of DKMS 3.0.10's read_conf() ("build_exclude"), with
# dkms.conf's own BUILD_EXCLUSIVE_* values.  $3 is the kernel's .config
# (default: the one in its headers); DKMS skips the config test when there
# is none.
exclusion() {
	local k=$1 a=$2 cfg=${3:-/lib/modules/$1/build/.config}
	(
		trap - ERR
		set +eu
		# shellcheck source=/dev/null
		. "$conf"
		if [[ $BUILD_EXCLUSIVE_KERNEL && ! $k =~ $BUILD_EXCLUSIVE_KERNEL ]]; then
			echo "kernel $k does not match BUILD_EXCLUSIVE_KERNEL=\"$BUILD_EXCLUSIVE_KERNEL\""
		elif [[ $BUILD_EXCLUSIVE_ARCH && ! $a =~ $BUILD_EXCLUSIVE_ARCH ]]; then
			echo "arch $a does not match BUILD_EXCLUSIVE_ARCH=\"$BUILD_EXCLUSIVE_ARCH\""
		elif [[ $BUILD_EXCLUSIVE_CONFIG && -e $cfg ]]; then
			for c in $BUILD_EXCLUSIVE_CONFIG; do
				case $c in
				!*)	if grep -q -E "^${c#!}=[ym]" "$cfg"; then
						echo "${c#!} is set in $cfg (BUILD_EXCLUSIVE_CONFIG)"
						break
					fi ;;
				*)	if ! grep -q -E "^$c=[ym]" "$cfg"; then
						echo "$c is not set in $cfg (BUILD_EXCLUSIVE_CONFIG)"
						break
					fi ;;
				esac
			done
		fi
		exit 0
	)
}

# What deb-install-check.sh left in $1 for checks that need tools a fresh
# root lacks: tsc-report's JSON against the schema the package installed,
# and the service's Prometheus text through promtool.
check_results() {
	local r=$1 v
	python3 -c 'import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))' \
		"$r/tsc-report.json" "$r/tsc-report.schema.json" ||
		fail "the installed tsc-report's JSON does not validate against the installed schema"
	v=$(python3 -c 'import json, sys; j = json.load(open(sys.argv[1]))
print(j["frequency"]["source"], j["offsets"]["source"], j["verdict"]["trustworthy"])' "$r/tsc-report.json")
	echo "  tsc-report --json: valid against /usr/share/tsc/tsc-report.schema.json (frequency, offsets, trustworthy: $v)"
	promtool check metrics < "$r/tsc.prom" > /dev/null 2>&1 ||
		fail "promtool rejects what the service wrote: $(promtool check metrics < "$r/tsc.prom" 2>&1 | head -n 3)"
	grep -q '^tsc_trustworthy [01]$' "$r/tsc.prom" || fail "the service's file has no tsc_trustworthy"
	echo "  the service's tsc.prom: promtool check metrics accepts it"
}
