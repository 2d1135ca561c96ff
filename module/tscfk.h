/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal interfaces between the parts of tsc_freq_khz.ko.
 */
#ifndef TSCFK_H
#define TSCFK_H

#include <linux/device.h>
#include <linux/types.h>

#include "tsc_offset.h"

/* Module parameters, validated once at load (main.c). */
extern unsigned int tscfk_rounds;
extern unsigned int tscfk_irqoff_max_us;
extern unsigned int tscfk_timeout_ms;
extern int tscfk_reference_cpu;
extern bool tscfk_measure_isolated;

enum tscfk_status {
	TSCFK_UNMEASURED,	/* see enum tscfk_why */
	TSCFK_REFERENCE,	/* the CPU the others are measured against */
	TSCFK_MEASURED,
};

/* Why a CPU is unmeasured; cpuN/tsc/unmeasured_reason names them. */
enum tscfk_why {
	TSCFK_WHY_PENDING,	/* not measured yet: zero, as a fresh result is */
	TSCFK_WHY_OFFLINE,
	TSCFK_WHY_ISOLATED,	/* isolcpus=, nohz_full=, from 6.7 a cpuset */
	TSCFK_WHY_NOT_STARTED,	/* its side did not run within timeout_ms */
	TSCFK_WHY_REFERENCE_NOT_STARTED,
	TSCFK_WHY_STALLED,	/* its side ran but did not end in time */
	TSCFK_WHY_TOO_FEW_PROBES,
	TSCFK_WHY_WRONG_CPU,	/* a side ran on another CPU */
	TSCFK_WHY_NO_MEMORY,
	TSCFK_WHY_NONE,		/* it has a result */
};

/* What one CPU's files show. */
struct tscfk_cpu_result {
	enum tscfk_status status;
	enum tscfk_why why;	/* when unmeasured */
	struct tscfk_offset_result offset;
	unsigned int clean_rounds;	/* probes not stretched by a disturbance */
	bool have_adjust;	/* the CPU has IA32_TSC_ADJUST, read as: */
	s64 adjust;
	u64 started_ns;		/* CLOCK_MONOTONIC when its measurement began */
};

const char *tscfk_why_name(enum tscfk_why why);

/* What the global files show. */
struct tscfk_summary {
	u64 generation;		/* changes to the published results */
	u64 measured_ns;	/* CLOCK_MONOTONIC when the last one ended */
	u64 max_irqoff_ns;	/* longest interrupts-off window in it */
	u64 reference_irqoff_ns;	/* the reference CPU's windows, all */
	int reference_cpu;	/* -1 before the first measurement */
};

/* measure.c: the measurement, and its results for readers (lock-free). */
bool tscfk_read_result(unsigned int cpu, struct tscfk_cpu_result *r);
void tscfk_read_summary(struct tscfk_summary *s);

bool tscfk_summarise(struct tscfk_skew *skew, struct tscfk_summary *s);
u64 tscfk_measured_since(void);
int tscfk_measure_init(void);
void tscfk_measure_exit(void);
int tscfk_measure_all_sync(void);
void tscfk_measure_start(void);
void tscfk_measure_stop(void);
void tscfk_measure_cancel(void);
int tscfk_cpu_online(unsigned int cpu);
int tscfk_cpu_offline(unsigned int cpu);

/* pingpong.c: measure one target CPU against the reference CPU. */
struct tscfk_pair {
	enum tscfk_why why;		/* TSCFK_WHY_NONE: the rest holds */
	struct tscfk_offset_result result;
	unsigned int clean_rounds;
	bool have_adjust;
	s64 adjust;			/* the target's IA32_TSC_ADJUST */
	u64 max_irqoff_ns;
	u64 ref_irqoff_ns;		/* the reference's windows, all */
};

/*
 * A pair's life: tscfk_pp_start() starts the target's side at once
 * (ERR_PTR on failure); before the pair's turn, tscfk_pp_prepare() waits
 * until 'start_by' at most for it to start; at its turn tscfk_pp_measure()
 * starts the reference's and measures, in timeout_ms and a little slack;
 * tscfk_pp_release() ends the pair in any case, moving its sides to
 * housekeeping CPUs before they end.  None under the hotplug lock, and
 * tscfk_pp_prepare() and tscfk_pp_release() accept an ERR_PTR or NULL.
 */
struct tscfk_pp;
struct tscfk_pp *tscfk_pp_start(unsigned int ref_cpu, unsigned int target_cpu);
void tscfk_pp_prepare(struct tscfk_pp *pp, unsigned long start_by);
void tscfk_pp_measure(struct tscfk_pp *pp, struct tscfk_pair *pair);
void tscfk_pp_release(struct tscfk_pp *pp);

/* cpu_sysfs.c: per-CPU files and cpu0/tsc_freq_khz. */
int tscfk_cpu_sysfs_init(void);
void tscfk_cpu_sysfs_exit(void);

/* clock_page.c: the timekeeper's mapping, in tsc/ beside the rest. */
int tscfk_clock_page_init(void);
void tscfk_clock_page_exit(void);
extern struct bin_attribute tscfk_clock_page_attr;
extern struct device_attribute tscfk_timekeeper_freq_attr;

/* clock_events.c: steps, resumes and clocksource changes, counted. */
struct timekeeper;
bool tscfk_clock_events_note(const struct timekeeper *tk);
extern struct device_attribute tscfk_clock_steps_attr;
extern struct device_attribute tscfk_clock_resumes_attr;
extern struct device_attribute tscfk_clocksource_changes_attr;

/* global_sysfs.c: /sys/devices/system/cpu/tsc/. */
int tscfk_global_sysfs_init(struct device *cpu_root);
void tscfk_global_sysfs_exit(struct device *cpu_root);

#endif /* TSCFK_H */
