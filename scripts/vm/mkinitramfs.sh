#!/bin/sh
# Build a tiny busybox initramfs that can mount the host's root over 9p.
# Usage: mkinitramfs.sh KERNEL-RELEASE OUTPUT.cpio.gz [ROOT]
#        mkinitramfs.sh --builtin OUTPUT.cpio.gz   (a kernel with 9p built in)
# ROOT: where the kernel's /boot and /lib/modules are, if not here (a
# root of scripts/kernel-roots.sh).
#
# The host kernel cannot load modules, so tests run in a QEMU guest that boots
# a stock Debian kernel; this initramfs only has to get the 9p shares mounted,
# everything else comes from the host root (see guest-init.sh).
set -eu

die() { echo "mkinitramfs: $*" >&2; exit 1; }

[ $# -eq 2 ] || [ $# -eq 3 ] || die "usage: $0 KERNEL-RELEASE|--builtin OUTPUT.cpio.gz [ROOT]"
rel=$1 out=$2 root=${3:-}
here=$(cd "$(dirname "$0")" && pwd -P)
moddir=$root/lib/modules/$rel
busybox=$(command -v busybox) || die "busybox not found (apt-get install busybox-static)"

if [ "$rel" != --builtin ]; then
	[ -r "$root/boot/vmlinuz-$rel" ] || die "kernel $root/boot/vmlinuz-$rel missing or unreadable"
	[ -d "$moddir" ] || die "$moddir missing (install linux-image-$rel)"
fi
# A dynamically linked busybox would need the host's libc in the initramfs.
ldd "$busybox" 2>&1 | grep -q 'not a dynamic' ||
	die "$busybox is not statically linked (apt-get install busybox-static)"

stage=$(mktemp -d "${TMPDIR:-/tmp}/initramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/sbin" "$stage/usr/bin" "$stage/usr/sbin" \
	"$stage/proc" "$stage/sys" "$stage/dev" "$stage/host" "$stage/modules"
cp "$busybox" "$stage/bin/busybox"
# Applet symlinks at build time: saves a `busybox --install` on every boot.
for applet in $("$busybox" --list-full); do
	[ -e "$stage/$applet" ] || ln -s /bin/busybox "$stage/$applet"
done
cp "$here/guest-init.sh" "$stage/init"
chmod 755 "$stage/init"

# Load order matters (busybox insmod does not resolve dependencies). Modules
# marked '?' may legitimately be absent on some kernels (e.g. 6.12 has no
# separate fscache module); the others must be either built in or a module.
# A --builtin kernel has them all built in.
: >"$stage/modules/order"
specs="virtio_ring virtio virtio_pci_legacy_dev? virtio_pci_modern_dev?
	virtio_pci netfs? fscache? 9pnet 9pnet_virtio 9p"
[ "$rel" = --builtin ] && specs=
for spec in $specs; do
	name=${spec%\?}
	grep -q "/$name\.ko\$" "$moddir/modules.builtin" && continue
	path=$(grep -o "^[^:]*/$name\.ko[.a-z]*:" "$moddir/modules.dep" | tr -d :) || true
	if [ -z "$path" ]; then
		[ "$name" != "$spec" ] && continue
		die "module $name is neither built into $rel nor in $moddir"
	fi
	# busybox insmod cannot read compressed modules: store them plain.
	case $path in
	*.xz) xz -dc "$moddir/$path" ;;
	*.zst) zstd -qdc "$moddir/$path" ;;
	*.gz) gzip -dc "$moddir/$path" ;;
	*) cat "$moddir/$path" ;;
	esac >"$stage/modules/$name.ko" || die "cannot decompress $moddir/$path"
	echo "$name" >>"$stage/modules/order"
done

# Write next to the target and rename, so that concurrent runs never see a
# half-written archive.
mkdir -p "$(dirname "$out")"
tmp=$(mktemp "$out.XXXXXX")
(cd "$stage" && find . | LC_ALL=C sort | "$busybox" cpio -o -H newc 2>/dev/null) |
	gzip -1 >"$tmp" || { rm -f "$tmp"; die "cannot write $out"; }
chmod 644 "$tmp"
mv -f "$tmp" "$out"
