// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Test helper for tsc-jitter: take a CPU away from everyone else for known
 * periods.  Pinned to CPU, at SCHED_FIFO (above any normal thread), it
 * waits DELAY_MS, then COUNT times: busy-spins SPIN_US by CLOCK_MONOTONIC,
 * sleeps PERIOD_MS.  Each spin's start and end (CLOCK_MONOTONIC ns) go to
 * LOG, one line each.  Exit 4 if SCHED_FIFO is refused (a skip).
 *
 * Usage: jitter_inject CPU COUNT SPIN_US PERIOD_MS DELAY_MS LOG
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, ms % 1000 * 1000000 };

	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	struct sched_param prio = { .sched_priority = 50 };
	long long *spans;
	cpu_set_t set;
	long count, spin;
	FILE *log;

	if (argc != 7) {
		fprintf(stderr, "usage: jitter_inject CPU COUNT SPIN_US PERIOD_MS DELAY_MS LOG\n");
		return 2;
	}
	CPU_ZERO(&set);
	CPU_SET(atoi(argv[1]), &set);
	count = atol(argv[2]);
	spin = atol(argv[3]) * 1000;
	spans = calloc(2 * (size_t)count, sizeof(*spans));
	log = fopen(argv[6], "w");
	if (!spans || !log) {
		perror("jitter_inject");
		return 1;
	}
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("jitter_inject: sched_setaffinity");
		return 1;
	}
	if (sched_setscheduler(0, SCHED_FIFO, &prio)) {
		perror("jitter_inject: SCHED_FIFO");
		return 4;
	}
	sleep_ms(atol(argv[5]));
	for (long i = 0; i < count; i++) {
		long long t0 = now_ns(), t1;

		while ((t1 = now_ns()) - t0 < spin)
			;
		spans[2 * i] = t0;
		spans[2 * i + 1] = t1;
		sleep_ms(atol(argv[4]));
	}
	/* Written at the end: no I/O while the CPU is ours. */
	for (long i = 0; i < count; i++)
		fprintf(log, "%lld %lld\n", spans[2 * i], spans[2 * i + 1]);
	return fclose(log) ? 1 : 0;
}
