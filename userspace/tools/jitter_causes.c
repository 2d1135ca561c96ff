// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The counters behind tsc-jitter's causes (jitter_causes.h).  One group of
 * per-thread counters, software events and tracepoints, read with one
 * read(); the SMI counter is CPU-wide (the msr PMU has no per-task
 * context), a second read() where it exists.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jitter_causes.h"
#include "libtsc.h"

const char *const jc_name[JC_NR] = {
	[JC_TIMER] = "timer", [JC_IPI] = "ipi", [JC_RESCHED] = "resched",
	[JC_IRQ] = "irq", [JC_IRQ_WORK] = "irq_work", [JC_SOFTIRQ] = "softirq",
	[JC_NMI] = "nmi", [JC_PREEMPTED] = "preempted", [JC_PAGE_FAULT] = "page_fault",
	[JC_SMI] = "smi", [JC_UNEXPLAINED] = "unexplained",
};

/* The group: software events first, so that the leader exists anywhere. */
static const struct event {
	enum jc_cause cause;
	const char *tracepoint;	/* under tracefs's events/, or NULL */
	uint64_t sw;		/* a PERF_COUNT_SW_*, for no tracepoint */
} events[] = {
	{ JC_PREEMPTED, NULL, PERF_COUNT_SW_CONTEXT_SWITCHES },
	{ JC_PAGE_FAULT, NULL, PERF_COUNT_SW_PAGE_FAULTS },
	{ JC_TIMER, "irq_vectors/local_timer_entry", 0 },
	{ JC_IPI, "irq_vectors/call_function_entry", 0 },
	{ JC_IPI, "irq_vectors/call_function_single_entry", 0 },
	{ JC_RESCHED, "irq_vectors/reschedule_entry", 0 },
	{ JC_IRQ, "irq/irq_handler_entry", 0 },
	{ JC_IRQ_WORK, "irq_vectors/irq_work_entry", 0 },
	{ JC_SOFTIRQ, "irq/softirq_entry", 0 },
	{ JC_NMI, "nmi/nmi_handler", 0 },
};
#define NR_EVENTS (sizeof(events) / sizeof(events[0]))

static const char *const tracefs[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
#define MSR_PMU	"/sys/bus/event_source/devices/msr"

static int perf_open(struct perf_event_attr *attr, int pid, int cpu, int group)
{
	return (int)syscall(SYS_perf_event_open, attr, pid, cpu, group, PERF_FLAG_FD_CLOEXEC);
}

/* A number from a small sysfs or tracefs file, or -errno. */
static long long read_number(const char *path, const char *fmt)
{
	long long v = -1;
	FILE *f = fopen(path, "re");
	int err;

	if (!f)
		return -errno;
	err = fscanf(f, fmt, &v) == 1 ? 0 : -EINVAL;
	(void)fclose(f);
	return err ? err : v;
}

/* Where to say why a cause is not counted; NULL once it has been said. */
static char *why_slot(struct jc_counters *c, enum jc_cause cause)
{
	return c->why[cause][0] ? NULL : c->why[cause];
}
#define WHY_SIZE sizeof(((struct jc_counters *)0)->why[0])

/* Why perf refused, in the words that tell the reader what to change. */
static void say_refused(struct jc_counters *c, enum jc_cause cause, int err)
{
	char *why = why_slot(c, cause);

	if (!why)
		return;
	if (err == EACCES || err == EPERM)
		snprintf(why, WHY_SIZE, "perf not allowed (perf_event_paranoid %lld, no CAP_PERFMON)",
			 read_number("/proc/sys/kernel/perf_event_paranoid", "%lld"));
	else
		snprintf(why, WHY_SIZE, "perf_event_open: %s", strerror(err));
}

/* The tracepoint's id from tracefs, or -errno with the reason said. */
static long long tracepoint_id(struct jc_counters *c, const struct event *e)
{
	char path[160], *why;
	const char *dir = tracefs[0];
	long long id = -ENOENT;

	for (size_t i = 0; i < sizeof(tracefs) / sizeof(tracefs[0]); i++) {
		dir = tracefs[i];
		snprintf(path, sizeof(path), "%s/events/%s/id", dir, e->tracepoint);
		id = read_number(path, "%lld");
		if (id >= 0 || id == -EACCES)
			break;
	}
	why = id < 0 ? why_slot(c, e->cause) : NULL;
	if (!why)
		return id;
	if (id == -EACCES)
		snprintf(why, WHY_SIZE, "%s is not readable: tracefs is root's", dir);
	else if (access("/sys/kernel/tracing/events", F_OK))
		snprintf(why, WHY_SIZE, "no tracefs at %s (mount -t tracefs nodev %s)",
			 tracefs[0], tracefs[0]);
	else
		snprintf(why, WHY_SIZE, "no tracepoint %s in this kernel", e->tracepoint);
	return id;
}

static void open_smi(struct jc_counters *c, int cpu, uint64_t slow_ticks)
{
	struct perf_event_attr attr = { .size = sizeof(attr) };
	long long type, config;

	type = read_number(MSR_PMU "/type", "%lld");
	config = read_number(MSR_PMU "/events/smi", "event=%llx");
	if (type < 0 || config < 0) {
		char *why = why_slot(c, JC_SMI);

		if (why)
			snprintf(why, WHY_SIZE, "no " MSR_PMU "/events/smi");
		return;
	}
	attr.type = (uint32_t)type;
	attr.config = (uint64_t)config;
	/* The msr PMU counts per CPU only: this CPU's, whoever runs. */
	c->smi = perf_open(&attr, -1, cpu, -1);
	if (c->smi < 0) {
		say_refused(c, JC_SMI, errno);
		return;
	}
	c->counted[JC_SMI] = true;
	c->smi_run = true;
	/*
	 * Reading it is a rdmsr: a few cycles on a bare CPU, an exit to the
	 * hypervisor in a guest (2-3 us on this project's VMs), time in which
	 * no gap is seen.  Where it is that dear, the run's count only.
	 */
	for (int i = 0; i < 3; i++) {
		uint64_t t0 = tsc_rdtsc_ordered(), v, t;

		if (read(c->smi, &v, sizeof(v)) != (ssize_t)sizeof(v)) {
			c->smi_cost = UINT64_MAX;
			break;
		}
		t = tsc_rdtsc_ordered() - t0;
		c->smi_cost = i ? (t < c->smi_cost ? t : c->smi_cost) : t;
	}
	c->smi_per_gap = c->smi_cost <= slow_ticks;
	if (!c->smi_per_gap) {
		c->counted[JC_SMI] = false;
		snprintf(c->why[JC_SMI], WHY_SIZE, "SMIs counted for the whole run only: a read costs %s",
			 c->smi_cost == UINT64_MAX ? "an error" : "more than 1 us here (a VM exit)");
	}
}

void jc_open(struct jc_counters *c, int cpu, uint64_t interval_ticks, unsigned int burst,
	     uint64_t slow_ticks)
{
	*c = (struct jc_counters){ .group = -1, .smi = -1, .interval_ticks = interval_ticks,
				   .burst_ticks = burst * interval_ticks, .read_min = UINT64_MAX };
	for (size_t i = 0; i < NR_EVENTS && c->nr < sizeof(c->last) / sizeof(c->last[0]); i++) {
		const struct event *e = &events[i];
		struct perf_event_attr attr = {
			.size = sizeof(attr),
			.type = e->tracepoint ? PERF_TYPE_TRACEPOINT : PERF_TYPE_SOFTWARE,
			.config = e->sw,
			.read_format = PERF_FORMAT_GROUP,
		};
		int fd;

		if (e->tracepoint) {
			long long id = tracepoint_id(c, e);

			if (id < 0)
				continue;
			attr.config = (uint64_t)id;
		}
		/* This thread, on whichever CPU (it is pinned to one). */
		fd = perf_open(&attr, 0, -1, c->group);
		if (fd < 0) {
			say_refused(c, e->cause, errno);
			continue;
		}
		if (c->group < 0)
			c->group = fd;
		c->fd[c->nr] = fd;
		c->cause_of[c->nr++] = (uint8_t)e->cause;
		c->counted[e->cause] = true;
		/* One of a cause's events counted is enough to count it. */
		c->why[e->cause][0] = '\0';
	}
	open_smi(c, cpu, slow_ticks);
}

/* Whether there is anything to read after a gap. */
static bool readable(const struct jc_counters *c)
{
	return c->group >= 0 || (c->smi >= 0 && c->smi_per_gap);
}

/* The counters now: false if a read failed (then nothing is attributed). */
static bool read_all(struct jc_counters *c, uint64_t *vals, uint64_t *smi)
{
	struct {
		uint64_t nr, v[16];
	} g;
	ssize_t want = (ssize_t)((1 + c->nr) * sizeof(uint64_t));

	if (c->group >= 0 && (read(c->group, &g, (size_t)want) != want || g.nr != c->nr))
		return false;
	memcpy(vals, g.v, c->nr * sizeof(uint64_t));
	*smi = c->last_smi;
	return c->smi < 0 || !c->smi_per_gap ||
	       read(c->smi, smi, sizeof(*smi)) == (ssize_t)sizeof(*smi);
}

/* The SMI counter now, or 'fallback'. */
static uint64_t read_smi(const struct jc_counters *c, uint64_t fallback)
{
	uint64_t v;

	return c->smi >= 0 && read(c->smi, &v, sizeof(v)) == (ssize_t)sizeof(v) ? v : fallback;
}

/* A read's cost, for jc_gap_in_read(). */
static void keep_read(struct jc_counters *c, uint64_t ticks)
{
	if (ticks < c->read_min)
		c->read_min = ticks;
	c->read_recent[c->read_next] = ticks;
	c->read_next = (c->read_next + 1) % JC_READS_KEPT;
	if (c->read_kept < JC_READS_KEPT)
		c->read_kept++;
}

/*
 * A read failed: the counters are closed, every gap from here on is not
 * attributed, and the outputs say why.  errno is the read's, or 0 for a
 * short one.
 */
static void give_up(struct jc_counters *c)
{
	int err = errno;

	snprintf(c->failed, sizeof(c->failed),
		 "reading the counters failed after %llu reads (%s): the gaps from then on not attributed",
		 (unsigned long long)c->reads, err ? strerror(err) : "a short read");
	jc_close(c);
}

void jc_start(struct jc_counters *c)
{
	c->last_smi = c->smi_start = read_smi(c, 0);
	/* A few reads, for what a read costs: jc_gap_in_read(). */
	for (int i = 0; i < 4; i++) {
		uint64_t t0 = tsc_rdtsc_ordered();

		errno = 0;
		if (!read_all(c, c->last, &c->last_smi)) {
			give_up(c);
			return;
		}
		keep_read(c, tsc_rdtsc_ordered() - t0);
	}
}

/* Gaps waiting for a read that will not tell them apart: not attributed. */
static void hold_pending(struct jc_counters *c)
{
	c->held += c->pending;
	c->held_ticks += c->pending_ticks;
	c->pending = 0;
	c->pending_ticks = 0;
}

static void tally(struct jc_tally *t, uint64_t ticks)
{
	t->gaps++;
	t->ticks += ticks;
	if (ticks > t->max_ticks)
		t->max_ticks = ticks;
}

bool jc_gap(struct jc_counters *c, uint64_t now, uint64_t ticks, uint32_t *causes,
	    uint64_t *end)
{
	uint64_t vals[16], smi, done;
	bool moved[JC_NR] = { false };

	*causes = 0;
	c->pending++;
	c->pending_ticks += ticks;
	/* No counter opened, or a read failed: nothing will tell it. */
	if (!readable(c)) {
		hold_pending(c);
		return false;
	}
	/* The generic cell rate algorithm: due at tat, or up to a burst early. */
	if ((int64_t)(c->tat - now) > (int64_t)c->burst_ticks)
		return false;
	errno = 0;
	if (!read_all(c, vals, &smi)) {
		give_up(c);
		hold_pending(c);
		return false;
	}
	for (unsigned int i = 0; i < c->nr; i++)
		moved[c->cause_of[i]] |= vals[i] != c->last[i];
	moved[JC_SMI] = smi != c->last_smi;
	memcpy(c->last, vals, sizeof(vals));
	c->last_smi = smi;

	if (c->pending == 1) {
		bool any = false;

		for (int k = 0; k < JC_UNEXPLAINED; k++) {
			if (moved[k]) {
				tally(&c->tally[k], ticks);
				*causes |= 1u << k;
			}
			any |= moved[k];
		}
		if (!any) {
			tally(&c->tally[JC_UNEXPLAINED], ticks);
			*causes = 1u << JC_UNEXPLAINED;
		}
		c->pending = 0;
		c->pending_ticks = 0;
	}
	hold_pending(c);
	c->reads++;
	c->tat = ((int64_t)(c->tat - now) > 0 ? c->tat : now) + c->interval_ticks;
	done = tsc_rdtsc_ordered();
	c->read_ticks += done - now;
	keep_read(c, done - now);
	*end = done;
	return true;
}

bool jc_gap_in_read(struct jc_counters *c, uint64_t start, uint64_t end, uint64_t threshold)
{
	uint64_t sorted[JC_READS_KEPT], ticks = end - start;
	unsigned int n = c->read_kept;

	/* The cheapest first: the median only for the rare read above it. */
	if (!n || ticks <= c->read_min + threshold)
		return false;
	/* Insertion sort: fifteen numbers, after a read of the counters. */
	for (unsigned int i = 0; i < n; i++) {
		unsigned int j = i;

		for (; j > 0 && sorted[j - 1] > c->read_recent[i]; j--)
			sorted[j] = sorted[j - 1];
		sorted[j] = c->read_recent[i];
	}
	if (ticks <= sorted[n / 2] + threshold)
		return false;
	c->held++;
	c->held_ticks += ticks;
	return true;
}

void jc_finish(struct jc_counters *c)
{
	c->smis = c->smi >= 0 ? read_smi(c, c->smi_start) - c->smi_start : 0;
	hold_pending(c);
}

void jc_close(struct jc_counters *c)
{
	/* Closing the leader leaves the members open: close them all. */
	for (unsigned int i = 0; c->group >= 0 && i < c->nr; i++)
		close(c->fd[i]);
	if (c->smi >= 0)
		close(c->smi);
	c->group = -1;
	c->smi = -1;
}

bool jc_reported(const struct jc_counters *c, enum jc_cause cause)
{
	return c->counted[cause] || (cause == JC_UNEXPLAINED && c->reads);
}

const char *jc_missing(const struct jc_counters *c, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (int k = 0; k < JC_UNEXPLAINED; k++) {
		bool first = true;

		if (c->counted[k] || !c->why[k][0])
			continue;
		/* Causes with the same reason once, the reason after them. */
		for (int j = 0; j < k; j++)
			if (!c->counted[j] && !strcmp(c->why[j], c->why[k]))
				first = false;
		if (!first)
			continue;
		len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s%s",
					len ? "; " : "", jc_name[k]);
		for (int j = k + 1; j < JC_UNEXPLAINED; j++)
			if (!c->counted[j] && !strcmp(c->why[j], c->why[k]))
				len += (size_t)snprintf(buf + len, len < size ? size - len : 0,
							", %s", jc_name[j]);
		len += (size_t)snprintf(buf + len, len < size ? size - len : 0, ": %s",
					c->why[k]);
	}
	return buf;
}
