/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * The tests' sandbox: a seccomp filter on the calling thread (and the
 * processes it starts), for good, that answers adjtimex() and
 * clock_adjtime() (glibc's adjtimex() is clock_adjtime(CLOCK_REALTIME))
 * with 'action' and allows every other call: SECCOMP_RET_KILL_PROCESS
 * as systemd's SystemCallFilter= without @clock does,
 * SECCOMP_RET_ERRNO | EPERM as its ProtectClock= does, SECCOMP_RET_ALLOW
 * for a filter that allows them.  0, or -errno.
 */
#ifndef TSC_TESTS_SECCOMP_FILTER_H
#define TSC_TESTS_SECCOMP_FILTER_H

#include <errno.h>
#include <stddef.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

static inline int seccomp_filter_adjtimex(unsigned int action)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_adjtimex, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_adjtime, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, action),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) ? -errno : 0;
}

#endif /* TSC_TESTS_SECCOMP_FILTER_H */
