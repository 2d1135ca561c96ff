/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The system clocks, read by libtsc and by clock_gettime(), for tests
 * that put a clock_gettime() between two library reads, by SYSCLOCK_*.
 */
#ifndef SYSCLOCK_PAIR_H
#define SYSCLOCK_PAIR_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "libtsc.h"

enum { SYSCLOCK_REAL, SYSCLOCK_MONO, SYSCLOCK_BOOT };

static const clockid_t sysclock_ids[3] = { CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME };
static const char *const sysclock_names[3] = { "REALTIME", "MONOTONIC", "BOOTTIME" };

static inline uint64_t sysclock_sys(int c)
{
	struct timespec ts;

	clock_gettime(sysclock_ids[c], &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The library's clock c, after everything before it (the read is unordered). */
static inline uint64_t sysclock_lib(const struct tsc_sysclock *s, int c)
{
	__asm__ __volatile__("lfence" : : : "memory");
	return c == SYSCLOCK_REAL ? tsc_sysclock_realtime(s) :
	       c == SYSCLOCK_MONO ? tsc_sysclock_monotonic(s) : tsc_sysclock_boottime(s);
}

/*
 * clock_gettime() of clock c between two library reads, into v[0..2]:
 * whether it lies between them, as it must where the library is exact.
 */
static inline bool sysclock_bracket(const struct tsc_sysclock *s, int c, uint64_t v[3])
{
	v[0] = sysclock_lib(s, c);
	v[1] = sysclock_sys(c);
	v[2] = sysclock_lib(s, c);
	return v[0] <= v[1] && v[1] <= v[2];
}

#endif /* SYSCLOCK_PAIR_H */
