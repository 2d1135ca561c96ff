/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal interfaces between the parts of tsc_freq_khz.ko.
 */
#ifndef TSCFK_H
#define TSCFK_H

#include <linux/device.h>
#include <linux/mutex.h>
#include <linux/types.h>

#include "tsc_offset.h"

/* Module parameters, validated once at load (main.c). */
extern unsigned int tscfk_rounds;
extern unsigned int tscfk_irqoff_max_us;
extern unsigned int tscfk_timeout_ms;
extern int tscfk_reference_cpu;

enum tscfk_status {
	TSCFK_UNMEASURED,	/* offline, failed, or not yet measured */
	TSCFK_REFERENCE,	/* the CPU the others are measured against */
	TSCFK_MEASURED,
};

/* What one CPU's files show. */
struct tscfk_cpu_result {
	enum tscfk_status status;
	struct tscfk_offset_result offset;
};

/* What the global files show. */
struct tscfk_summary {
	u64 generation;		/* completed measurements since load */
	u64 measured_ns;	/* CLOCK_MONOTONIC when the last one ended */
	u64 max_irqoff_ns;	/* longest interrupts-off window in it */
	int reference_cpu;	/* -1 before the first measurement */
};

/* measure.c: results, their lock, and the measurement itself. */
extern struct mutex tscfk_results_lock;
struct tscfk_cpu_result *tscfk_cpu_result(unsigned int cpu);
extern struct tscfk_summary tscfk_summary;

bool tscfk_summarise(struct tscfk_skew *skew);
void tscfk_measure_queue(void);
void tscfk_measure_sync(void);
void tscfk_measure_cancel(void);
int tscfk_cpu_online(unsigned int cpu);
int tscfk_cpu_offline(unsigned int cpu);

/* pingpong.c: measure one target CPU against the reference CPU. */
struct tscfk_pair {
	unsigned int ref_cpu, target_cpu;
	bool ok;			/* enough probes for a result */
	struct tscfk_offset_result result;
	u64 max_irqoff_ns;
};

void tscfk_pingpong(struct tscfk_pair *pair);

/* cpu_sysfs.c: per-CPU files and cpu0/tsc_freq_khz. */
int tscfk_cpu_sysfs_init(void);
void tscfk_cpu_sysfs_exit(void);

/* global_sysfs.c: /sys/devices/system/cpu/tsc/. */
int tscfk_global_sysfs_init(struct device *cpu_root);
void tscfk_global_sysfs_exit(struct device *cpu_root);

#endif /* TSCFK_H */
