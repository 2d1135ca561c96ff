// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Test helper for tsc-jitter: take a CPU away from everyone else for known
 * periods.  Pinned to CPU, at SCHED_FIFO (above any normal thread), it
 * waits DELAY_MS, then COUNT times: busy-spins SPIN_US by CLOCK_MONOTONIC,
 * sleeps PERIOD_MS.  Exit 4 if SCHED_FIFO is refused (a skip, not a pass).
 *
 * Usage: jitter_inject CPU COUNT SPIN_US PERIOD_MS DELAY_MS
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000ll + ts.tv_nsec / 1000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, ms % 1000 * 1000000 };

	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	struct sched_param prio = { .sched_priority = 50 };
	cpu_set_t set;
	long count, spin;

	if (argc != 6) {
		fprintf(stderr, "usage: jitter_inject CPU COUNT SPIN_US PERIOD_MS DELAY_MS\n");
		return 2;
	}
	CPU_ZERO(&set);
	CPU_SET(atoi(argv[1]), &set);
	count = atol(argv[2]);
	spin = atol(argv[3]);
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
		long long t0 = now_us();

		while (now_us() - t0 < spin)
			;
		sleep_ms(atol(argv[4]));
	}
	return 0;
}
