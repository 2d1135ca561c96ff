# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
# shellcheck shell=bash
# What the tools' test scripts share; source it first thing.  Gives KTAP
# (testlib/ktap.sh), a temporary directory $tmp removed at exit, and:

# shellcheck source=ktap.sh
. "$(dirname "${BASH_SOURCE[0]}")/ktap.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# json FILE EXPR: a Python expression's value, with j the JSON document.
json() { python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$1"; }

# tracefs_for_run: tracefs at /sys/kernel/tracing (the tracepoints' ids
# tsc-jitter counts by): as root, mounted for the run if nobody has, and
# unmounted at exit.  False if it is not there.
tracefs_for_run() {
	[ -e /sys/kernel/tracing/events ] && return 0
	[ "$(id -u)" = 0 ] && mount -t tracefs nodev /sys/kernel/tracing 2> /dev/null || return 1
	trap 'umount /sys/kernel/tracing; rm -rf "$tmp"' EXIT
}

# valid_json FILE SCHEMA: FILE validates against the JSON Schema.
valid_json() {
	python3 -c 'import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))' "$1" "$2"
}

# usage_errors TOOL ARGS...: each ARGS, split into words, exits 2 with a
# message (one KTAP result each).
usage_errors() {
	local tool=$1 args st
	shift
	for args in "$@"; do
		# shellcheck disable=SC2086 # the words are separate arguments on purpose
		"$tool" $args > /dev/null 2> "$tmp/err"; st=$?
		echo "# $args: $(head -n 1 "$tmp/err")"
		ktap_check "'$args': exit 2 with a message" test $st = 2 -a -s "$tmp/err"
	done
}

# emulated: this CPU is QEMU's TCG (the model name says so with -cpu max,
# systemd-detect-virt with any model), where every timing is the
# emulator's and a vCPU's capacity the host's, not a CPU's.
emulated() {
	grep -q 'QEMU TCG' /proc/cpuinfo ||
		[ "$(systemd-detect-virt --vm 2> /dev/null)" = qemu ]
}
