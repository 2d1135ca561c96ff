#!/bin/bash
# shellcheck disable=SC2317 # the steps are functions run through timed()
# SPDX-License-Identifier: GPL-2.0
#
# Build the project's Debian packages, check what is in them and what
# lintian says of them, and build the packaged module with DKMS.  Installing,
# using and purging them is deb-install-check.sh's, which make check runs
# in clean roots (scripts/fresh-root-check.sh), not on this machine.
#
#   scripts/packaging/deb-check.sh [--build-only] OUTDIR
#
# The packages, from one source package (packaging/debian/):
#   tsc-freq-khz-dkms  the module's sources, built on the target by DKMS
#   libtsc1            the shared library (SONAME libtsc.so.1)
#   libtsc-dev         header, static library, .pc, section 3 and 7 pages
#   tsc-tools          the four tools, their pages and JSON schemas, and a
#                      disabled systemd timer for node_exporter
#
# Why not 'dkms mkdeb': DKMS 3.0 dropped mkdeb, mkdsc, mkbmdeb and mkrpm
# (bookworm's 3.0.10 has add, remove, build, install, uninstall, match,
# autoinstall, mktarball, ldtarball and status; /usr/share/doc/dkms/
# HOWTO.Debian still describes mkdeb).  What replaced it, and what Debian's
# own *-dkms packages are, is a source package built with debhelper's
# dh_dkms (packages debhelper and dh-dkms).  dh_dkms writes the same
# maintainer scripts mkdeb's template did.  Building needs no DKMS tree at
# all, and the dkms step uses private ones: /var/lib/dkms and /usr/src are
# untouched, but for the signing key dkms makes there on first use.
#
# Steps, each timed; everything they write is in OUTDIR:
#   build    dpkg-buildpackage in a scratch copy of the project's files:
#            the four .debs, and the source package (.dsc, .tar.xz)
#   lintian  --pedantic over the .changes (source and binaries): any error
#            or warning fails, the rest is shown; an override would go in
#            packaging/debian/*lintian-overrides with its reason (there is
#            none)
#   inspect  control fields, the files of each package, the DKMS sources
#            byte for byte, maintainer scripts, the library's SONAME and
#            exports against libtsc1.symbols, the tools linked with it,
#            the systemd units (systemd-analyze verify)
#   dkms     the packaged sources through dkms add, build, install with
#            private trees, as the Makefile's dkms-check does, for the
#            newest kernel
# --build-only stops after inspect (no root needed): 'make deb'.
#
# Exit: 0 pass, 1 fail, 4 skip.  Skip when the build tools are missing, or,
# before DKMS, when this is not root (dkms signs with its key in
# /var/lib/dkms).
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

src=/usr/src/$pkg_name-$pkg_version
arch=$(uname -m)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2> /dev/null || echo x86_64-linux-gnu)
mapfile -t sources < <(module_sources)

cleanup() {
	local rc=$?
	trap - ERR
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

echo "deb-check: ${deb_packages[*]} $pkg_version from $top, into $out"

missing=
for p in dpkg-dev debhelper dh-dkms lintian build-essential; do
	installed "$p" || missing+=" $p"
done
[[ -z $missing ]] || skip "missing:$missing (apt-get install$missing)"

# One version everywhere: the package's (debian/changelog) is what dpkg
# and apt compare, dkms.conf's names /usr/src/NAME-VERSION and DKMS's tree,
# MODULE_VERSION is what modinfo and /sys/module/*/version show; the
# library's is in its file name and its .pc.
changelog_version=$(dpkg-parsechangelog -l "$top/packaging/debian/changelog" -S Version)
[[ $changelog_version == "$pkg_version" ]] ||
	fail "packaging/debian/changelog is at $changelog_version, dkms.conf at $pkg_version: add a changelog entry"
module_version=$(sed -n 's/^MODULE_VERSION("\(.*\)");/\1/p' "$top/module/main.c")
[[ $module_version == "$pkg_version" ]] ||
	fail "module/main.c has MODULE_VERSION(\"$module_version\"), dkms.conf $pkg_version"
lib_version=$(sed -n 's/^VERSION := //p' "$top/userspace/Makefile")
[[ $lib_version == "$pkg_version" ]] ||
	fail "userspace/Makefile has VERSION $lib_version, dkms.conf $pkg_version"

# The project's files as they are in the work tree: tracked ones and new
# ones not ignored (so that what is about to be committed is what is
# tested), none of build/.
project_files() {
	if git -C "$top" rev-parse --git-dir > /dev/null 2>&1; then
		git -C "$top" ls-files --cached --others --exclude-standard |
			while IFS= read -r f; do [[ -e $top/$f ]] && printf '%s\n' "$f"; done
	else
		(cd "$top" && find . -path ./build -prune -o ! -type d -printf '%P\n')
	fi
}

build() {
	local s=$out/src/$pkg_name-$pkg_version
	# Only what this script makes, in case OUTDIR holds other things.
	rm -rf "$out/src" "$out/extract" "$out/control"
	rm -f "$out/"*.deb "$out/${pkg_name}_"*.dsc "$out/${pkg_name}_"*.tar.xz \
		"$out/${pkg_name}_"*.buildinfo "$out/${pkg_name}_"*.changes
	# A scratch tree: the project and nothing a local build left in it
	# (module/*.o, build/), plus debian/ at its top, where dpkg wants it.
	mkdir -p "$s"
	project_files | (cd "$top" && xargs -d '\n' cp --parents -t "$s")
	cp -r "$top/packaging/debian" "$s/"
	if ! (cd "$s" && dpkg-buildpackage -us -uc) > "$out/build.log" 2>&1; then
		tail -n 20 "$out/build.log" | sed 's/^/  | /'
		fail "dpkg-buildpackage failed, see $out/build.log"
	fi
	mv "$out/src/"*.deb "$out/src/${pkg_name}_"*.dsc "$out/src/${pkg_name}_"*.tar.xz \
		"$out/src/${pkg_name}_"*.buildinfo "$out/src/${pkg_name}_"*.changes "$out/"
	for p in "${deb_packages[@]}"; do
		[[ -f $(deb_file "$p") ]] || fail "dpkg-buildpackage made no $(deb_file "$p")"
		echo "  $(deb_file "$p")"
	done
	echo "  $out/${pkg_name}_$pkg_version.dsc (source package, 3.0 native)"
}

# Errors and warnings fail; what lintian merely notes (info, pedantic,
# experimental) is shown.  Overrides: packaging/debian/*lintian-overrides.
run_lintian() {
	local changes
	changes=$out/${pkg_name}_${pkg_version}_$(dpkg --print-architecture).changes
	if ! lintian --fail-on error,warning --display-info --display-experimental \
		--pedantic --show-overrides "$changes" > "$out/lintian.log" 2>&1; then
		sed 's/^/  | /' "$out/lintian.log"
		fail "lintian found errors or warnings, see $out/lintian.log"
	fi
	if [[ -s $out/lintian.log ]]; then
		sed 's/^/  | /' "$out/lintian.log"
	fi
	echo "  no errors, no warnings; $(grep -c '^[IPXC]: ' "$out/lintian.log" || true) notes," \
		"$(grep -c '^O: ' "$out/lintian.log" || true) overridden"
}

field() { dpkg-deb -f "$(deb_file "$1")" "$2"; }

# extract PACKAGE: its files in $out/extract/PACKAGE, its control area in
# $out/control/PACKAGE; prints its files (not directories), sorted.
extract() {
	mkdir -p "$out/extract" "$out/control"
	dpkg-deb -x "$(deb_file "$1")" "$out/extract/$1"
	dpkg-deb -e "$(deb_file "$1")" "$out/control/$1"
	(cd "$out/extract/$1" && find . ! -type d -printf '/%P\n' | sort)
}

# expect_files PACKAGE WANT: the package holds exactly these files.
expect_files() {
	if ! diff -u <(printf '%s\n' "$2" | sort) <(extract "$1") > "$out/$1.files.diff"; then
		sed 's/^/  | /' "$out/$1.files.diff"
		fail "$1: files differ from what it should hold ('-': missing, '+': extra)"
	fi
}

inspect_dkms() {
	local v p s d=$pkg_name-dkms x
	v=$(field "$d" Package)
	[[ $v == "$d" ]] || fail "Package is '$v', not $d"
	v=$(field "$d" Version)
	[[ $v == "$pkg_version" ]] || fail "Version is '$v', not dkms.conf's PACKAGE_VERSION $pkg_version"
	v=$(field "$d" Architecture)
	[[ $v == all ]] || fail "Architecture is '$v', not all"
	v=$(field "$d" Depends)
	[[ $v =~ (^|,\ *)dkms(\ |,|$) ]] || fail "Depends is '$v': no dkms"
	echo "  $d: Version $pkg_version, Architecture all, Depends $v"

	# The sources, exactly: none missing, none extra, each as in the tree;
	# and nothing else but documentation: no module binary, nothing in
	# /lib/modules or /etc (DKMS makes the binaries on the target).
	expect_files "$d" "$(printf "$src/%s\n" "${sources[@]}"
		printf "/usr/share/doc/$d/%s\n" copyright changelog.gz README.md.gz \
			"examples/modules-load.d/$module.conf" "examples/modprobe.d/$module.conf")"
	x=$out/extract/$d
	for f in "${sources[@]}"; do
		cmp -s "$top/$f" "$x$src/$f" || fail "$src/$f differs from $f"
	done
	echo "  $src: ${#sources[@]} files, as in the tree: ${sources[*]}"
	for f in modules-load.d/$module.conf modprobe.d/$module.conf; do
		cmp -s "$top/packaging/$f" "$x/usr/share/doc/$d/examples/$f" ||
			fail "/usr/share/doc/$d/examples/$f is not packaging/$f"
	done
	echo "  /usr/share/doc/$d: copyright, changelog, README, examples/{modules-load.d,modprobe.d}/$module.conf"

	# The maintainer scripts hand over to DKMS: the postinst to DKMS's own
	# common.postinst (dkms add, then build and install for the kernels it
	# picks), the prerm (remove, upgrade) to dkms remove --all.
	for s in postinst prerm; do
		p=$out/control/$d/$s
		[[ -x $p ]] || fail "no executable $s"
		sh -n "$p" || fail "$s: not valid sh"
		grep -qx "DKMS_NAME=$pkg_name" "$p" || fail "$s: no DKMS_NAME=$pkg_name"
		grep -qx "DKMS_VERSION=$pkg_version" "$p" || fail "$s: no DKMS_VERSION=$pkg_version"
	done
	# shellcheck disable=SC2016 # the scripts' own text, $ and all
	if ! grep -qF 'for DKMS_POSTINST in /usr/lib/dkms/common.postinst' "$out/control/$d/postinst" ||
		! grep -qF '$DKMS_POSTINST $DKMS_NAME $DKMS_VERSION' "$out/control/$d/postinst"; then
		fail "postinst does not run /usr/lib/dkms/common.postinst"
	fi
	# shellcheck disable=SC2016
	grep -qF 'dkms remove -m $DKMS_NAME -v $DKMS_VERSION --all' "$out/control/$d/prerm" ||
		fail "prerm does not run dkms remove --all"
	[[ ! -e $out/control/$d/postrm && ! -e $out/control/$d/conffiles ]] ||
		fail "unexpected postrm or conffiles in $d"
	echo "  postinst: /usr/lib/dkms/common.postinst $pkg_name $pkg_version; prerm: dkms remove -m $pkg_name -v $pkg_version --all"
}

# The API, as the linker script exports it: libtsc.map's global names.
api_symbols() {
	sed -n '/global:/,/local:/{s/^[[:space:]]*\([a-z_0-9]*\);$/\1/p}' "$top/userspace/libtsc.map" | sort
}

inspect_lib() {
	local l=/usr/lib/$triplet so v x=$out/extract/libtsc1
	expect_files libtsc1 "$l/libtsc.so.1
$l/libtsc.so.$lib_version
/usr/share/doc/libtsc1/changelog.gz
/usr/share/doc/libtsc1/copyright"
	so=$x$l/libtsc.so.$lib_version
	v=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	[[ $v == libtsc.so.1 ]] || fail "libtsc1: SONAME '$v', not libtsc.so.1"
	[[ $(readlink "$x$l/libtsc.so.1") == "libtsc.so.$lib_version" ]] ||
		fail "libtsc1: libtsc.so.1 does not point to libtsc.so.$lib_version"
	# Exactly the API is exported, each under its version node, and the
	# symbols file says so (dpkg-gensymbols -c4 made sure of the latter).
	v=$(readelf --dyn-syms -W "$so" | awk '$5 == "GLOBAL" && $7 != "UND" { print $8 }' |
		sed -E 's/@@LIBTSC_[0-9.]+$//' | grep -Ev '^LIBTSC_[0-9.]+$' | sort)
	[[ $v == "$(api_symbols)" ]] || fail "libtsc1 exports '${v//$'\n'/ }', libtsc.map '$(api_symbols | tr '\n' ' ')'"
	grep -q '^libtsc.so.1 libtsc1 #MINVER#' "$out/control/libtsc1/symbols" ||
		fail "libtsc1: no symbols file for libtsc.so.1"
	[[ $(grep -Ec '@LIBTSC_[0-9.]+ ' "$out/control/libtsc1/symbols") -eq \
	   $(($(api_symbols | wc -l) + $(grep -c '^LIBTSC_' "$top/userspace/libtsc.map"))) ]] ||
		fail "libtsc1: the symbols file does not list every API symbol and version node"
	[[ -e $out/control/libtsc1/triggers ]] || fail "libtsc1: no ldconfig trigger"
	v=$(field libtsc1 Depends)
	[[ $v == *libc6* ]] || fail "libtsc1: Depends '$v' lacks libc6"
	echo "  libtsc1: SONAME libtsc.so.1, exports the $(api_symbols | wc -l) functions of libtsc.map, symbols file, Depends $v"

	expect_files libtsc-dev "/usr/include/libtsc.h
/usr/include/tsc.h
$l/libtsc.a
$l/libtsc.so
$l/pkgconfig/libtsc.pc
$(cd "$top/userspace/man" && printf '/usr/share/man/man3/%s.gz\n' *.3 && printf '/usr/share/man/man7/%s.gz\n' *.7)
/usr/share/doc/libtsc-dev/changelog.gz
/usr/share/doc/libtsc-dev/copyright"
	x=$out/extract/libtsc-dev
	for h in libtsc.h tsc.h; do
		cmp -s "$top/userspace/include/$h" "$x/usr/include/$h" || fail "libtsc-dev: $h is not the tree's"
	done
	[[ $(readlink "$x$l/libtsc.so") == libtsc.so.1 ]] || fail "libtsc-dev: libtsc.so does not point to libtsc.so.1"
	grep -qx "libdir=$l" "$x$l/pkgconfig/libtsc.pc" || fail "libtsc-dev: libtsc.pc's libdir is not $l"
	grep -qx "Version: $lib_version" "$x$l/pkgconfig/libtsc.pc" || fail "libtsc-dev: libtsc.pc's Version"
	v=$(field libtsc-dev Depends)
	[[ $v == *"libtsc1 (= $pkg_version)"* ]] || fail "libtsc-dev: Depends '$v' lacks libtsc1 (= $pkg_version)"
	echo "  libtsc-dev: libtsc.h (and tsc.h), libtsc.a, libtsc.so, libtsc.pc (libdir $l), $(find "$top/userspace/man" -name '*.[37]' | wc -l) manual pages; Depends $v"
}

inspect_tools() {
	local t v u x=$out/extract/tsc-tools tools=(tsc-coreclock tsc-interference tsc-jitter tsc-report)
	expect_files tsc-tools "$(printf '/usr/bin/%s\n' "${tools[@]}")
$(printf '/usr/share/man/man1/%s.1.gz\n' "${tools[@]}")
$(printf '/usr/share/tsc/%s.schema.json\n' "${tools[@]}")
/usr/share/tsc/prometheus/tsc-alerts.yml
/usr/share/tsc/prometheus/tsc-dashboard.json
/lib/systemd/system/tsc-report-prometheus.service
/lib/systemd/system/tsc-report-prometheus.timer
/usr/share/doc/tsc-tools/changelog.gz
/usr/share/doc/tsc-tools/copyright"
	for t in "${tools[@]}"; do
		readelf -d "$x/usr/bin/$t" | grep -q 'NEEDED.*\[libtsc.so.1\]' ||
			fail "tsc-tools: $t is not linked with libtsc.so.1"
		cmp -s "$top/userspace/tools/$t.schema.json" "$x/usr/share/tsc/$t.schema.json" ||
			fail "tsc-tools: $t.schema.json is not the tree's"
	done
	for t in tsc-alerts.yml tsc-dashboard.json; do
		cmp -s "$top/userspace/prometheus/$t" "$x/usr/share/tsc/prometheus/$t" ||
			fail "tsc-tools: $t is not the tree's"
	done
	# The symbols file's minimum: the version that brought the newest
	# symbol the tools use, not necessarily this one.
	v=$(field tsc-tools Depends)
	if ! [[ $v =~ libtsc1\ \(\>=\ ([0-9.]+)\) ]] ||
		! dpkg --compare-versions "${BASH_REMATCH[1]}" le "$pkg_version"; then
		fail "tsc-tools: Depends '$v' lacks libtsc1 (>= a version up to $pkg_version)"
	fi
	echo "  tsc-tools: ${tools[*]}, each linked with libtsc.so.1, with its page and schema; Depends $v"

	# The units as systemd reads them (any complaint fails), the
	# service's command pointed at the tool as extracted; and the package
	# must not enable or start them.
	command -v systemd-analyze > /dev/null || fail "no systemd-analyze to check the units"
	u=$x/lib/systemd/system
	grep -qx 'ExecStart=/usr/bin/tsc-report --prometheus --output /var/lib/prometheus/node-exporter/tsc.prom' \
		"$u/tsc-report-prometheus.service" || fail "tsc-report-prometheus.service: ExecStart"
	mkdir -p "$out/units"
	sed "s|^ExecStart=/usr/bin/|ExecStart=$x/usr/bin/|" "$u/tsc-report-prometheus.service" \
		> "$out/units/tsc-report-prometheus.service"
	cp "$u/tsc-report-prometheus.timer" "$out/units/"
	v=$(cd "$out/units" && SYSTEMD_LOG_COLOR=0 LD_LIBRARY_PATH=$out/extract/libtsc1/usr/lib/$triplet \
		systemd-analyze verify --man=no tsc-report-prometheus.timer tsc-report-prometheus.service 2>&1) ||
		fail "systemd-analyze verify: $v"
	[[ -z $v ]] || fail "systemd-analyze verify: $v"
	# dh_installsystemd --no-enable --no-start --restart-after-upgrade:
	# nothing started; on upgrade nothing stopped before (no preinst
	# stop), and after, try-restart only (what was active runs again);
	# tsc-tools.prerm stops both units on remove; the timer enabled again
	# on upgrade only if the administrator had enabled it (was-enabled).
	# deb-install-check.sh sees it disabled after install.
	! grep -qs 'deb-systemd-invoke' "$out/control/tsc-tools/"{preinst,postrm} ||
		fail "tsc-tools: the preinst or postrm starts or stops a unit"
	v=$(grep 'deb-systemd-invoke' "$out/control/tsc-tools/postinst" || true)
	[[ $v =~ ^[[:space:]]*deb-systemd-invoke\ try-restart\  && $v != *$'\n'* ]] ||
		fail "tsc-tools: the postinst does not just try-restart the units: '$v'"
	# shellcheck disable=SC2016 # the script's own text, $ and all
	if ! grep -qF '"$1" = remove ]' "$out/control/tsc-tools/prerm" ||
		! grep -qF 'deb-systemd-invoke stop tsc-report-prometheus.timer' "$out/control/tsc-tools/prerm"; then
		fail "tsc-tools: the prerm does not stop the timer on remove"
	fi
	if [[ $(grep -c 'deb-systemd-helper enable' "$out/control/tsc-tools/postinst") -ne 1 ]] ||
		! grep -B2 'deb-systemd-helper enable' "$out/control/tsc-tools/postinst" | grep -q 'was-enabled'; then
		fail "tsc-tools: the postinst enables the timer other than where it was enabled before"
	fi
	echo "  units: systemd-analyze verify clean; not started, enabled only again where it was (was-enabled)," \
		"try-restarted after an upgrade, stopped on remove"
}

inspect() {
	rm -rf "$out/extract" "$out/control"
	inspect_dkms
	inspect_lib
	inspect_tools
}

# What DKMS does with the packaged sources, without installing the
# package: private source, DKMS and install trees.  As with the Makefile's
# dkms-check, dkms signs with the host's /var/lib/dkms/mok.key (making it
# if missing) and re-runs depmod for the kernel.
dkms_private() {
	local d=$out/dkms k='' c ko
	local -a dk=(dkms --dkmstree "$d/tree" --sourcetree "$d/src" --installtree "$d/install")
	rm -rf "$d"
	for c in $(kernels_with_headers); do
		[[ -z $(exclusion "$c" "$arch") ]] && k=$c
	done
	[[ $k ]] || { echo "  no supported kernel has headers here: nothing to build"; return; }
	mkdir -p "$d/tree" "$d/src" "$d/install/$k"
	cp -a "$out/extract/$pkg_name-dkms$src" "$d/src/"
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

timed build build
timed lintian run_lintian
timed inspect inspect
[[ -z $build_only ]] || exit "$KSFT_PASS"
command -v dkms > /dev/null || skip "dkms is not installed"
[[ $(id -u) -eq 0 ]] || skip "dkms signs with its key in /var/lib/dkms: root only"
timed dkms dkms_private
exit "$KSFT_PASS"
