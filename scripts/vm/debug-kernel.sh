#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The debug kernels that 'make check' boots: Debian's linux-source-6.1,
# tinyconfig plus debug-kernel.config (just enough drivers for the
# harness, and the watchdogs) plus one flavour's checkers:
#   kasan  debug-kasan.config: lockdep, KASAN, kmemleak, debug objects
#   kcsan  debug-kcsan.config: KCSAN, which cannot be built beside KASAN
# Built once and cached outside the clone, keyed by what makes it: the
# fragments' settings, this script, the source package's version and the
# compiler's.  The tree stays in the cache, built: external modules are
# built against it.
#
# Usage: debug-kernel.sh FLAVOUR   prints the tree's directory (a KDIR) on stdout
# Cache: DEBUG_KERNEL_CACHE, default /var/cache/tsc-freq-khz/debug-kernel;
# the flavour's trees of other keys there are removed once a new one is built.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd -P)
flavour=${1:-}
[[ $flavour =~ ^(kasan|kcsan)$ ]] || { echo "usage: $0 kasan|kcsan" >&2; exit 2; }
fragments=("$here/debug-kernel.config" "$here/debug-$flavour.config")
tarball=/usr/src/linux-source-6.1.tar.xz
cache=${DEBUG_KERNEL_CACHE:-/var/cache/tsc-freq-khz/debug-kernel}

die() { echo "debug-kernel: $*" >&2; exit 1; }
[[ -r $tarball ]] || die "no $tarball (apt-get install linux-source-6.1)"
version=$(dpkg-query -W -f '${Version}' linux-source-6.1)
# The fragments' settings, not their comments.
key=$( { grep -h '^CONFIG_' "${fragments[@]}"; cat "$0"; echo "$version"; gcc --version | head -n1; } |
	sha256sum | cut -c1-16)
dir=$cache/$flavour-$key
tree=$dir/linux-source-6.1
# One build of a flavour at a time: make check starts them in the
# background, and vm-debug may ask meanwhile; it waits, then finds the
# tree built.
mkdir -p "$cache"
exec 9> "$cache/$flavour.lock"
flock 9
if [[ -e $dir/built ]]; then
	echo "debug-kernel: cached, $tree" >&2
	echo "$tree"
	exit 0
fi

log=$dir.log
start=$SECONDS
echo "debug-kernel: building linux-source-6.1 $version with ${fragments[*]} into $tree (log $log)" >&2
rm -rf "$dir"
mkdir -p "$dir"
{
	tar -C "$dir" -xf "$tarball" &&
	make -C "$tree" -s tinyconfig &&
	(cd "$tree" && scripts/kconfig/merge_config.sh -m .config "${fragments[@]}") &&
	make -C "$tree" -s olddefconfig
} > "$log" 2>&1 || die "configuring failed, see $log"

# Every line of the fragments must have survived olddefconfig: a checker
# silently dropped (a missing dependency) would check nothing.
missing=$(grep -hE '^CONFIG_[A-Z0-9_]+=' "${fragments[@]}" | while IFS= read -r line; do
	name=${line%%=*} value=${line#*=}
	if [[ $value == n ]]; then
		grep -qx "# $name is not set" "$tree/.config" || grep -qx "$name=n" "$tree/.config" ||
			! grep -q "^$name=" "$tree/.config" || echo "$line"
	else
		grep -qx "$line" "$tree/.config" || echo "$line (got: $(grep "^$name=" "$tree/.config" || echo unset))"
	fi
done)
[[ -z $missing ]] || die "olddefconfig did not keep: $missing"

make -C "$tree" -j"$(nproc)" >> "$log" 2>&1 || { tail -n 20 "$log" >&2; die "build failed, see $log"; }
touch "$dir/built"
# This flavour's older trees, and those from before there were flavours.
find "$cache" -mindepth 1 -maxdepth 1 -regextype posix-extended \
	\( -name "$flavour-*" -o -regex '.*/[0-9a-f]{16}(\.log)?' \) \
	! -name "$flavour-$key" ! -name "$flavour-$key.log" ! -name "$flavour.lock" -exec rm -rf {} +
echo "debug-kernel: built $(make -s -C "$tree" kernelrelease) in $((SECONDS - start)) s" >&2
echo "$tree"
