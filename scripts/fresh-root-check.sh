#!/bin/bash
# shellcheck disable=SC2317 # the steps are functions run through timed()
# SPDX-License-Identifier: GPL-2.0
#
# The README's set-up, proven where nothing is installed: a clean Debian
# bookworm root (mmdebstrap, minbase, plus git and make, which the README
# asks for) in which a clean clone of HEAD runs 'make run' to its verdict,
# twice (the second run installs nothing), then 'make deb'; the packages
# that made installed there with apt, used (also with the DKMS-built
# module loaded, in a guest booted from that root), purged, and nothing
# of them left.
#
#   scripts/fresh-root-check.sh WORKDIR
#   scripts/fresh-root-check.sh --make TARGET WORKDIR
#   scripts/fresh-root-check.sh --trixie DEBDIR WORKDIR
#
# The bookworm root installs the packages its own 'make deb' made, as a
# new user would; the trixie root those in DEBDIR (deb-check.sh made
# them).  WORKDIR gets the root and the logs.  --make: only 'make TARGET'
# from nothing, timed, and nothing after it: 'make check' there is the
# first run of make check on a fresh machine (40 minutes and more, so not
# part of make check).
# --trixie: the packages alone, in a trixie root (trixie-backports in
# its sources) to which its newest kernel's headers were added, as a
# fleet on trixie-backports' kernel has them: DKMS must build for that
# kernel.  The host's packages are not touched: everything is installed
# inside the root, which runs in its own mount namespace.
#
# Cache, outside the clone (FRESH_ROOT_CACHE, default
# /var/cache/tsc-freq-khz/fresh-root): the minbase tarball, keyed by what
# makes it (suite, variant, packages, the host's Debian sources and apt
# Acquire settings), and apt's downloaded .debs, so that later runs skip
# the downloads but still install everything.
#
# Steps, each timed:
#   root      the tarball (made, or taken from the cache) unpacked
#   clone     git clone of this repository's HEAD into /root/tsc_freq_khz
#   run       make run, from nothing: must print the verdict
#   rerun     make run again: must install nothing
#   deb       make deb, as a new user would next: it installs what it
#             needs itself (make run needed none of it), then builds and
#             checks the four packages
#   kernel    (--trixie) apt-get install -t trixie-backports
#             linux-image-amd64 linux-headers-amd64 (INITRD=No), and
#             build-essential (the library's check compiles a program)
#   packages  deb-install-check.sh inside the root: apt install ./*.deb,
#             use, a guest with the module loaded by modprobe running
#             tsc-report --json (not --trixie: the root has no image),
#             purge; then the outputs checked here (--trixie: DKMS built
#             the module for the backports' kernel)
#   left      every path of the root as before the packages, but for the
#             package manager's own records and logs and DKMS's key pair
#
# Exit: 0 pass, 1 fail, 4 skip (not root, or no mmdebstrap).
set -Eeuo pipefail

# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/packaging/common.sh"

usage() {
	echo "usage: $0 WORKDIR | --make TARGET WORKDIR | --trixie DEBDIR WORKDIR" >&2
	exit 2
}
target='' suite=bookworm debdir=''
if [[ ${1:-} == --trixie ]]; then
	suite=trixie
	[[ $# -eq 3 && -n $2 && -n $3 ]] || usage
	debdir=$(cd "$2" && pwd)
	shift 2
elif [[ ${1:-} == --make ]]; then
	[[ -n ${2:-} ]] || usage
	target=$2
	shift 2
fi
[[ $# -eq 1 && -n $1 ]] || usage
mkdir -p "$1"
work=$(cd "$1" && pwd)/fresh-root$([[ $suite == bookworm ]] || echo "-$suite")
mkdir -p "$work"
cache=${FRESH_ROOT_CACHE:-/var/cache/tsc-freq-khz/fresh-root}
variant=minbase
# What a fresh machine has before the README's first command: git to
# clone, make to type it (and ca-certificates, which 'apt-get install git'
# brings along as recommended, for https clones).
include=git,make,ca-certificates
root=$work/root
clone=/root/tsc_freq_khz
modules=
[[ ! -e /proc/modules ]] || modules=1

cleanup() {
	local rc=$?
	trap - ERR
	print_times
	case $rc in
	0) echo "fresh-root-check ($suite): PASS"; rm -rf "$root" ;;
	4) echo "fresh-root-check ($suite): SKIP" ;;
	130) echo "fresh-root-check ($suite): interrupted" ;;
	*) echo "fresh-root-check: FAIL (the root is kept in $root)" ;;
	esac
	exit "$rc"
}
trap cleanup EXIT

[[ $(id -u) -eq 0 ]] || skip "a chroot needs root"
if [[ -n $debdir ]]; then
	out=$debdir
	for p in "${deb_packages[@]}"; do
		[[ -f $(deb_file "$p") ]] || fail "no $(deb_file "$p"): make deb first"
	done
fi
command -v mmdebstrap > /dev/null || skip "no mmdebstrap (apt-get install mmdebstrap)"
git -C "$top" rev-parse --verify -q HEAD > /dev/null || skip "$top is not a git repository: nothing to clone"
head=$(git -C "$top" rev-parse HEAD)
[[ -z $(git -C "$top" status --porcelain --untracked-files=no) ]] ||
	echo "note: $top has uncommitted changes; the fresh root tests HEAD, $head, without them"

# Debian's archive as apt is configured here: each source apt has whose
# origin is Debian and whose codename is bookworm's (bookworm, -updates,
# -security), from apt-cache policy (whatever file or mirror defines it;
# not third parties, whose keys the root would lack), and the Acquire
# settings that reach it.  For trixie, the same with trixie's names, and
# trixie-backports from the main archive.
sources=$work/sources.list
apt-cache policy | awk -v s=bookworm '
	/^ *[0-9]+ / && $NF == "Packages" { uri = $2; split($3, a, "/"); dist = a[1]; comp = a[2]; next }
	/^ *release / {
		if (uri != "" && /o=Debian,/ && dist ~ ("^" s "(-|$)") && !seen[uri, dist, comp]++)
			list[uri " " dist] = list[uri " " dist] " " comp
		uri = ""
	}
	END { for (k in list) print "deb " k list[k] }' | LC_ALL=C sort > "$sources"
[[ -s $sources ]] || fail "apt knows no Debian bookworm source here (apt-cache policy): apt-get update?"
if [[ $suite == trixie ]]; then
	sed -E 's/^(deb [^ ]+ )bookworm/\1trixie/' "$sources" > "$sources.tmp"
	awk '{ print } $3 == "trixie" { $3 = "trixie-backports"; print }' "$sources.tmp" > "$sources"
	rm "$sources.tmp"
fi
mapfile -t aptopts < <(grep -l '^Acquire::' /etc/apt/apt.conf.d/* 2> /dev/null || true)
key=$( { echo "$suite $variant $include"; cat "$sources" "${aptopts[@]}"; } | sha256sum | cut -c1-16)
tarball=$cache/$suite-$variant-$key.tar
# apt's downloads, one directory per suite: apt locks it, and the two
# roots may run side by side (make check).
archives=$cache/archives-$suite

echo "fresh-root-check: HEAD $head in a $suite $variant root (+$include), from: $(cut -d' ' -f2-3 "$sources" | paste -sd, -)"

make_root() {
	local -a opts=()
	mkdir -p "$archives/partial"
	if [[ -f $tarball ]]; then
		echo "  cached: $tarball ($(du -h "$tarball" | cut -f1))"
	else
		for f in "${aptopts[@]}"; do opts+=(--aptopt="$f"); done
		echo "  making $tarball"
		if ! mmdebstrap --quiet --mode=root --format=tar --variant="$variant" --include="$include" \
			"${opts[@]}" "$suite" "$tarball.tmp" "$sources" > "$work/mmdebstrap.log" 2>&1; then
			tail -n 20 "$work/mmdebstrap.log" | sed 's/^/  | /'
			rm -f "$tarball.tmp"
			fail "mmdebstrap failed, see $work/mmdebstrap.log"
		fi
		mv "$tarball.tmp" "$tarball"
		# Older tarballs of this kind: replaced.
		find "$cache" -maxdepth 1 -name "$suite-$variant-*.tar" ! -name "${tarball##*/}" -delete
	fi
	rm -rf "$root" && mkdir -p "$root"
	tar -C "$root" -xf "$tarball"
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	echo "  $root: $(du -sh "$root" | cut -f1)"
}

clone() {
	git clone -q --no-hardlinks "$top" "$root$clone"
	git -C "$root$clone" checkout -q "$head"
	echo "  $clone at $(git -C "$root$clone" log --oneline -1)"
}

# in_root COMMAND: COMMAND (a string for sh -c) in the root, as root, with
# what a machine has (/proc, /sys, /dev) and apt's download cache, in a
# mount namespace of its own: the mounts end with it, whatever happens.
in_root() {
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare --mount --propagation private -- sh -ec '
		root=$1 archives=$2
		# The root a mount point of its own, as / is on a machine: a
		# nested check (make check run in here) needs to make it private.
		mount --bind "$root" "$root"
		mount -t proc proc "$root/proc"
		mount --rbind /sys "$root/sys"
		mount --rbind /dev "$root/dev"
		mount -t tmpfs tmpfs "$root/tmp"
		mount --bind "$archives" "$root/var/cache/apt/archives"
		shift 2
		exec chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			/bin/sh -c "$1" </dev/null' sh "$root" "$archives" "$1"
}

# On a machine whose kernel loads modules, make run would load the module
# into this kernel, the host's: the root is not a machine of its own, so
# there it is told to boot a guest, as it does here anyway.
run_make_run() {
	local log=$work/$1.log
	if ! in_root "cd $clone && make run${modules:+ RUN_IN_GUEST=1}" > "$log" 2>&1; then
		tail -n 30 "$log" | sed 's/^/  | /'
		fail "make run failed in the fresh root, see $log"
	fi
	grep -q '^Verdict: TSC trustworthy across CPUs: ' "$log" ||
		fail "make run ended without a verdict, see $log"
	grep -E '^(TSC frequency|Frequency|Verdict)' "$log" | sed 's/^/  | /'
}

run() {
	run_make_run run
	grep -q '^installing:' "$work/run.log" || fail "the first make run installed nothing?"
}

rerun() {
	run_make_run rerun
	! grep -q '^installing:' "$work/rerun.log" ||
		fail "the second make run installed again: $(grep '^installing:' "$work/rerun.log")"
	echo "  installed nothing"
}

deb() {
	local log=$work/deb.log out=$root$clone/build/deb
	if ! in_root "cd $clone && make deb" > "$log" 2>&1; then
		tail -n 30 "$log" | sed 's/^/  | /'
		fail "make deb failed in the fresh root, see $log"
	fi
	grep '^installing:' "$log" | sed 's/^/  | /'
	grep -q '^installing:' "$log" || fail "make deb installed nothing: did make run install its packages?"
	for p in "${deb_packages[@]}"; do
		[[ -f $(deb_file "$p") ]] || fail "make deb made no ${p}: see $log"
	done
	grep '^deb-check: PASS' "$log" | sed 's/^/  | /'
}

# Every path in the root but those that the package manager, the kernel
# or this check own, with its type (and /etc's files with their content).
# man-db's caches too (/var/cache/man, once make deb has brought man-db):
# its trigger rebuilds them whenever a package with man pages comes or goes.
snapshot() {
	(cd "$root" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./tmp \
		-o -path ./run -o -path ".$clone" -o -path ./root/debs -o -path ./var/cache/apt \
		-o -path ./var/lib/apt -o -path ./var/lib/dpkg -o -path ./var/log \
		-o -path ./var/cache/debconf -o -path ./var/cache/man -o -path ./etc/ld.so.cache \) -prune -o -printf '%y %p\n' |
		LC_ALL=C sort
	 cd "$root" && find ./etc -xdev -type f ! -path ./etc/ld.so.cache -exec sha256sum {} + | LC_ALL=C sort -k2)
}

packages() {
	local guest
	rm -rf "$root/root/debs" && mkdir -p "$root/root/debs"
	cp "$root$clone"/build/deb/*.deb "$root/root/debs/"
	snapshot > "$work/before"
	# With the packages in place: the DKMS-built module, loaded by
	# modprobe in a guest booted from this root, and tsc-report reading it.
	mkdir -p "$root$clone/build/fresh"
	cat > "$root$clone/build/fresh/guest.sh" <<-EOF
	modprobe $module || exit 2
	tsc-report --json > build/fresh/module-report.json
	st=\$?
	[ \$st -le 1 ] || exit \$st
	EOF
	guest="scripts/vm/run-in-vm.sh --quiet --smp 2 --log build/fresh/guest.log -- sh build/fresh/guest.sh"
	if ! in_root "cd $clone && scripts/packaging/deb-install-check.sh --chroot --then '$guest' /root/debs build/fresh" \
		> "$work/packages.log" 2>&1; then
		sed 's/^/  | /' "$work/packages.log"
		fail "the packages' install, use or purge failed in the fresh root"
	fi
	sed 's/^/  | /' "$work/packages.log"
	check_results "$root$clone/build/fresh"
	check_module_report "$root$clone/build/fresh/module-report.json" \
		"$root$clone/build/fresh/tsc-report.schema.json"
}

# The report from the guest: valid, and the offsets are the module's.
check_module_report() {
	local v
	python3 -c 'import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))' "$1" "$2" ||
		fail "tsc-report's JSON with the module loaded does not validate"
	v=$(python3 -c 'import json, sys; j = json.load(open(sys.argv[1]))
print(j["offsets"]["source"], j["frequency"]["source"], j["kernel"]["unstable"])' "$1")
	[[ $v == module\ * ]] || fail "with the module loaded, tsc-report's offsets are not the module's: $v"
	echo "  in a guest booted from the root: modprobe $module, tsc-report --json valid" \
		"(offsets, frequency, unstable: $v)"
}

# One exception, DKMS's signing key pair: DKMS makes it at its first build
# and keeps it when purged, by design (it may be enrolled as a Machine
# Owner Key, and other modules share it); Documentation/fleet.md says so.
left() {
	if ! diff -u "$work/before" <(snapshot |
		grep -vx -e 'd ./var/lib/dkms' -e 'f ./var/lib/dkms/mok.key' -e 'f ./var/lib/dkms/mok.pub') \
		> "$work/left.diff"; then
		sed 's/^/  | /' "$work/left.diff"
		fail "the root differs from before the packages ('-': gone, '+': left)"
	fi
	echo "  $(wc -l < "$work/before") paths and /etc's contents as before the packages" \
		"(and DKMS's key pair: $(find "$root/var/lib/dkms" -mindepth 1 -printf '%f ' 2> /dev/null))"
}

# make TARGET from nothing: the log says how long each part took.
make_target() {
	local log=$work/make-$target.log st=0
	in_root "cd $clone && make $target${modules:+ RUN_IN_GUEST=1}" > "$log" 2>&1 || st=$?
	tail -n 5 "$log" | sed 's/^/  | /'
	[[ $st -eq 0 ]] || fail "make $target failed in the fresh root (exit $st), see $log"
}

# A fleet's machine on trixie with the backports' kernel, image and
# headers (no initramfs: nothing boots it here), and a compiler for
# programs.
kernel() {
	in_root "export DEBIAN_FRONTEND=noninteractive INITRD=No; apt-get update -qq &&
		apt-get install -y -qq --no-install-recommends -t trixie-backports \
			linux-image-amd64 linux-headers-amd64 build-essential" > "$work/kernel.log" 2>&1 ||
		{ tail -n 20 "$work/kernel.log" | sed 's/^/  | /'; fail "the backports' kernel headers did not install"; }
	backports_kernel=$(find "$root/usr/lib/modules" -mindepth 1 -maxdepth 1 -name '*-amd64' -printf '%f\n' |
		sort -V | tail -n1)
	echo "  trixie-backports' kernel: $backports_kernel"
}

# --trixie: install, use, purge; DKMS built for the backports' kernel.
trixie_packages() {
	rm -rf "$root/root/debs" && mkdir -p "$root/root/debs" "$root$clone/build/fresh"
	cp "$debdir"/*.deb "$root/root/debs/"
	snapshot > "$work/before"
	if ! in_root "cd $clone && scripts/packaging/deb-install-check.sh --chroot /root/debs build/fresh" \
		> "$work/packages.log" 2>&1; then
		sed 's/^/  | /' "$work/packages.log"
		fail "the packages' install, use or purge failed in the trixie root"
	fi
	sed 's/^/  | /' "$work/packages.log"
	grep -q "^  $backports_kernel: installed .*/updates/dkms/" "$work/packages.log" ||
		fail "DKMS did not build the module for $backports_kernel"
	check_results "$root$clone/build/fresh"
}

timed root make_root
timed clone clone
if [[ $suite == trixie ]]; then
	timed kernel kernel
	timed packages trixie_packages
	timed left left
	exit "$KSFT_PASS"
fi
if [[ $target ]]; then
	timed "make $target" make_target
	exit "$KSFT_PASS"
fi
timed run run
timed rerun rerun
timed deb deb
timed packages packages
timed left left
exit "$KSFT_PASS"
