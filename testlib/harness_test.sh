#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# How harness.h reports what harness_probe's tests do on purpose: the
# results make check believes.  6.1's own SKIP() fails the first, third
# and fourth checks (a failure reported as a skip; a setup's skip running
# the body).

here=$(cd "$(dirname "$0")" && pwd)
probe=${1:-$here/../build/testlib/harness_probe}
# shellcheck source=ktap.sh
. "$here/ktap.sh"

ktap_plan 6
if [ ! -x "$probe" ]; then
	echo "# no $probe: 'make harness-check' builds it"
	exit 1
fi
out=$("$probe" 2>&1)
st=$?

# has REGEX: "yes" if the probe's output has a line matching REGEX.
has() { if grep -Eq "$1" <<<"$out"; then echo yes; else echo no; fi; }

ktap_check "a failure before a skip is a failure" \
	test "$(has '^not ok [0-9]+ global\.fails_then_skips$')" = yes
ktap_check "a plain skip is a skip" \
	test "$(has '^ok [0-9]+ # SKIP a plain skip$')" = yes
ktap_check "a skip in the setup skips the test" \
	test "$(has '^ok [0-9]+ # SKIP a skip in the setup$')" = yes
ktap_check "neither body nor teardown runs after a setup's skip" \
	test "$(has 'PROBE: (body|teardown) ran')" = no
ktap_check "a failure in the setup before a skip is a failure" \
	test "$(has '^not ok [0-9]+ failing\.body_after_a_failed_setup$')" = yes
ktap_check "the probe exits 1, as failures make it (exited $st)" test "$st" = 1
[ "$st" = 1 ] || printf '%s\n' "$out" | sed 's/^/#   /'
ktap_finish
