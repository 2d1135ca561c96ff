#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# ktap.sh's exit status, which run_tests.sh and make check believe: a
# program that planned more results than it gave (it stopped half-way) or
# gave more than it planned fails, whatever the results said; all skipped
# is 4, any failure 1.  Each case is a small program that sources ktap.sh.

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ktap.sh
. "$here/ktap.sh"

# case NAME EXPECTED-STATUS PROGRAM: run PROGRAM after sourcing ktap.sh.
case_status() {
	local out st

	out=$(bash -c ". '$here/ktap.sh'; $3" 2>&1)
	st=$?
	ktap_check "$1: exits $2 (exited $st)" test "$st" = "$2"
	[ "$st" = "$2" ] || printf '%s\n' "$out" | sed 's/^/#   /'
}

ktap_plan 6
case_status "as planned, all pass" 0 'ktap_plan 2; ktap_ok a; ktap_ok b; ktap_finish'
case_status "as planned, one fails" 1 'ktap_plan 2; ktap_ok a; ktap_notok b; ktap_finish'
case_status "as planned, all skipped" 4 'ktap_plan 1; ktap_skip a why; ktap_finish'
case_status "fewer results than planned" 1 'ktap_plan 3; ktap_ok a; ktap_ok b; ktap_finish'
case_status "more results than planned" 1 'ktap_plan 1; ktap_ok a; ktap_ok b; ktap_finish'
case_status "no plan" 1 'ktap_ok a; ktap_finish'
ktap_finish
