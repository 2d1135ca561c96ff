// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Test helper for tsc-jitter: take a CPU away from everyone else for known
 * periods.  Pinned to CPU, at SCHED_FIFO (above any normal thread), it
 * waits until DELAY_MS after its start, then COUNT times: busy-spins
 * SPIN_US, sleeps PERIOD_MS.  Each spin's start and end go to LOG, one line
 * each, as TSC readings (lfence;rdtsc): the test puts them on the dump's
 * clock with tsc-jitter's own anchor, so that no clock but the TSC is
 * compared (a CLOCK_MONOTONIC stamp drifts from the dump's clock by NTP's
 * frequency correction, 40 us a second at 40 ppm, and two processes'
 * anchors by NTP's slew between them).  The delay counts from the start,
 * not from the end of tsc_clock_init(), which may calibrate for up to a
 * second.  Exit 4 if SCHED_FIFO is refused (a skip).
 *
 * Usage: jitter_inject CPU COUNT SPIN_US PERIOD_MS DELAY_MS LOG
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "libtsc.h"

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, ms % 1000 * 1000000 };

	nanosleep(&ts, NULL);
}

/* A whole number from 0 to max, or -1. */
static long number(const char *s, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	return errno || end == s || *end || v < 0 || v > max ? -1 : v;
}

int main(int argc, char **argv)
{
	struct sched_param prio = { .sched_priority = 50 };
	long cpu, count, spin, period, delay;
	struct timespec start;
	TSC_CLOCK(clk);
	uint64_t *spans, spin_ticks;
	cpu_set_t set;
	FILE *log;
	int ret = 1;

	clock_gettime(CLOCK_MONOTONIC, &start);

	if (argc == 7) {
		cpu = number(argv[1], CPU_SETSIZE - 1);
		count = number(argv[2], 1000000);
		spin = number(argv[3], 1000000000);
		period = number(argv[4], 1000000);
		delay = number(argv[5], 1000000);
	}
	if (argc != 7 || cpu < 0 || count < 0 || spin < 0 || period < 0 || delay < 0) {
		fprintf(stderr, "usage: jitter_inject CPU COUNT SPIN_US PERIOD_MS DELAY_MS LOG\n");
		return 2;
	}
	spin *= 1000;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	spans = calloc(2 * (size_t)count, sizeof(*spans));
	log = fopen(argv[6], "w");
	if (!spans || !log) {
		perror("jitter_inject");
		free(spans);
		if (log)
			(void)fclose(log);	/* nothing written to lose */
		return 1;
	}
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("jitter_inject: sched_setaffinity");
		goto out;
	}
	if (tsc_clock_init(&clk, NULL)) {
		fprintf(stderr, "jitter_inject: %s\n", tsc_last_error());
		goto out;
	}
	if (sched_setscheduler(0, SCHED_FIFO, &prio)) {
		perror("jitter_inject: SCHED_FIFO");
		ret = 4;
		goto out;
	}
	start.tv_sec += delay / 1000;
	start.tv_nsec += delay % 1000 * 1000000;
	if (start.tv_nsec >= 1000000000) {
		start.tv_sec++;
		start.tv_nsec -= 1000000000;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &start, NULL) == EINTR)
		;
	spin_ticks = tsc_ns_to_ticks(&clk.conv, (uint64_t)spin);
	for (long i = 0; i < count; i++) {
		uint64_t t0 = tsc_rdtsc_ordered(), t1;

		while ((t1 = tsc_rdtsc_ordered()) - t0 < spin_ticks)
			;
		spans[2 * i] = t0;
		spans[2 * i + 1] = t1;
		sleep_ms(period);
	}
	/* Written at the end: no I/O while the CPU is ours. */
	for (long i = 0; i < count; i++)
		fprintf(log, "%llu %llu\n", (unsigned long long)spans[2 * i],
			(unsigned long long)spans[2 * i + 1]);
	ret = 0;
out:
	free(spans);
	if (fclose(log) && !ret)
		ret = 1;
	return ret;
}
