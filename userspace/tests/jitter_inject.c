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
/* The feature-test macro: reserved, for exactly this. */
#define _GNU_SOURCE	/* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

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
	long long *spans;
	cpu_set_t set;
	FILE *log;
	int ret = 1;

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
	if (sched_setscheduler(0, SCHED_FIFO, &prio)) {
		perror("jitter_inject: SCHED_FIFO");
		ret = 4;
		goto out;
	}
	sleep_ms(delay);
	for (long i = 0; i < count; i++) {
		long long t0 = now_ns(), t1;

		while ((t1 = now_ns()) - t0 < spin)
			;
		spans[2 * i] = t0;
		spans[2 * i + 1] = t1;
		sleep_ms(period);
	}
	/* Written at the end: no I/O while the CPU is ours. */
	for (long i = 0; i < count; i++)
		fprintf(log, "%lld %lld\n", spans[2 * i], spans[2 * i + 1]);
	ret = 0;
out:
	free(spans);
	if (fclose(log) && !ret)
		ret = 1;
	return ret;
}
