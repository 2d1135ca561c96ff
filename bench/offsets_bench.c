// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Widths of the offset bounds: the module's (interrupts off, in the
 * kernel) against libtsc's own userspace probe, on the same machine,
 * alternating over the runs.  Needs the tsc_freq_khz module loaded and
 * root (to trigger the module's measurements).
 *
 * Usage: offsets_bench [--quick]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libtsc.h"

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median width over the measured CPUs of one report. */
static double median_width(const struct tsc_report *r)
{
	double w[1024];
	unsigned int n = 0;

	for (unsigned int i = 0; i < r->ncpus && n < 1024; i++)
		if (r->cpus[i].status == TSC_CPU_MEASURED)
			w[n++] = (double)(r->cpus[i].max - r->cpus[i].min);
	if (!n)
		return 0;
	qsort(w, n, sizeof(double), cmp);
	return w[n / 2];
}

static int remeasure(void)
{
	int fd = open("/sys/devices/system/cpu/tsc/remeasure", O_WRONLY);
	int ok = fd >= 0 && write(fd, "1", 1) == 1;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	bool quick = argc > 1 && !strcmp(argv[1], "--quick");
	unsigned int runs = quick ? 3 : 15;
	double mod[15] = { 0 }, usr[15] = { 0 };
	TSC_REPORT_OPTS(o, .userspace = true);

	for (unsigned int i = 0; i < runs; i++) {
		struct tsc_report r;

		if (remeasure() || tsc_report_get(&r, NULL) ||
		    r.offsets_source != TSC_OFFSETS_MODULE) {
			fprintf(stderr, "offsets_bench: needs the module loaded, and root\n");
			return 1;
		}
		mod[i] = median_width(&r);
		tsc_report_free(&r);
		if (tsc_report_get(&r, &o) || r.offsets_source != TSC_OFFSETS_USERSPACE) {
			fprintf(stderr, "offsets_bench: %s\n", tsc_last_error());
			return 1;
		}
		usr[i] = median_width(&r);
		tsc_report_free(&r);
	}
	qsort(mod, runs, sizeof(double), cmp);
	qsort(usr, runs, sizeof(double), cmp);
	printf("offset bound width, ticks (median over CPUs; p50 of %u runs each)\n", runs);
	printf("  module (kernel, interrupts off)  %8.0f\n", mod[runs / 2]);
	printf("  libtsc userspace probe           %8.0f\n", usr[runs / 2]);
	printf("  userspace / module               %8.2fx  (expected >= 2)\n",
	       mod[runs / 2] ? usr[runs / 2] / mod[runs / 2] : 0);
	return 0;
}
