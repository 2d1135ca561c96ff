#!/bin/bash
# shellcheck disable=SC2317 # the steps are functions run through timed()
# SPDX-License-Identifier: GPL-2.0
#
# Install the project's packages as a fleet does, use each one, purge them,
# and check that nothing of them is left.  Run as root: inside a clean
# Debian root by fresh-root-check.sh (make check), or by hand on a machine.
#
#   scripts/packaging/deb-install-check.sh [--chroot] [--then COMMAND] DEBDIR RESULTDIR
#
# Steps, each timed:
#   install  apt-get install ./*.deb from DEBDIR: apt brings in what they
#            depend on (dkms, a compiler, ...), the dkms postinst builds
#            the module.  What apt plans first: only new packages (no
#            upgrade, no removal of anything there), which are then all
#            that the purge may remove
#   dkms     for each kernel the postinst chose: installed in
#            updates/dkms, the version, signed, found by modprobe
#   library  a program built against libtsc-dev through pkg-config, once
#            linked with libtsc.so.1 and once with libtsc.a, runs
#   tools    each answers --help; tsc-report --json into RESULTDIR, with
#            the schema the package installed
#   service  the timer is neither enabled nor started; the service's own
#            ExecStart, pointed at a scratch directory, writes tsc.prom
#            (copied to RESULTDIR)
#   then     COMMAND (sh -c), if given, while the packages are installed:
#            its failure fails the check (fresh-root-check.sh boots a
#            guest there that loads the module)
#   purge    apt-get purge of the four and of every package the install
#            brought in (only those: apt's plan for the purge is checked
#            first): the package set is what it was, no file of the
#            packages is left, nor any DKMS entry or module file
# The caller checks RESULTDIR with what a fresh root lacks (python3's
# jsonschema, promtool): common.sh's check_results.
#
# --chroot: in a root that shares this kernel (fresh-root-check.sh): the
# kernel's own state (a tsc_freq_khz loaded by make run) is not the
# root's business.
#
# Exit: 0 pass, 1 fail, 4 skip (not root, any of it already here: a real
# install, left alone; or the install would upgrade or remove a package).
set -Eeuo pipefail

# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/common.sh"

usage() {
	echo "usage: $0 [--chroot] [--then COMMAND] DEBDIR RESULTDIR" >&2
	exit 2
}
then_cmd='' chroot=''
while [[ ${1:-} == --* ]]; do
	case $1 in
	--chroot) chroot=1; shift ;;
	--then) [[ -n ${2:-} ]] || usage; then_cmd=$2; shift 2 ;;
	*) usage ;;
	esac
done
[[ $# -eq 2 && -n $1 && -n $2 ]] || usage
out=$(cd "$1" && pwd)
mkdir -p "$2"
results=$(cd "$2" && pwd)
work=$(mktemp -d)
textfile_dir=/var/lib/prometheus/node-exporter
unit=/lib/systemd/system/tsc-report-prometheus.service
src=/usr/src/$pkg_name-$pkg_version
export DEBIAN_FRONTEND=noninteractive

debs=()
for p in "${deb_packages[@]}"; do
	debs+=("$(deb_file "$p")")
	[[ -f ${debs[-1]} ]] || fail "no ${debs[-1]}: run deb-check.sh first"
done

installed_by_us=
chosen=()

# Every package dpkg has (any state but purged), with its version and
# state, to compare before and after.
package_set() {
	dpkg-query -W -f '${Package}:${Architecture} ${Version} ${db:Status-Abbrev}\n' |
		awk '$3 != "un" && $3 != "pn"' | LC_ALL=C sort
}

# What this run may take away again: the packages apt planned to install
# new, one per line (name:arch), in $work/new, written before installing.
# Those that were half there before (config files left, "rc") are removed,
# not purged: their configuration was someone's.
purge_ours() {
	local -a purge=() remove=()
	local p
	while IFS= read -r p; do
		if awk -v p="$p" '$1 == p && $3 == "rc" { f = 1 } END { exit !f }' "$work/before"; then
			remove+=("$p")
		elif dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2> /dev/null | grep -qv '^[up]n'; then
			purge+=("$p")
		fi
	done < "$work/new"
	# apt's own plan first: nothing but these may go.
	if [[ ${#purge[@]} -gt 0 ]] && apt-get -s purge "${purge[@]}" |
		awk '/^(Purg|Remv) / { print $2 }' | grep -vxF -f <(sed 's/:.*//' "$work/new") -q; then
		echo "refusing: apt would purge more than this run installed:" \
			"$(apt-get -s purge "${purge[@]}" | awk '/^(Purg|Remv) / { print $2 }' | tr '\n' ' ')"
		return 1
	fi
	[[ ${#purge[@]} -eq 0 ]] || apt-get purge -y "${purge[@]}" || return 1
	[[ ${#remove[@]} -eq 0 ]] || apt-get remove -y "${remove[@]}"
}

cleanup() {
	local rc=$?
	trap - ERR
	if [[ $installed_by_us ]]; then
		echo "cleanup: purging what this run installed"
		purge_ours >> "$work/cleanup.log" 2>&1 ||
			echo "cleanup: the purge failed: $(tail -n 3 "$work/cleanup.log")"
	fi
	local i
	for ((i = ${#made_dirs[@]} - 1; i >= 0; i--)); do
		rm -f "${made_dirs[i]}/tsc.prom"
		rmdir "${made_dirs[i]}" 2> /dev/null || true
	done
	rm -rf "$work"
	print_times
	exit "$rc"
}
trap cleanup EXIT

# Nothing of the packages may be here already: the install would replace
# someone's (the postinst runs dkms remove on the same version, dpkg
# overwrites files no package owns) and the purge would remove it.
preconditions() {
	local p st v f
	[[ $(id -u) -eq 0 ]] || skip "apt-get install needs root"
	for p in "${deb_packages[@]}"; do
		st=$(dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2> /dev/null || true)
		[[ -z ${st// /} || $st == un* ]] ||
			skip "$p is on this machine already (dpkg status '${st% }'): not touching a real install"
	done
	[[ ! -e /var/lib/dkms/$pkg_name ]] ||
		skip "DKMS has $pkg_name already (/var/lib/dkms/$pkg_name): not touching a real install"
	v=$(compgen -G "/usr/src/$pkg_name-*") && skip "$v exists: not touching a real install"
	v=$(find /lib/modules -name "$module.ko*" -print -quit 2> /dev/null)
	[[ -z $v ]] || skip "$v exists (make install?): not touching a real install"
	[[ $chroot || ! -e /sys/module/$module ]] || skip "$module is loaded"
	[[ ! -e /etc/dkms/no-autoinstall ]] || skip "/etc/dkms/no-autoinstall: the postinst would build nothing"
	[[ ! -e $textfile_dir/tsc.prom ]] || skip "$textfile_dir/tsc.prom exists: someone's, not touching it"
	for f in "${debs[@]}"; do
		while IFS= read -r p; do
			[[ -d $p || ! -e $p ]] || skip "$p exists, owned by no package of ours (make install?): not touching it"
		done < <(dpkg-deb --fsys-tarfile "$f" | tar -t | sed 's|^\./|/|')
	done
}

install_pkgs() {
	local p st plan
	local -a extra=()
	package_set > "$work/before"
	# The library test needs pkg-config; a fresh root has none, and then
	# it goes with the rest at the purge.
	command -v pkg-config > /dev/null || extra=(pkgconf)
	# apt's plan: new packages only.  An upgrade or a removal would change
	# what was here, which the purge could not undo.
	plan=$(apt-get -s install --no-install-recommends --no-remove "${debs[@]}" "${extra[@]}" 2>&1) ||
		fail "apt-get cannot install the packages: $(tail -n 5 <<< "$plan")"
	p=$(awk '/^Inst / && $3 ~ /^\[/ { print $2 }' <<< "$plan" | tr '\n' ' ')
	[[ -z $p ]] || skip "installing would upgrade $p: not changing this machine's packages"
	# "Inst NAME (VERSION ORIGIN [ARCH])": NAME:ARCH, as package_set has them.
	awk '/^Inst / { a = $NF; gsub(/[][)]/, "", a); print $2 ":" a }' <<< "$plan" > "$work/new"
	installed_by_us=1
	if ! apt-get install -y --no-install-recommends --no-remove "${debs[@]}" "${extra[@]}" \
		> "$results/install.log" 2>&1; then
		tail -n 30 "$results/install.log" | sed 's/^/  | /'
		fail "apt-get install of the packages failed, see $results/install.log"
	fi
	# dpkg ends the maintainer scripts' lines with \r\n under apt.
	sed -i 's/\r$//' "$results/install.log"
	for p in "${deb_packages[@]}"; do
		st=$(dpkg-query -W -f '${db:Status-Abbrev}' "$p")
		[[ $st == "ii " ]] || fail "dpkg status of $p is '$st' after the install"
	done
	echo "  installed: ${deb_packages[*]}, and what they brought in:" \
		"$(awk -v d="^$pkg_name-dkms:" '$0 !~ d && !/^(libtsc|tsc-tools:)/' "$work/new" | tr '\n' ' ')"
}

# The postinst's decisions, then the module for each kernel it chose.
check_dkms() {
	local k ko why v n=0
	# Its build output goes to /dev/null, and DKMS's readelf probe of 6.12
	# headers warns on stderr: not shown.
	grep -E 'Building for|belongs to a chroot|Skipped|skipped|Installing to|Error' \
		"$results/install.log" | sed 's/^/  | /' || true
	# "Building for A, B and C": the kernels it chose.
	v=$(sed -n 's/^Building for //p' "$results/install.log")
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
		elif why=$(exclusion "$k" "$(uname -m)") && [[ $why ]]; then
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

check_library() {
	local v
	cat > "$work/use.c" <<-'EOF'
	#include <stdio.h>
	#include <libtsc.h>

	int main(void)
	{
		TSC_CLOCK(clk);
		uint64_t a, b;

		if (tsc_clock_init(&clk, NULL))
			return fprintf(stderr, "%s\n", tsc_last_error()), 1;
		a = tsc_clock_now(&clk);
		b = tsc_monotonic_ns();
		printf("%s %.0f Hz, %llu kHz\n", tsc_source_name(clk.freq.source), clk.freq.hz,
		       (unsigned long long)tsc_khz());
		return tsc_clock_now(&clk) < a || tsc_monotonic_ns() < b;
	}
	EOF
	# shellcheck disable=SC2046 # pkg-config's words are separate arguments
	cc -std=c11 -Wall -Wextra -Werror "$work/use.c" $(pkg-config --cflags --libs libtsc) -o "$work/use-shared" ||
		fail "a program built with pkg-config --cflags --libs libtsc does not compile"
	# (/lib is /usr/lib, usrmerge.)
	v=$(ldd "$work/use-shared" | awk '$1 == "libtsc.so.1" { print $3 }')
	[[ $v && $(realpath "$v") == "$(realpath "$(dpkg-query -L libtsc1 | grep '/libtsc.so.1$')")" ]] ||
		fail "use-shared is linked with '$v', not the installed libtsc.so.1"
	v=$("$work/use-shared") || fail "use-shared failed: $v"
	echo "  linked with $(ldd "$work/use-shared" | awk '$1 == "libtsc.so.1" { print $3 }'): $v"
	# shellcheck disable=SC2046
	cc -std=c11 "$work/use.c" $(pkg-config --cflags libtsc) -Wl,-Bstatic $(pkg-config --static --libs libtsc) \
		-Wl,-Bdynamic -o "$work/use-static" || fail "a program linked with libtsc.a does not build"
	# (Output first, then grep: grep -q leaving early would make the
	# pipeline's status ldd's SIGPIPE.)
	v=$(ldd "$work/use-static")
	[[ $v != *libtsc* ]] || fail "use-static is linked with libtsc.so: $v"
	v=$("$work/use-static") || fail "use-static failed: $v"
	echo "  linked with libtsc.a: $v"
}

check_tools() {
	local t st v
	for t in tsc-coreclock tsc-interference tsc-jitter tsc-report; do
		v=$("$t" --help) || fail "$t --help exited $?"
		grep -q "^Usage: $t" <<< "$v" || fail "$t --help: no usage"
	done
	st=0
	tsc-report --json > "$results/tsc-report.json" || st=$?
	[[ $st -le 1 ]] || fail "tsc-report --json exited $st"
	cp /usr/share/tsc/tsc-report.schema.json "$results/"
	echo "  the four tools answer --help; tsc-report --json exit $st (the verdict)"
}

# The directories of the textfile path this run made (deepest last), to
# take away again at the end.
made_dirs=()

check_service() {
	local cmd st d
	[[ ! -e /etc/systemd/system/timers.target.wants/tsc-report-prometheus.timer ]] ||
		fail "the package enabled tsc-report-prometheus.timer"
	grep -qx "ConditionPathIsDirectory=$textfile_dir" "$unit" || fail "$unit: no ConditionPathIsDirectory=$textfile_dir"
	grep -qx "ReadWritePaths=$textfile_dir" "$unit" || fail "$unit: no ReadWritePaths=$textfile_dir"
	cmd=$(sed -n 's/^ExecStart=//p' "$unit")
	[[ $cmd == *" $textfile_dir/tsc.prom" ]] || fail "$unit: ExecStart=$cmd does not write into $textfile_dir"
	# Its own command, as systemd would run it (no shell), where it
	# writes: node_exporter's directory, made for the test if missing
	# (prometheus-node-exporter makes it).  Exit 0 or 1
	# (SuccessExitStatus=1), and tsc.prom the only new file there.
	for d in "${textfile_dir%/*}" "$textfile_dir"; do
		[[ -d $d ]] || { mkdir "$d"; made_dirs+=("$d"); }
	done
	find "$textfile_dir" -mindepth 1 -printf '%f\n' | LC_ALL=C sort > "$work/textfile.before"
	read -r -a cmd <<< "$cmd"
	st=0
	"${cmd[@]}" || st=$?
	[[ $st -le 1 ]] || fail "the service's command exited $st"
	d=$(find "$textfile_dir" -mindepth 1 -printf '%f\n' | LC_ALL=C sort |
		LC_ALL=C comm -13 "$work/textfile.before" -)
	[[ $d == tsc.prom ]] || fail "the service's command left in $textfile_dir: $d"
	cp "$textfile_dir/tsc.prom" "$results/"
	echo "  timer not enabled; ExecStart exit $st wrote $textfile_dir/tsc.prom alone"
}

run_then() {
	sh -c "$then_cmd" || fail "--then: '$then_cmd' exited $?"
}

purge() {
	local p v
	for p in "${deb_packages[@]}"; do
		dpkg-query -L "$p"
	done | sort -u > "$work/files"
	if ! purge_ours > "$results/purge.log" 2>&1; then
		tail -n 30 "$results/purge.log" | sed 's/^/  | /'
		fail "apt-get purge failed, see $results/purge.log"
	fi
	installed_by_us=
	grep -E 'Deleting|completely' "$results/purge.log" | sed 's/^/  | /' || true
	if ! diff -u "$work/before" <(package_set) > "$work/packages.diff"; then
		sed 's/^/  | /' "$work/packages.diff"
		fail "the package set is not what it was before the install"
	fi
	while IFS= read -r p; do
		[[ -d $p || ! -e $p ]] || fail "$p left after the purge"
	done < "$work/files"
	# The postrm takes the service's file away: node_exporter would
	# otherwise go on exporting its last values.
	[[ ! -e $textfile_dir/tsc.prom ]] || fail "$textfile_dir/tsc.prom left after the purge"
	for ((p = ${#made_dirs[@]} - 1; p >= 0; p--)); do
		rmdir "${made_dirs[p]}" || fail "${made_dirs[p]} not empty after the purge"
	done
	made_dirs=()
	v=$(dkms status -m "$pkg_name" 2> /dev/null || true)
	[[ -z $v ]] || fail "dkms status after the purge: $v"
	[[ ! -e /var/lib/dkms/$pkg_name ]] || fail "/var/lib/dkms/$pkg_name left"
	[[ ! -e $src ]] || fail "$src left"
	v=$(find /lib/modules -name "$module.ko*")
	[[ -z $v ]] || fail "left: $v"
	for k in "${chosen[@]}"; do
		! modprobe --show-depends -S "$k" "$module" > /dev/null 2>&1 ||
			fail "$k: modprobe still finds $module (stale modules.dep)"
	done
	echo "  the package set as before ($(wc -l < "$work/before") packages); none of the" \
		"$(wc -l < "$work/files") paths of ours left; no DKMS entry, no $module.ko*, not in any modules.dep"
}

preconditions
timed install install_pkgs
timed dkms check_dkms
timed library check_library
timed tools check_tools
timed service check_service
[[ -z $then_cmd ]] || timed "then" run_then
timed purge purge
exit "$KSFT_PASS"
