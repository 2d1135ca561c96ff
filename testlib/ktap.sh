# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# KTAP output for the shell selftests; source it, call ktap_plan N first and
# ktap_finish last (which exits 0 pass, 1 fail, 4 all skipped).  A program
# that reports fewer or more results than it planned fails: a script that
# stopped half-way must not pass on the results it gave.

ktap_n=0 ktap_pass=0 ktap_fail=0 ktap_skip=0 ktap_planned=

ktap_plan() { ktap_planned=$1; echo "TAP version 13"; echo "1..$1"; }

# ktap_check NAME COMMAND...: ok if the command succeeds.
ktap_check() {
	local name=$1
	shift
	if "$@"; then ktap_ok "$name"; else ktap_notok "$name"; fi
}

ktap_ok() { ktap_n=$((ktap_n + 1)) ktap_pass=$((ktap_pass + 1)); echo "ok $ktap_n $1"; }
ktap_notok() { ktap_n=$((ktap_n + 1)) ktap_fail=$((ktap_fail + 1)); echo "not ok $ktap_n $1"; }
ktap_skip() { ktap_n=$((ktap_n + 1)) ktap_skip=$((ktap_skip + 1)); echo "ok $ktap_n $1 # SKIP $2"; }

# Skip the whole program.
ktap_skip_all() { echo "TAP version 13"; echo "1..0 # SKIP $1"; exit 4; }

ktap_finish() {
	local error=0

	if [ "$ktap_n" != "$ktap_planned" ]; then
		echo "# planned ${ktap_planned:-no} results, gave $ktap_n"
		error=1
	fi
	echo "# Totals: pass:$ktap_pass fail:$ktap_fail xfail:0 xpass:0 skip:$ktap_skip error:$error"
	[ $ktap_fail -eq 0 ] && [ $error -eq 0 ] || exit 1
	[ $ktap_pass -gt 0 ] || exit 4
	exit 0
}
