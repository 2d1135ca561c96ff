#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Install the Debian packages a target needs; quiet and quick when they are
# all there already.  Usage: install-deps.sh run|debug|check|deb
#   run:   build the module and show it (headers, or the QEMU guest)
#   debug: build make check's debug kernels (scripts/vm/debug-kernel.sh),
#          which make check starts before it installs the rest
#   check: everything 'make check' uses
#   deb:   build the Debian packages and check them ('make deb'): debhelper
#          and dh_dkms, lintian, systemd-analyze for the units
set -eu

# Kernels the module is built and tested against: Debian bookworm's 6.12,
# generic flavour, which make run's guest boots, and the headers to build
# for it.  check adds 6.1 (the oldest supported) and every other flavour:
# cloud and rt headers (built), and the 6.12 rt image, booted where no
# kernel root (kernel-roots.sh) has a newer rt kernel.
kernels="linux-image-6.12-amd64 linux-headers-6.12-amd64"
oldest="linux-image-amd64 linux-headers-amd64"
flavours="linux-headers-cloud-amd64 linux-headers-rt-amd64 linux-headers-6.12-cloud-amd64
	  linux-headers-6.12-rt-amd64 linux-image-6.12-rt-amd64"
build="make gcc libc6-dev kmod xz-utils"
# The debug kernels' source and what building a kernel takes beyond $build;
# and g++, whose install may bring gcc up to its version: before their
# build starts, not during it.
debug="linux-source-6.1 perl flex bison bc libelf-dev libssl-dev g++"
guest="qemu-system-x86 busybox-static cpio"
# What chronyd needs to run in the guests: chrony itself is unpacked under
# build/, not installed (mk/vm.mk's CHRONYD).
chrony_libs="libcap2 libedit2 libgnutls30 libnettle8 libseccomp2"

case "${1:-}" in
run)
	pkgs="$build $guest $kernels"
	# With module support, the running kernel's headers are enough
	# (unless make run is to boot a guest all the same).
	if [ -e /proc/modules ] && [ -z "${RUN_IN_GUEST:-}" ]; then
		pkgs="$build linux-headers-$(uname -r)"
	fi ;;
debug)
	pkgs="$build $debug" ;;
check)
	pkgs="$build $debug $guest $kernels $oldest $flavours dkms sparse
	      clang-14 libclang-rt-14-dev libabsl-dev pkg-config
	      python3 python3-jsonschema prometheus prometheus-node-exporter clang-tidy cppcheck gcovr
	      build-essential debhelper dh-dkms lintian systemd git mmdebstrap shellcheck
	      procps abi-dumper abi-compliance-checker
	      iproute2 rtla $chrony_libs" ;;
deb)
	pkgs="build-essential dpkg-dev debhelper dh-dkms lintian systemd" ;;
*)
	echo "usage: $0 run|debug|check|deb" >&2
	exit 2 ;;
esac

installed() {
	dpkg-query -W -f '${Status}\n' "$1" 2>/dev/null | grep -q 'ok installed'
}

missing=
for p in $pkgs; do
	installed "$p" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "missing packages:$missing; run as root or install them" >&2
	exit 1
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive

# A boot loader that boots from this machine's /boot: GRUB, an EFI system
# partition, systemd-boot, extlinux.
boot_loader() {
	command -v update-grub >/dev/null 2>&1 || installed grub-common ||
		[ -e /boot/grub ] || [ -e /boot/grub2 ] || [ -e /boot/efi ] ||
		[ -e /boot/extlinux ] || [ -e /boot/loader ] ||
		{ command -v bootctl >/dev/null 2>&1 && bootctl is-installed >/dev/null 2>&1; }
}
# Our guest boots its own initramfs: skip building one per kernel image,
# but only where nothing boots from /boot.  Where a boot loader does, the
# kernel images installed for the guests become its entries, the newest
# perhaps its default, and must have their initramfs to boot.
if boot_loader; then
	case $missing in
	*linux-image-*) echo "a boot loader boots from /boot here: the kernels for the guests get an initramfs" ;;
	esac
else
	export INITRD=No
fi

apt-get update -qq
# shellcheck disable=SC2086 # word splitting of the list is intended
apt-get install -y -qq --no-install-recommends $missing >/dev/null

# make check runs prometheus, promtool and prometheus-node-exporter
# itself, on loopback ports of its own: their packages' services, which
# their postinst enabled and started (on :9090 and :9100, every
# interface), are not wanted.  Stopped and disabled only where this run
# installed them; someone's own installation is left alone.
for p in prometheus prometheus-node-exporter; do
	case " $missing " in
	*" $p "*)
		command -v systemctl >/dev/null 2>&1 || continue
		# Stopped too where systemd runs (not in a container without it).
		now=
		[ -d /run/systemd/system ] && now=--now
		if systemctl disable ${now:+"$now"} "$p.service" >/dev/null 2>&1; then
			echo "$p.service: disabled${now:+ and stopped} (make check runs $p itself)"
		else
			echo "$p.service: could not disable it (systemctl disable --now $p)" >&2
		fi ;;
	esac
done
