#!/bin/bash
# shellcheck disable=SC2317 # the steps are functions run through timed()
# SPDX-License-Identifier: GPL-2.0
#
# Build the module's Debian package, tsc-freq-khz-dkms, check what is in it,
# then install it on this machine as a fleet would and purge it again.
#
#   scripts/packaging/deb-check.sh [--build-only] OUTDIR
#
# Why not 'dkms mkdeb': DKMS 3.0 dropped mkdeb, mkdsc, mkbmdeb and mkrpm
# (bookworm's 3.0.10 has add, remove, build, install, uninstall, match,
# autoinstall, mktarball, ldtarball and status; /usr/share/doc/dkms/
# HOWTO.Debian still describes mkdeb).  What replaced it, and what Debian's
# own *-dkms packages are, is a source package built with debhelper's
# dh_dkms (packages debhelper and dh-dkms): packaging/debian/ here.  dh_dkms
# writes the same maintainer scripts mkdeb's template did.  Building needs
# no DKMS tree at all, so /var/lib/dkms and /usr/src are untouched until
# the install step, whose point is to touch them.
#
# Steps, each timed; everything they write is in OUTDIR:
#   build    dpkg-buildpackage in a scratch copy of the sources: the .deb,
#            and the source package (.dsc, .tar.xz) for a build farm
#   inspect  control fields, the files (byte for byte), maintainer scripts
#   dkms     the packaged sources through dkms add, build, install with
#            private trees, as the Makefile's dkms-check does, for the
#            newest kernel: the package builds even when install is skipped
#   install  dpkg -i: the postinst builds for the kernels it chooses that
#            have headers; each has the module in updates/dkms, signed,
#            and found by modprobe
#   purge    dpkg --purge: nothing of it left
# --build-only stops after inspect (no root needed): 'make deb'.
#
# Exit: 0 pass, 1 fail, 4 skip.  Skip when the build tools are missing, or,
# before installing, when this is not root or the module is already on
# this machine in any form (someone's real install: it is left alone).
set -Eeuo pipefail

# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/common.sh"

usage() {
	echo "usage: $0 [--build-only] OUTDIR" >&2
	exit 2
}
build_only=
if [[ ${1:-} == --build-only ]]; then
	build_only=1
	shift
fi
[[ $# -eq 1 && -n $1 ]] || usage
mkdir -p "$1"
out=$(cd "$1" && pwd)

deb_pkg=$pkg_name-dkms
deb=$out/${deb_pkg}_${pkg_version}_all.deb
src=/usr/src/$pkg_name-$pkg_version
arch=$(uname -m)
# The files DKMS builds from, relative to the top: what the Makefile's
# dkms-check copies (Kbuild Makefile dkms.conf module common), sources only.
mapfile -t sources < <(cd "$top" && printf '%s\n' Kbuild Makefile dkms.conf \
	module/*.[ch] common/*.[ch] | sort)

installed_by_us=
chosen=()

cleanup() {
	local rc=$?
	trap - ERR
	if [[ $installed_by_us ]]; then
		echo "cleanup: purging $deb_pkg, which this run installed"
		dpkg --purge "$deb_pkg" >> "$out/purge.log" 2>&1 ||
			echo "cleanup: dpkg --purge $deb_pkg failed, see $out/purge.log"
	fi
	print_times
	case $rc in
	0) echo "deb-check: PASS" ;;
	4) echo "deb-check: SKIP" ;;
	130) echo "deb-check: interrupted" ;;
	*) echo "deb-check: FAIL" ;;
	esac
	exit "$rc"
}
trap cleanup EXIT

echo "deb-check: $deb_pkg $pkg_version from $top, into $out"

missing=
for p in dpkg-dev debhelper dh-dkms; do
	installed "$p" || missing+=" $p"
done
[[ -z $missing ]] || skip "missing:$missing (apt-get install$missing)"

# One version everywhere: the package's (debian/changelog) is what dpkg
# and apt compare, dkms.conf's names /usr/src/NAME-VERSION and DKMS's tree,
# MODULE_VERSION is what modinfo and /sys/module/*/version show.
changelog_version=$(dpkg-parsechangelog -l "$top/packaging/debian/changelog" -S Version)
[[ $changelog_version == "$pkg_version" ]] ||
	fail "packaging/debian/changelog is at $changelog_version, dkms.conf at $pkg_version: add a changelog entry"
module_version=$(sed -n 's/^MODULE_VERSION("\(.*\)");/\1/p' "$top/module/main.c")
[[ $module_version == "$pkg_version" ]] ||
	fail "module/main.c has MODULE_VERSION(\"$module_version\"), dkms.conf $pkg_version"

build() {
	local s=$out/src/$pkg_name-$pkg_version
	# Only what this script makes, in case OUTDIR holds other things.
	rm -rf "$out/src" "$out/extract" "$out/control" "$out/dkms"
	rm -f "$out/${deb_pkg}_"*.deb "$out/${pkg_name}_"*.dsc "$out/${pkg_name}_"*.tar.xz \
		"$out/${pkg_name}_"*.buildinfo "$out/${pkg_name}_"*.changes
	# A scratch tree: the sources and nothing a local build left in them
	# (module/*.o, build/), plus debian/ at its top, where dpkg wants it.
	mkdir -p "$s/packaging"
	(cd "$top" && cp --parents "${sources[@]}" README.md "$s/")
	cp -r "$top/packaging/debian" "$s/"
	cp -r "$top/packaging/modules-load.d" "$top/packaging/modprobe.d" "$s/packaging/"
	if ! (cd "$s" && dpkg-buildpackage -us -uc) > "$out/build.log" 2>&1; then
		tail -n 20 "$out/build.log" | sed 's/^/  | /'
		fail "dpkg-buildpackage failed, see $out/build.log"
	fi
	mv "$out/src/${deb_pkg}_"*.deb "$out/src/${pkg_name}_"*.dsc "$out/src/${pkg_name}_"*.tar.xz \
		"$out/src/${pkg_name}_"*.buildinfo "$out/src/${pkg_name}_"*.changes "$out/"
	[[ -f $deb ]] || fail "dpkg-buildpackage made no $deb"
	echo "  $deb"
	echo "  $out/${pkg_name}_$pkg_version.dsc (source package, 3.0 native)"
}

inspect() {
	local f v p s
	field() { dpkg-deb -f "$deb" "$1"; }

	v=$(field Package)
	[[ $v == "$deb_pkg" ]] || fail "Package is '$v', not $deb_pkg"
	v=$(field Version)
	[[ $v == "$pkg_version" ]] || fail "Version is '$v', not dkms.conf's PACKAGE_VERSION $pkg_version"
	v=$(field Architecture)
	[[ $v == all ]] || fail "Architecture is '$v', not all"
	v=$(field Depends)
	[[ $v =~ (^|,\ *)dkms(\ |,|$) ]] || fail "Depends is '$v': no dkms"
	echo "  Package $deb_pkg, Version $pkg_version, Architecture all, Depends $v"

	dpkg-deb -x "$deb" "$out/extract"
	dpkg-deb -e "$deb" "$out/control"

	# The sources, exactly: none missing, none extra, each as in the tree.
	if ! diff -u <(printf '%s\n' "${sources[@]}") \
		<(cd "$out/extract$src" && find . -type f -printf '%P\n' | sort) > "$out/files.diff"; then
		sed 's/^/  | /' "$out/files.diff"
		fail "files in $src differ from the sources ('-': missing, '+': extra)"
	fi
	for f in "${sources[@]}"; do
		cmp -s "$top/$f" "$out/extract$src/$f" || fail "$src/$f differs from $f"
	done
	echo "  $src: ${#sources[@]} files, as in the tree: ${sources[*]}"

	# And nothing else but documentation: no module binary, nothing in
	# /lib/modules or /etc (DKMS makes the binaries on the target).
	v=$(find "$out/extract" ! -type d -printf '/%P\n' |
		grep -v -e "^$src/" -e "^/usr/share/doc/$deb_pkg/" || true)
	[[ -z $v ]] || fail "unexpected files in the package: $v"
	for f in modules-load.d/$module.conf modprobe.d/$module.conf; do
		cmp -s "$top/packaging/$f" "$out/extract/usr/share/doc/$deb_pkg/examples/$f" ||
			fail "/usr/share/doc/$deb_pkg/examples/$f missing or not packaging/$f"
	done
	[[ -f $out/extract/usr/share/doc/$deb_pkg/copyright ]] || fail "no copyright file"
	echo "  /usr/share/doc/$deb_pkg: copyright, changelog, README, examples/{modules-load.d,modprobe.d}/$module.conf"

	# The maintainer scripts hand over to DKMS: the postinst to DKMS's own
	# common.postinst (dkms add, then build and install for the kernels it
	# picks), the prerm (remove, upgrade) to dkms remove --all.
	for s in postinst prerm; do
		p=$out/control/$s
		[[ -x $p ]] || fail "no executable $s"
		sh -n "$p" || fail "$s: not valid sh"
		grep -qx "DKMS_NAME=$pkg_name" "$p" || fail "$s: no DKMS_NAME=$pkg_name"
		grep -qx "DKMS_VERSION=$pkg_version" "$p" || fail "$s: no DKMS_VERSION=$pkg_version"
	done
	# shellcheck disable=SC2016 # the scripts' own text, $ and all
	if ! grep -qF 'for DKMS_POSTINST in /usr/lib/dkms/common.postinst' "$out/control/postinst" ||
		! grep -qF '$DKMS_POSTINST $DKMS_NAME $DKMS_VERSION' "$out/control/postinst"; then
		fail "postinst does not run /usr/lib/dkms/common.postinst"
	fi
	# shellcheck disable=SC2016
	grep -qF 'dkms remove -m $DKMS_NAME -v $DKMS_VERSION --all' "$out/control/prerm" ||
		fail "prerm does not run dkms remove --all"
	[[ ! -e $out/control/postrm && ! -e $out/control/conffiles ]] ||
		fail "unexpected postrm or conffiles in the package"
	echo "  postinst: /usr/lib/dkms/common.postinst $pkg_name $pkg_version; prerm: dkms remove -m $pkg_name -v $pkg_version --all"
}

# What DKMS does with the packaged sources, without installing the
# package: private source, DKMS and install trees.  As with the Makefile's
# dkms-check, dkms signs with the host's /var/lib/dkms/mok.key (making it
# if missing) and re-runs depmod for the kernel.
dkms_private() {
	local d=$out/dkms k='' c ko
	local -a dk=(dkms --dkmstree "$d/tree" --sourcetree "$d/src" --installtree "$d/install")
	for c in $(kernels_with_headers); do
		[[ -z $(exclusion "$c" "$arch") ]] && k=$c
	done
	[[ $k ]] || { echo "  no supported kernel has headers here: nothing to build"; return; }
	mkdir -p "$d/tree" "$d/src" "$d/install/$k"
	cp -a "$out/extract$src" "$d/src/"
	if ! { "${dk[@]}" add -m "$pkg_name" -v "$pkg_version" &&
		"${dk[@]}" build -m "$pkg_name" -v "$pkg_version" -k "$k" &&
		"${dk[@]}" install -m "$pkg_name" -v "$pkg_version" -k "$k"; } > "$d/log" 2>&1; then
		tail -n 20 "$d/log" | sed 's/^/  | /'
		fail "dkms add/build/install of the packaged sources for $k failed, see $d/log"
	fi
	ko=$(compgen -G "$d/install/$k/updates/dkms/$module.ko*") ||
		fail "no $module.ko* in $d/install/$k/updates/dkms"
	echo "  $k: $ko"
}

# The module must not be on this machine in any form before the test, or
# the install would replace someone's (the postinst runs dkms remove on
# the same version) and the purge would remove it.
install_preconditions() {
	local st v
	[[ $(id -u) -eq 0 ]] || skip "install: dpkg -i needs root"
	st=$(dpkg-query -W -f '${db:Status-Abbrev}' "$deb_pkg" 2>/dev/null || true)
	[[ -z ${st// /} || $st == un* ]] ||
		skip "install: $deb_pkg is on this machine already (dpkg status '${st% }', $(dpkg-query -W -f '${Version}' "$deb_pkg")): not touching a real install"
	[[ ! -e /var/lib/dkms/$pkg_name ]] ||
		skip "install: DKMS has $pkg_name already (/var/lib/dkms/$pkg_name): not touching a real install"
	v=$(compgen -G "/usr/src/$pkg_name-*") &&
		skip "install: $v exists: not touching a real install"
	v=$(find /lib/modules -name "$module.ko*" -print -quit)
	[[ -z $v ]] || skip "install: $v exists (make install?): not touching a real install"
	[[ ! -e /sys/module/$module ]] || skip "install: $module is loaded"
	[[ ! -e /etc/dkms/no-autoinstall ]] ||
		skip "install: /etc/dkms/no-autoinstall: the postinst would build nothing"
	return 0
}

install_pkg() {
	local k ko why st v n=0
	installed_by_us=1
	if ! dpkg -i "$deb" > "$out/install.log" 2>&1; then
		sed 's/^/  | /' "$out/install.log"
		fail "dpkg -i $deb failed, see $out/install.log"
	fi
	# The postinst's decisions (its build output goes to /dev/null, and
	# DKMS's readelf probe of 6.12 headers warns on stderr: not shown).
	grep -E 'Building for|belongs to a chroot|Skipped|skipped|Installing to|Error' \
		"$out/install.log" | sed 's/^/  | /' || true
	st=$(dpkg-query -W -f '${db:Status-Abbrev}' "$deb_pkg")
	[[ $st == "ii " ]] || fail "dpkg status of $deb_pkg is '$st' after dpkg -i"

	# "Building for A, B and C": the kernels it chose.
	v=$(sed -n 's/^Building for //p' "$out/install.log")
	[[ $v ]] || fail "the postinst named no kernel to build for"
	for k in ${v//,/ }; do
		[[ $k == and ]] || chosen+=("$k")
	done

	for k in /lib/modules/*; do
		k=${k##*/}
		ko=$(compgen -G "/lib/modules/$k/updates/dkms/$module.ko*" || true)
		if [[ " ${chosen[*]} " != *" $k "* ]]; then
			[[ -z $ko ]] || fail "$k: $ko, though the postinst did not choose $k"
			echo "  $k: not chosen by the postinst (running and newest kernel only, unless autoinstall_all_kernels)"
		elif [[ ! -e /lib/modules/$k/build/include ]]; then
			[[ -z $ko ]] || fail "$k: $ko without headers?"
			echo "  $k: no headers: the postinst skipped it"
		elif why=$(exclusion "$k" "$arch") && [[ $why ]]; then
			[[ -z $ko ]] || fail "$k: $ko, though DKMS should skip it: $why"
			echo "  $k: skipped by DKMS: $why"
		else
			v=$(dkms status -m "$pkg_name" -v "$pkg_version" -k "$k" 2> /dev/null)
			[[ $v == *": installed" ]] || fail "$k: dkms status says '$v'"
			[[ $ko && $ko != *$'\n'* ]] || fail "$k: no $module.ko* in /lib/modules/$k/updates/dkms"
			v=$(modinfo -F vermagic "$ko")
			[[ ${v%% *} == "$k" ]] || fail "$ko: vermagic '$v'"
			v=$(modinfo -F version "$ko")
			[[ $v == "$pkg_version" ]] || fail "$ko: version '$v'"
			# What modules-load.d and modprobe will load: depmod indexed it.
			v=$(modprobe --show-depends -S "$k" "$module" 2>&1 || true)
			[[ $v == "insmod $ko"* ]] || fail "$k: modprobe would load '$v', not $ko"
			# DKMS signs whenever it finds sign-file; Debian's headers have it.
			v=$(modinfo -F signer "$ko")
			[[ $v || ! -x /lib/modules/$k/build/scripts/sign-file ]] || fail "$ko: not signed"
			echo "  $k: installed $ko (modprobe finds it; signer: ${v:-unsigned})"
			n=$((n + 1))
		fi
	done
	[[ $n -gt 0 ]] || fail "the module was installed for no kernel"
	echo "  built and installed for $n kernel(s)"
}

purge() {
	local k v
	if ! dpkg --purge "$deb_pkg" > "$out/purge.log" 2>&1; then
		sed 's/^/  | /' "$out/purge.log"
		fail "dpkg --purge $deb_pkg failed, see $out/purge.log"
	fi
	installed_by_us=
	grep -E 'Deleting|completely' "$out/purge.log" | sed 's/^/  | /' || true
	v=$(dpkg-query -W -f '${db:Status-Abbrev}' "$deb_pkg" 2>/dev/null || true)
	[[ -z ${v// /} || $v == un* ]] || fail "dpkg status of $deb_pkg is '$v' after the purge"
	v=$(dkms status -m "$pkg_name" 2> /dev/null)
	[[ -z $v ]] || fail "dkms status after the purge: $v"
	[[ ! -e /var/lib/dkms/$pkg_name ]] || fail "/var/lib/dkms/$pkg_name left"
	[[ ! -e $src ]] || fail "$src left"
	v=$(find /lib/modules -name "$module.ko*")
	[[ -z $v ]] || fail "left: $v"
	for k in "${chosen[@]}"; do
		! modprobe --show-depends -S "$k" "$module" > /dev/null 2>&1 ||
			fail "$k: modprobe still finds $module (stale modules.dep)"
	done
	echo "  no package, no DKMS entry, no $src, no $module.ko*, not in any modules.dep"
}

timed build build
timed inspect inspect
[[ -z $build_only ]] || exit "$KSFT_PASS"
command -v dkms > /dev/null || skip "dkms is not installed"
[[ $(id -u) -eq 0 ]] || skip "dkms install and dpkg -i need root"
timed dkms dkms_private
install_preconditions
timed install install_pkg
timed purge purge
exit "$KSFT_PASS"
