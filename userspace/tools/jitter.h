/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * What tsc-jitter's run and its outputs (jitter_report.c) share: the
 * events each spinner records, its state, and the statistics of a CPU.
 */
#ifndef TSC_JITTER_H
#define TSC_JITTER_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "jitter_causes.h"
#include "libtsc.h"

#define CHUNK		65536	/* events per chunk: 1.5 MiB */
/*
 * Counter reads, at most 10,000 a second (one per 100 us) with bursts of
 * 64: in a storm of gaps, not one read() per gap (each 1-3 us of the
 * spinner's), and every gap its own read below that rate.
 */
#define READ_INTERVAL_NS	100000
#define READ_BURST		64
/* How long the spinners have to open their counters before the start. */
#define READY_MAX_MS		10000

struct event {
	uint64_t start, ticks;
	uint32_t causes;	/* 1 << JC_*, 0 if not attributed */
};

struct chunk {
	struct chunk *next;
	uint32_t used;
	struct event ev[CHUNK];
};

struct spinner {
	pthread_t thread;
	int cpu;
	uint64_t threshold, end;	/* ticks */
	atomic_bool *go;
	atomic_int *ready;		/* counted up once its counters are open */
	sem_t *refill;			/* posted when the spare is taken */
	struct chunk *head, *cur;
	_Atomic(struct chunk *) spare;	/* refilled by the main thread */
	uint64_t gaps, dropped, loops;	/* gaps: reads over the threshold */
	uint64_t watched;		/* ticks from the first TSC read to the last */
	uint64_t read_interval;		/* ticks per counter read, sustained */
	uint64_t smi_slow;		/* a dearer SMI read: only for the run */
	struct jc_counters jc;
	bool started;
};

struct stats {
	uint64_t n, min, p50, p90, p99, p999, p9999, max, total;
	double mean;
	uint64_t *ns;		/* every duration, sorted */
};

/* A CPU's statistics from its spinner's events: 0, or -1 out of memory. */
int jitter_compute(const struct spinner *s, const struct tsc_conv *conv, struct stats *st);

/* Durations by powers of two from 1 us, as bars. */
void jitter_histogram(const struct stats *st);

/* A dump line's causes and its newline. */
void jitter_dump_causes(FILE *out, uint32_t causes);

/* A CPU's gaps by cause: as a table, and as JSON members. */
void jitter_print_causes(const struct spinner *s, const struct tsc_conv *conv, uint64_t steal);
void jitter_print_causes_json(const struct spinner *s, const struct tsc_conv *conv,
			      uint64_t steal);

/* The whole run in Prometheus's text format. */
void jitter_print_prometheus(const struct spinner *sp, const struct stats *stats, int n,
			     const struct tsc_conv *conv, const uint64_t *steal, double runtime,
			     uint64_t threshold_ns);

#endif /* TSC_JITTER_H */
