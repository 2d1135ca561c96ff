// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Calibration error against duration: a 3 s calibration is the reference,
 * then calibrations of 5, 20, 100 and 500 ms, interleaved over the runs so
 * that drift and noise spread evenly, each compared with the reference.
 * Prints p50 and p95 of the absolute error, what each run claimed, and the
 * coverage: the share of runs whose error is within their claim plus the
 * reference's own (a claim that does not cover the truth is worse than a
 * wide one).
 *
 * Usage: calibrate_bench [--quick]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libtsc.h"

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const unsigned int ms[] = { 5, 20, 100, 500 };
	bool quick = argc > 1 && !strcmp(argv[1], "--quick");
	unsigned int runs = quick ? 3 : 15, nd = quick ? 2 : 4;
	double err[4][15], claim[4][15];
	unsigned int covered[4] = { 0 };
	struct tsc_freq ref, f;

	/* A target no run can reach: each runs for exactly its duration. */
	if (tsc_freq_calibrate(&ref, 1e-6, quick ? 1000 : 3000)) {
		fprintf(stderr, "calibrate_bench: %s\n", tsc_last_error());
		return 1;
	}
	printf("reference: %.3f Hz +-%.4f ppm (%s)\n", ref.hz, ref.precision_ppm, ref.detail);
	for (unsigned int r = 0; r < runs; r++)
		for (unsigned int d = 0; d < nd; d++) {
			if (tsc_freq_calibrate(&f, 1e-6, ms[d])) {
				fprintf(stderr, "calibrate_bench: %s\n", tsc_last_error());
				return 1;
			}
			err[d][r] = fabs(tsc_freq_diff_ppm(&f, &ref));
			claim[d][r] = f.precision_ppm;
			covered[d] += err[d][r] <= f.precision_ppm + ref.precision_ppm;
		}
	printf("%8s %12s %12s %16s %9s   (%u runs each)\n", "duration", "p50 |err|", "p95 |err|",
	       "claimed (p50)", "covered", runs);
	for (unsigned int d = 0; d < nd; d++) {
		qsort(err[d], runs, sizeof(double), cmp);
		qsort(claim[d], runs, sizeof(double), cmp);
		printf("%6u ms %10.4f ppm %8.4f ppm %12.4f ppm %8.0f%%\n", ms[d], err[d][runs / 2],
		       err[d][(runs * 95 + 99) / 100 - 1], claim[d][runs / 2],
		       100.0 * covered[d] / runs);
	}
	printf("targets: p95 <= 0.2 ppm at 20 ms, <= 0.05 ppm at 100 ms; covered >= 95%%\n");
	return 0;
}
