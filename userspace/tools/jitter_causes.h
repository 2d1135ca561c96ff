/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Why a spinning thread lost the CPU: per-thread perf counters of what
 * can take it (interrupts by kind, softirqs, NMIs, being switched out, page
 * faults) and a CPU-wide SMI counter, read after a gap and compared with
 * the previous read.  A gap is put down to every cause whose count moved
 * since, or to none ("unexplained": the hardware, an SMI nothing counts,
 * the hypervisor).  No tracefs buffers: the tracepoints are only counted,
 * which needs their ids from tracefs (/sys/kernel/tracing) and, for
 * interrupts seen from the kernel, perf_event_paranoid <= 1 or
 * CAP_PERFMON.  What cannot be counted is said once, not guessed at.
 */
#ifndef TSC_JITTER_CAUSES_H
#define TSC_JITTER_CAUSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum jc_cause {
	JC_TIMER,	/* the local APIC timer: the tick, hrtimers */
	JC_IPI,		/* function-call IPIs from other CPUs (TLB shootdowns among them) */
	JC_RESCHED,	/* rescheduling IPIs */
	JC_IRQ,		/* device interrupts */
	JC_IRQ_WORK,	/* irq_work self-interrupts */
	JC_SOFTIRQ,	/* softirqs run on the way out of an interrupt */
	JC_NMI,
	JC_PREEMPTED,	/* the thread switched out: another task ran */
	JC_PAGE_FAULT,	/* the thread's own page faults */
	JC_SMI,		/* system management interrupts (CPU-wide) */
	JC_UNEXPLAINED,	/* no count moved */
	JC_NR
};

/* The causes' names as the outputs spell them. */
extern const char *const jc_name[JC_NR];

/* Reads whose median cost is what a read costs (jc_gap_in_read). */
#define JC_READS_KEPT	15

/* Gaps put down to one cause: how many, their time, the longest. */
struct jc_tally {
	uint64_t gaps, ticks, max_ticks;
};

struct jc_counters {
	int group;		/* the per-thread group's leader, or -1 */
	int smi;		/* the CPU-wide SMI counter, or -1 */
	unsigned int nr;	/* events in the group */
	int fd[16];		/* theirs, the leader first */
	uint8_t cause_of[16];	/* each event's cause, in read order */
	uint64_t last[16];	/* the group's counts at the last read */
	uint64_t last_smi, smi_start;
	uint64_t smi_cost;	/* ticks a read of the SMI counter takes */
	bool smi_per_gap;	/* read after each gap: cheap enough */
	uint64_t interval_ticks; /* a read per this, sustained, */
	uint64_t burst_ticks;	/* or this much earlier in a burst */
	uint64_t tat;		/* when the next read is due (GCRA) */
	uint64_t pending, pending_ticks; /* gaps since the last read */
	bool counted[JC_NR];	/* causes with a counter */
	char why[JC_NR][128];	/* why one is not counted */
	/* What the run found. */
	struct jc_tally tally[JC_NR];
	/* Not attributed: gaps with others since a read, or with nothing to read. */
	uint64_t held, held_ticks;
	uint64_t reads, read_ticks;
	uint64_t read_min;	/* ticks the cheapest read took */
	uint64_t read_recent[JC_READS_KEPT]; /* the last reads' ticks, a ring */
	unsigned int read_next, read_kept;
	uint64_t smis;		/* SMIs in the whole run, if smi_run */
	bool smi_run;		/* the SMI counter opened */
	char failed[160];	/* why reads stopped mid-run; "" if they did not */
};

/*
 * Open the counters for the calling thread, pinned to 'cpu'; reads held
 * to one per 'interval_ticks' with bursts of 'burst'; the SMI counter read
 * after each gap only if a read takes at most 'slow_ticks'.  Never fails: what cannot be opened
 * is left out, and jc_missing() says why.
 */
void jc_open(struct jc_counters *c, int cpu, uint64_t interval_ticks, unsigned int burst,
	     uint64_t slow_ticks);

/* Just before the watch starts: the counts to compare the first gap's with. */
void jc_start(struct jc_counters *c);

/*
 * A gap of 'ticks' ended at TSC 'now'.  Reads the counters unless reads
 * are over their rate; true if it did, with *end the TSC when the read
 * was done: the caller restarts its watch there, since the read took time
 * of ours, and checks it for a gap of its own (jc_gap_in_read).  *causes
 * gets this gap's causes, 1 << JC_* (JC_UNEXPLAINED if none moved), or
 * 0 if it is not attributed (no read, or a read shared with another).
 * Where there is nothing to read (no counter opened, or a read failed:
 * then 'failed' says why and the counters are closed), the gap is
 * counted as not attributed at once.
 */
bool jc_gap(struct jc_counters *c, uint64_t now, uint64_t ticks, uint32_t *causes,
	    uint64_t *end);

/*
 * Whether a read from 'start' to 'end' hid a gap longer than 'threshold'
 * ticks: it took longer than the last reads' median by more.  If so, the
 * gap, the read's whole span since it may lie anywhere in it, is counted
 * as not attributed: the counts it moved fall on either side of the
 * read's snapshot, so the next gap's read may show them too.
 */
bool jc_gap_in_read(struct jc_counters *c, uint64_t start, uint64_t end, uint64_t threshold);

/* The run is over: gaps still waiting for a read are held ones. */
void jc_finish(struct jc_counters *c);

void jc_close(struct jc_counters *c);

/*
 * Whether a cause has figures in the outputs: it is counted here, or it
 * is 'unexplained' and the counters were read.
 */
bool jc_reported(const struct jc_counters *c, enum jc_cause cause);

/*
 * The causes not counted and why, one line ("" if every cause is), as
 * "smi: no msr/smi event in this PMU; timer, ipi: ...".  Fills buf.
 */
const char *jc_missing(const struct jc_counters *c, char *buf, size_t size);

#endif /* TSC_JITTER_CAUSES_H */
