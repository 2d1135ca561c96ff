// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc_report_test.sh's helper: runs a command under a seccomp filter, as
 * a sandbox would (seccomp_filter.h).  "allow" allows every call;
 * "kill-adjtimex" kills the process that calls adjtimex() or
 * clock_adjtime() (systemd's SystemCallFilter= without @clock),
 * "eperm-adjtimex" fails them with EPERM (ProtectClock=).
 *
 * Usage: seccomp_run allow|kill-adjtimex|eperm-adjtimex COMMAND [ARG...]
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "seccomp_filter.h"

int main(int argc, char **argv)
{
	unsigned int action;
	int err;

	if (argc < 3) {
		fprintf(stderr, "usage: seccomp_run allow|kill-adjtimex|eperm-adjtimex COMMAND [ARG...]\n");
		return 2;
	}
	if (!strcmp(argv[1], "allow")) {
		action = SECCOMP_RET_ALLOW;
	} else if (!strcmp(argv[1], "kill-adjtimex")) {
		action = SECCOMP_RET_KILL_PROCESS;
	} else if (!strcmp(argv[1], "eperm-adjtimex")) {
		action = SECCOMP_RET_ERRNO | EPERM;
	} else {
		fprintf(stderr, "seccomp_run: %s: not allow, kill-adjtimex nor eperm-adjtimex\n", argv[1]);
		return 2;
	}
	err = seccomp_filter_adjtimex(action);
	if (err) {
		fprintf(stderr, "seccomp_run: seccomp filter: %s\n", strerror(-err));
		return 3;
	}
	execvp(argv[2], argv + 2);
	fprintf(stderr, "seccomp_run: %s: %s\n", argv[2], strerror(errno));
	return 127;
}
