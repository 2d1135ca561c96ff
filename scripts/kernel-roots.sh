#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The Debian kernels a fleet can install today that this machine cannot:
# trixie's and trixie-backports' (built with trixie's gcc-14), and sid's
# (its own gcc), each suite in a root of its own, made by mmdebstrap from
# Debian's archive and kept in KERNEL_ROOTS (default
# /var/cache/tsc-freq-khz/kernel-roots).  Each run follows the suites'
# meta-packages (linux-headers-amd64, -cloud-amd64, -rt-amd64; the images
# of the generic and rt ones of its newest suite, to boot): when Debian ships a new kernel, the
# next run installs it and removes the one it replaced, so the checks
# build against what a fleet would get that day.
#
#   scripts/kernel-roots.sh update       make or update every root
#   scripts/kernel-roots.sh list         one line per kernel: RELEASE ROOT
#   scripts/kernel-roots.sh root RELEASE the root that has RELEASE, if any
#   scripts/kernel-roots.sh run ROOT DIR -- COMMAND [ARG]...
#                                        COMMAND in ROOT, as root, with the
#                                        host's DIR at the same path
#
# Exit: 0 done; 1 failed; 2 usage; 4 skipped (not root, no mmdebstrap).
set -Eeuo pipefail

roots=${KERNEL_ROOTS:-/var/cache/tsc-freq-khz/kernel-roots}
# Suite of each root, and the suites whose kernels it installs: trixie
# ships 6.12 and its backports the newest stable kernel.
declare -A kernel_suites=([trixie]="trixie trixie-backports" [sid]="sid")
# Programs of a suite's own that this machine's are too old for: trixie's
# QEMU 10 has the vmclock device (scripts/vm/migrate_test.py runs it
# there, booting that root's newest kernel, which has the driver); and
# the SELinux policy for that kernel, built by its own suite's tools
# (make vm-selinux).
declare -A suite_tools=([trixie]="qemu-system-x86 selinux-policy-default")
# What building the module needs there (sparse for C=2), and a tool to
# make an initramfs, which the images require (INITRD=No: none is made,
# the guest boots one of its own).
base=make,gcc,libc6-dev,kmod,sparse,initramfs-tools,ca-certificates
headers="linux-headers-amd64 linux-headers-cloud-amd64 linux-headers-rt-amd64"
images="linux-image-amd64 linux-image-rt-amd64"

die() {
	echo "kernel-roots: $*" >&2
	exit 1
}
trap 'die "line $LINENO: \"$BASH_COMMAND\" exited with $?"' ERR

# run ROOT DIR COMMAND...: in a mount namespace of its own, so that the
# mounts end with it whatever happens.  DIR's mount point is made once
# the root's /tmp is a tmpfs: a tree under /tmp (a clone there) would
# otherwise have none.
in_root() {
	local root=$1 dir=$2
	shift 2
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare --mount --propagation private -- sh -ec '
		root=$1 dir=$2
		mount -t proc proc "$root/proc"
		mount --rbind /dev "$root/dev"
		mount -t tmpfs tmpfs "$root/tmp"
		mkdir -p "$root$dir"
		mount --bind "$dir" "$root$dir"
		shift 2
		exec chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			DEBIAN_FRONTEND=noninteractive INITRD=No "$@" </dev/null' \
		sh "$root" "$dir" "$@"
}

# Debian's archive as apt reaches it here: the URI of the host's bookworm
# source, and its Acquire settings (a proxy, say).
mirror() {
	apt-cache policy | awk '
		/^ *[0-9]+ / && $NF == "Packages" { uri = $2; split($3, a, "/"); dist = a[1]; next }
		/^ *release / && /o=Debian,/ && dist ~ /^bookworm(-updates)?$/ && uri !~ /security/ { print uri; exit }'
}

sources() {
	local suite=$1 uri=$2 s
	for s in ${kernel_suites[$suite]}; do
		echo "deb $uri $s main"
	done
	if [[ $suite != sid ]]; then
		echo "deb $uri $suite-updates main"
		echo "deb ${uri%/debian*}/debian-security $suite-security main"
	fi
}

# The versioned packages a meta-package of SUITE depends on this day.
resolve() {
	local root=$1 suite=$2 meta=$3
	in_root "$root" /tmp apt-cache show "$meta/$suite" 2> /dev/null |
		sed -n 's/^Depends: //p' | head -n1 | tr ',' '\n' |
		sed -n 's/^ *\(linux-\(headers\|image\)-[0-9][^ ]*\).*/\1/p'
}

make_root() {
	local suite=$1 root=$roots/$1 uri
	local -a opts=()
	uri=$(mirror)
	[[ -n $uri ]] || die "apt knows no Debian bookworm source here (apt-cache policy): apt-get update?"
	for f in $(grep -l '^Acquire::' /etc/apt/apt.conf.d/* 2> /dev/null || true); do
		opts+=(--aptopt="$f")
	done
	echo "kernel-roots: making $root ($suite, from $uri)"
	rm -rf "$root.tmp"
	sources "$suite" "$uri" > "$roots/$suite.list"
	if ! mmdebstrap --quiet --mode=root --variant=minbase --include="$base" "${opts[@]}" \
		"$suite" "$root.tmp" "$roots/$suite.list" > "$roots/$suite.log" 2>&1; then
		tail -n 20 "$roots/$suite.log" | sed 's/^/  | /' >&2
		die "mmdebstrap failed, see $roots/$suite.log"
	fi
	mv "$root.tmp" "$root"
}

# Install the day's kernels of SUITE's root, each with its dependencies
# from the suite that has it (the backports' from the backports), and
# remove the ones they replaced, so the list stays what the
# meta-packages name.
update_root() {
	local suite=$1 root=$roots/$1 s m want=() have=() old=() new=()
	[[ -d $root ]] || make_root "$suite"
	in_root "$root" /tmp apt-get update -qq
	# shellcheck disable=SC2016,SC2086 # dpkg-query's format; a list of packages
	if [[ -n ${suite_tools[$suite]:-} ]] &&
		! in_root "$root" /tmp dpkg-query -W -f '${db:Status-Abbrev}\n' ${suite_tools[$suite]} 2> /dev/null |
		awk '$1 != "ii" { bad = 1 } END { exit bad || NR == 0 }'; then
		echo "kernel-roots: $suite: installing ${suite_tools[$suite]}"
		in_root "$root" /tmp apt-get install -y -qq --no-install-recommends ${suite_tools[$suite]} \
			> "$roots/$suite-install.log" 2>&1 ||
			{ tail -n 20 "$roots/$suite-install.log" >&2; die "$suite: apt-get install failed"; }
	fi
	# The flavours' packages only, as resolve() names them: not the
	# -common ones they depend on, which apt-get purge would take the
	# headers of every kernel away with.
	# shellcheck disable=SC2016 # dpkg-query's format, not the shell's
	mapfile -t have < <(in_root "$root" /tmp dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' |
		awk '$1 == "ii" && $2 ~ /^linux-(headers|image)-[0-9].*-amd64$/ { print $2 }')
	local last=${kernel_suites[$suite]##* }
	for s in ${kernel_suites[$suite]}; do
		new=()
		# Images only of the suite with the newest kernels: to boot.
		for m in $headers $([[ $s == "$last" ]] && echo "$images"); do
			mapfile -t -O "${#new[@]}" new < <(resolve "$root" "$s" "$m")
		done
		((${#new[@]})) || die "$s: no kernel found behind $headers $images"
		want+=("${new[@]}")
		mapfile -t new < <(printf '%s\n' "${new[@]}" | grep -vxF -f <(printf '%s\n' "${have[@]}" x) || true)
		((${#new[@]})) || continue
		echo "kernel-roots: $suite: installing from $s: ${new[*]}"
		in_root "$root" /tmp apt-get install -y -qq --no-install-recommends -t "$s" \
			"${new[@]}" > "$roots/$suite-install.log" 2>&1 ||
			{ tail -n 20 "$roots/$suite-install.log" >&2; die "$suite: apt-get install failed"; }
	done
	for m in "${have[@]}"; do
		[[ " ${want[*]} " == *" $m "* ]] || old+=("$m")
	done
	if ((${#old[@]})); then
		echo "kernel-roots: $suite: removing the replaced ${old[*]}"
		in_root "$root" /tmp apt-get purge -y -qq "${old[@]}" > /dev/null
		in_root "$root" /tmp apt-get autoremove -y -qq --purge > /dev/null
	fi
	# What the checks will look for: a build tree for each headers
	# package, an image for each image package.  A root without them
	# would drop its kernels from make check without a word.
	for m in "${want[@]}"; do
		case $m in
		linux-headers-*) [[ -e $root/usr/lib/modules/${m#linux-headers-}/build ]] ||
			die "$suite: $m is installed, but no build tree" ;;
		linux-image-*) [[ -e $root/boot/vmlinuz-${m#linux-image-} ]] ||
			die "$suite: $m is installed, but no /boot/vmlinuz-${m#linux-image-}" ;;
		esac
	done
	in_root "$root" /tmp apt-get clean
}

list() {
	local d k
	for d in "$roots"/*/usr/lib/modules/*/build; do
		[[ -e $d || -L $d ]] || continue
		k=${d%/build}
		echo "${k##*/} ${d%/usr/lib/modules/*}"
	done | sort -V
}

case ${1:-} in
update)
	[[ $(id -u) -eq 0 ]] || { echo "kernel-roots: SKIP: making a root needs root"; exit 4; }
	command -v mmdebstrap > /dev/null || { echo "kernel-roots: SKIP: no mmdebstrap"; exit 4; }
	mkdir -p "$roots"
	for suite in "${!kernel_suites[@]}"; do
		update_root "$suite"
	done
	list | awk '{ print "kernel-roots: " $1 " in " $2 }' ;;
list)
	list ;;
root)
	[[ $# -eq 2 ]] || { echo "usage: $0 root RELEASE" >&2; exit 2; }
	list | awk -v k="$2" '$1 == k { print $2; found = 1 } END { exit !found }' ;;
run)
	[[ $# -ge 5 && $4 == -- && -d $2/usr/lib/modules && -d $3 ]] || {
		echo "usage: $0 run ROOT DIR -- COMMAND [ARG]..." >&2
		exit 2
	}
	root=$2 dir=$(cd "$3" && pwd)
	shift 4
	# The command's status is the run's: no failure of ours to report.
	trap - ERR
	in_root "$root" "$dir" "$@" ;;
*)
	echo "usage: $0 update | list | root RELEASE | run ROOT DIR -- COMMAND [ARG]..." >&2
	exit 2 ;;
esac
