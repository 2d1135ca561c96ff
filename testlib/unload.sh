# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Sourced by the shell tests.  tscfk_unload [COMMAND]: unload tsc_freq_khz
# with COMMAND (default rmmod).  The module is in use (EAGAIN) while any of
# its threads may still run, which includes the last instructions of a
# measurement that has just returned: retry for about a second, quietly
# but for the last try.

# shellcheck disable=SC2120 # COMMAND is optional
tscfk_unload() {
	local cmd=${1:-rmmod} _
	for _ in $(seq 20); do
		$cmd tsc_freq_khz 2> /dev/null && return 0
		sleep 0.05
	done
	$cmd tsc_freq_khz
}
