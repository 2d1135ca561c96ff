/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Whether the frequency's sources agree, for tsc-report: every source that
 * answers, each within its stated precision of every other.  Apart from
 * the reading of the sources, so that a unit test
 * (tests/freq_sources_test.c) drives it with values no machine gives on
 * demand.
 */
#ifndef TSC_FREQ_SOURCES_H
#define TSC_FREQ_SOURCES_H

#include <stdbool.h>

#include "libtsc.h"

/* sysfs, perf, hypervisor, cpuid and a calibration: at most five. */
#define FS_MAX 5

struct freq_sources {
	struct tsc_freq f[FS_MAX];
	unsigned int n;
	/* The first pair that disagrees (apart), or -1: they all agree. */
	int a, b;
	double apart_ppm;
};

/*
 * Two values of the same rate agree if they are no further apart than
 * both their precisions together: each may be that far from its
 * reference, and no further.  Nothing is allowed for references that
 * differ (the kernel's tsc_khz and a crystal's rating, tsc(7),
 * "Precision"): a nominal figure's precision is its crystal's tolerance,
 * which is meant to cover that, and a kernel that took another rate than
 * the crystal's is what the check is for.
 */
static inline bool fs_pair_agrees(const struct tsc_freq *x, const struct tsc_freq *y,
				  double *apart_ppm)
{
	double allowed = x->precision_ppm + y->precision_ppm;

	*apart_ppm = tsc_freq_diff_ppm(x, y);
	return *apart_ppm <= allowed && *apart_ppm >= -allowed;
}

/* Compare every pair of the s->n values; true if all agree. */
static inline bool fs_compare(struct freq_sources *s)
{
	double apart;

	s->a = s->b = -1;
	s->apart_ppm = 0;
	for (unsigned int i = 0; i < s->n; i++)
		for (unsigned int j = i + 1; j < s->n; j++)
			if (!fs_pair_agrees(&s->f[i], &s->f[j], &apart)) {
				s->a = (int)i;
				s->b = (int)j;
				s->apart_ppm = apart;
				return false;
			}
	return true;
}

#endif
