#!/bin/bash
# shellcheck disable=SC2317 # the steps are functions run through timed()
# SPDX-License-Identifier: GPL-2.0
#
# dkms.conf says what the module supports (BUILD_EXCLUSIVE_KERNEL, _ARCH,
# _CONFIG).  Check that DKMS skips anything else as it should: exit 77 and
# its "BUILD_EXCLUSIVE directive" message, nothing built, not a build error.
#
#   scripts/packaging/dkms-exclusive-check.sh WORKDIR
#
# All with private DKMS trees in WORKDIR (as the Makefile's dkms-check):
# /var/lib/dkms, /usr/src and /lib/modules are not touched, except that
# dkms, as on any host, makes /var/lib/dkms/mok.key if missing, and its
# install step re-runs depmod for the (real) kernel it installs for.
#
# Steps, each timed:
#   regex      dkms.conf's patterns against kernel versions and arches
#              (no DKMS): what the comment in dkms.conf promises
#   kernel     dkms build for a kernel it excludes, without headers
#              (5.10.0-99-amd64): 77
#   arch       dkms build for a supported kernel, -a i386: 77
#   config     dkms build against a copy of real headers whose .config
#              lacks CONFIG_HOTPLUG_CPU: 77
#   install    dkms install, what admins and kernel hooks run: 77
#   autoinstall  dkms autoinstall -k for an excluded kernel: DKMS 3.0.10
#              counts the skip as a failure (exit 11), dkms-project/dkms
#              issue 302, fixed in 3.0.11; reported, not failed on
#   control    dkms build for the newest supported kernel here: 0, so the
#              exclusions above are not vacuous
#
# Exit: 0 pass, 1 fail, 4 skip (no dkms, not root, no kernel headers).
set -Eeuo pipefail

# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/common.sh"

[[ $# -eq 1 && -n $1 ]] || { echo "usage: $0 WORKDIR" >&2; exit 2; }
mkdir -p "$1"
work=$(cd "$1" && pwd)/dkms-exclusive

cleanup() {
	local rc=$?
	trap - ERR
	print_times
	case $rc in
	0) echo "dkms-exclusive-check: PASS" ;;
	4) echo "dkms-exclusive-check: SKIP" ;;
	*) echo "dkms-exclusive-check: FAIL" ;;
	esac
	exit "$rc"
}
trap cleanup EXIT

command -v dkms > /dev/null || skip "dkms is not installed"
[[ $(id -u) -eq 0 ]] || skip "dkms install and autoinstall need root"
dkms_version=$(dkms --version)
echo "dkms-exclusive-check: $pkg_name $pkg_version, $dkms_version, private trees in $work"

# The newest kernel here that the module supports and has headers for.
newest=
for k in $(kernels_with_headers); do
	[[ -z $(exclusion "$k" x86_64) ]] && newest=$k
done
[[ $newest ]] || skip "no supported kernel has headers here"

rm -rf "$work"
mkdir -p "$work/tree" "$work/src/$pkg_name-$pkg_version" "$work/install"
mapfile -t sources < <(module_sources)
(cd "$top" && cp --parents "${sources[@]}" "$work/src/$pkg_name-$pkg_version/")
dk=(dkms --dkmstree "$work/tree" --sourcetree "$work/src" --installtree "$work/install")
"${dk[@]}" add -m "$pkg_name" -v "$pkg_version" > "$work/add.log" 2>&1 ||
	fail "dkms add: $(cat "$work/add.log")"

# No .config: DKMS then skips the config test, as exclusion() does.
no_config=/nonexistent/.config

regex() {
	local k a why
	for k in 6.1.0-56-amd64 6.12.117+deb12-amd64 6.19.0-1-amd64 7.0.0-1-amd64 10.1.0; do
		why=$(exclusion "$k" x86_64 "$no_config")
		[[ -z $why ]] || fail "$k should be supported: $why"
	done
	for k in 5.10.0-99-amd64 6.0.0-1-amd64 4.19.0-27-amd64 3.16.0-11-amd64; do
		why=$(exclusion "$k" x86_64 "$no_config")
		[[ $why ]] || fail "$k should be excluded"
	done
	for a in i386 i686 aarch64; do
		why=$(exclusion 6.1.0-56-amd64 "$a" "$no_config")
		[[ $why ]] || fail "arch $a should be excluded"
	done
	echo "  supported: 6.1 to 6.99, 7 and later on x86_64; excluded: 3.16, 4.19, 5.10, 6.0; i386, i686, aarch64"
	# Every kernel with headers here, config test included.
	for k in $(kernels_with_headers); do
		why=$(exclusion "$k" x86_64)
		echo "  $k: ${why:-supported}"
	done
}

# Run dkms "$@" (an action and its arguments); it must exit 77 with the
# BUILD_EXCLUSIVE message, and leave nothing built for the kernel.
expect_skip() {
	local name=$1 k=$2 rc=0 a=x86_64
	shift 2
	[[ " $* " == *" -a i386 "* ]] && a=i386
	"${dk[@]}" "$@" > "$work/$name.log" 2>&1 || rc=$?
	[[ $rc -eq 77 ]] || { sed 's/^/  | /' "$work/$name.log"; fail "dkms $*: exit $rc, not 77"; }
	grep -q "BUILD_EXCLUSIVE directive which does not match" "$work/$name.log" ||
		{ sed 's/^/  | /' "$work/$name.log"; fail "dkms $*: no BUILD_EXCLUSIVE message"; }
	[[ ! -e $work/tree/$pkg_name/$pkg_version/$k/$a ]] ||
		fail "dkms $*: left $work/tree/$pkg_name/$pkg_version/$k/$a"
	[[ -z $(compgen -G "$work/install/$k/updates/dkms/$module.ko*") ]] ||
		fail "dkms $*: installed a module for $k"
	[[ $a == x86_64 ]] && a= || a=" -a $a"
	echo "  dkms $1 -k $k$a: exit 77: $(grep -m1 -o 'includes a BUILD_EXCLUSIVE.*' "$work/$name.log")"
}

kernel() {
	expect_skip kernel 5.10.0-99-amd64 build -m "$pkg_name" -v "$pkg_version" -k 5.10.0-99-amd64
	echo "  reason (dkms.conf): $(exclusion 5.10.0-99-amd64 x86_64)"
}

arch() {
	expect_skip arch "$newest" build -m "$pkg_name" -v "$pkg_version" -k "$newest" -a i386
	echo "  reason (dkms.conf): $(exclusion "$newest" i386)"
}

# Real headers, but a .config without CONFIG_HOTPLUG_CPU: DKMS reads
# BUILD_EXCLUSIVE_CONFIG from --kernelsourcedir's .config.
config() {
	local fake=$work/fake-headers
	mkdir -p "$fake/include"
	grep -v '^CONFIG_HOTPLUG_CPU=' "/lib/modules/$newest/build/.config" > "$fake/.config"
	expect_skip config "$newest" build -m "$pkg_name" -v "$pkg_version" -k "$newest" \
		--kernelsourcedir "$fake"
	echo "  reason (dkms.conf): $(exclusion "$newest" x86_64 "$fake/.config")"
}

install_excluded() {
	expect_skip install 5.10.0-99-amd64 install -m "$pkg_name" -v "$pkg_version" -k 5.10.0-99-amd64
}

autoinstall() {
	local rc=0
	"${dk[@]}" autoinstall -k 5.10.0-99-amd64 > "$work/autoinstall.log" 2>&1 || rc=$?
	case $rc in
	0)	echo "  dkms autoinstall -k 5.10.0-99-amd64: exit 0, skipped" ;;
	11)	grep -q "BUILD_EXCLUSIVE directive which does not match" "$work/autoinstall.log" ||
			{ sed 's/^/  | /' "$work/autoinstall.log"; fail "autoinstall: exit 11 without the BUILD_EXCLUSIVE message"; }
		echo "  dkms autoinstall -k 5.10.0-99-amd64: exit 11, \"One or more modules failed to install during autoinstall\""
		echo "  known DKMS bug (dkms-project/dkms#302, fixed in 3.0.11): the skip counts as a failure in autoinstall" ;;
	*)	sed 's/^/  | /' "$work/autoinstall.log"
		fail "dkms autoinstall -k 5.10.0-99-amd64: exit $rc" ;;
	esac
	[[ -z $(compgen -G "$work/install/5.10.0-99-amd64/updates/dkms/$module.ko*") ]] ||
		fail "autoinstall installed a module for 5.10.0-99-amd64"
}

control() {
	local v
	mkdir -p "$work/install/$newest"
	"${dk[@]}" build -m "$pkg_name" -v "$pkg_version" -k "$newest" > "$work/control.log" 2>&1 ||
		{ tail -n 20 "$work/control.log" | sed 's/^/  | /'; fail "dkms build -k $newest failed"; }
	# (dkms status's readelf probe of 6.12 headers warns on stderr.)
	v=$("${dk[@]}" status -m "$pkg_name" -k "$newest" 2> /dev/null)
	[[ $v == *": built" ]] || fail "dkms status for $newest says '$v'"
	echo "  dkms build -k $newest: exit 0, built"
}

timed regex regex
timed kernel kernel
timed arch arch
timed config config
timed install install_excluded
timed autoinstall autoinstall
timed control control
exit "$KSFT_PASS"
