// SPDX-License-Identifier: GPL-2.0
/*
 * Measure the online CPUs against the reference and publish the results.
 *
 * One work item does all measuring, so measurements never overlap.  It
 * measures what it was asked to: every CPU after a load, a write to
 * 'remeasure' or the loss of the reference (the others' offsets are
 * relative to it), and only the CPUs that came online otherwise.  A request
 * made while it runs queues one more run after it.
 *
 * Nothing waits long for it.  Every pair is bounded (pingpong.c) and the
 * CPUs that never answer share one timeout.  The pairs are measured one at
 * a time, each under its own cpus_read_lock(): CPU hotplug, and so suspend,
 * waits for one pair at most, and rmmod stops a measurement between two
 * pairs.  Results are published when the measurement ends, but not for the
 * CPUs that went offline or came online meanwhile: the hotplug callbacks
 * published those at once, and queued another run for them.
 *
 * CPUs outside the kernel's housekeeping set (isolcpus=, nohz_full=, an
 * isolated cpuset partition) are left alone unless measure_isolated is set:
 * the people who isolate a CPU want nothing else to run on it.
 */
#include <linux/bitops.h>
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/minmax.h>
#include <linux/percpu.h>
#include <linux/sched/isolation.h>
#include <linux/spinlock.h>
#include <linux/timekeeping.h>
#include <linux/workqueue.h>
#include <asm/cpufeature.h>
#include <asm/msr.h>

#include "compat.h"
#include "tscfk.h"

/* Guards the published results and tscfk_summary, never held while measuring. */
DEFINE_MUTEX(tscfk_results_lock);
struct tscfk_summary tscfk_summary = { .reference_cpu = -1 };
static DEFINE_PER_CPU(struct tscfk_cpu_result, published);
/* CPUs whose state hotplug published since the measurement began. */
static struct cpumask hotplugged;

/* What the next run of measure_work is to measure. */
static DEFINE_SPINLOCK(request_lock);
static struct cpumask requested;	/* CPUs that came online */
static bool request_all;

/* Set once, when the module goes: measure no more pairs. */
static bool stopping;

/* measure_work's own: the measurement in progress, and the causes logged. */
static DEFINE_PER_CPU(struct tscfk_cpu_result, fresh);
static DEFINE_PER_CPU(struct tscfk_pp *, pending);
static DEFINE_PER_CPU(unsigned long, why_logged);
static DEFINE_PER_CPU(bool, adjust_logged);

struct measurement {
	unsigned int ref;
	bool ref_unresponsive;	/* its side did not start: skip the rest */
	bool ref_have_adjust;
	s64 ref_adjust;
	u64 max_irqoff_ns;
};

static void measure_requested(struct work_struct *work);
static DECLARE_WORK(measure_work, measure_requested);
static void request(int cpu);

static const char * const why_names[] = {
	[TSCFK_WHY_PENDING] = "pending",
	[TSCFK_WHY_OFFLINE] = "offline",
	[TSCFK_WHY_ISOLATED] = "isolated",
	[TSCFK_WHY_NOT_STARTED] = "not_started",
	[TSCFK_WHY_REFERENCE_NOT_STARTED] = "reference_not_started",
	[TSCFK_WHY_STALLED] = "stalled",
	[TSCFK_WHY_TOO_FEW_PROBES] = "too_few_probes",
	[TSCFK_WHY_WRONG_CPU] = "wrong_cpu",
	[TSCFK_WHY_NO_MEMORY] = "no_memory",
	[TSCFK_WHY_NONE] = "none",
};

const char *tscfk_why_name(enum tscfk_why why)
{
	return why < ARRAY_SIZE(why_names) ? why_names[why] : "unknown";
}

struct tscfk_cpu_result *tscfk_cpu_result(unsigned int cpu)
{
	lockdep_assert_held(&tscfk_results_lock);
	return per_cpu_ptr(&published, cpu);
}

static bool cpu_wanted(unsigned int cpu)
{
	return tscfk_measure_isolated || !cpu_is_isolated(cpu);
}

/* The parameter if online, else the first online CPU we may disturb. */
static unsigned int pick_reference(void)
{
	static bool warned;
	int ref = tscfk_reference_cpu;
	unsigned int cpu;

	if (ref >= 0 && cpu_online(ref)) {
		warned = false;
		return ref;
	}
	for_each_online_cpu(cpu)
		if (!cpu_is_isolated(cpu))
			break;
	if (cpu >= nr_cpu_ids)
		cpu = cpumask_first(cpu_online_mask);
	if (ref >= 0 && !warned) {
		pr_warn("reference_cpu=%d is offline, measuring against cpu%u until it is back\n",
			ref, cpu);
		warned = true;
	}
	return cpu;
}

/* Say once per CPU and cause why it is unmeasured, until it is measured. */
static void log_why(unsigned int cpu, enum tscfk_why why)
{
	unsigned long *logged = per_cpu_ptr(&why_logged, cpu);

	if (why == TSCFK_WHY_NONE) {
		*logged = 0;
		return;
	}
	if (why == TSCFK_WHY_OFFLINE || why == TSCFK_WHY_PENDING ||
	    __test_and_set_bit(why, logged))
		return;
	switch (why) {
	case TSCFK_WHY_ISOLATED:
		pr_info("cpu%u is isolated: not measured (measure_isolated=1 measures it)\n",
			cpu);
		break;
	case TSCFK_WHY_NOT_STARTED:
	case TSCFK_WHY_REFERENCE_NOT_STARTED:
		pr_warn("cpu%u: %s side did not run within timeout_ms=%u (a real-time task may own the CPU), left unmeasured\n",
			cpu, why == TSCFK_WHY_NOT_STARTED ? "its" : "the reference's",
			tscfk_timeout_ms);
		break;
	case TSCFK_WHY_TOO_FEW_PROBES:
		pr_warn("cpu%u: fewer than %u probes answered within timeout_ms=%u, left unmeasured\n",
			cpu, TSCFK_OFFSET_MIN_ROUNDS, tscfk_timeout_ms);
		break;
	default:
		pr_warn("cpu%u: left unmeasured: %s\n", cpu, tscfk_why_name(why));
		break;
	}
}

/* IA32_TSC_ADJUST of the reference: an IPI to it, a CPU we use anyway. */
static void read_ref_adjust(struct measurement *m)
{
	u64 v;

	if (boot_cpu_has(X86_FEATURE_TSC_ADJUST) &&
	    !rdmsrl_safe_on_cpu(m->ref, MSR_IA32_TSC_ADJUST, &v)) {
		m->ref_adjust = (s64)v;
		m->ref_have_adjust = true;
	}
}

/*
 * Take the request, and queue the targets' sides of every CPU it names:
 * they all get the same time to start.  Every CPU if the reference is not
 * the published one.  Called under cpus_read_lock(), so no hotplug
 * callback runs between clearing 'hotplugged' and starting the pairs.
 */
static void begin(struct cpumask *todo, struct measurement *m)
{
	unsigned long start_by = jiffies + msecs_to_jiffies(tscfk_timeout_ms);
	bool all;
	unsigned int cpu;

	spin_lock(&request_lock);
	all = request_all;
	request_all = false;
	cpumask_copy(todo, &requested);
	cpumask_clear(&requested);
	spin_unlock(&request_lock);

	mutex_lock(&tscfk_results_lock);
	cpumask_clear(&hotplugged);
	if (tscfk_summary.reference_cpu != (int)m->ref)
		all = true;
	mutex_unlock(&tscfk_results_lock);
	if (all)
		cpumask_copy(todo, cpu_possible_mask);

	read_ref_adjust(m);
	for_each_cpu(cpu, todo) {
		struct tscfk_pp *pp = NULL;

		if (cpu != m->ref && cpu_online(cpu) && cpu_wanted(cpu))
			pp = tscfk_pp_start(m->ref, cpu, start_by) ?: ERR_PTR(-ENOMEM);
		*per_cpu_ptr(&pending, cpu) = pp;
	}
}

/*
 * Say once per CPU when its TSC_ADJUST and the measurement disagree: then
 * the MSR does not explain the offset (see tscfk_offset_adjust_agrees()).
 * Only within the reference's package: the TSCs of two packages need not
 * have started together, and there a disagreement is no news.
 */
static void check_adjust(const struct measurement *m, unsigned int cpu,
			 const struct tscfk_cpu_result *r)
{
	bool *logged = per_cpu_ptr(&adjust_logged, cpu);
	s64 want = (s64)((u64)r->adjust - (u64)m->ref_adjust);

	if (!r->have_adjust || !m->ref_have_adjust || *logged ||
	    topology_physical_package_id(cpu) !=
	    topology_physical_package_id(m->ref) ||
	    tscfk_offset_adjust_agrees(&r->offset, r->adjust, m->ref_adjust))
		return;
	*logged = true;
	pr_info("cpu%u: TSC_ADJUST %lld against cpu%u's %lld says offset %lld, measured [%lld, %lld]: the TSCs were not started together\n",
		cpu, r->adjust, m->ref, m->ref_adjust, want, r->offset.min,
		r->offset.max);
}

static void measure_pair(struct measurement *m, unsigned int cpu,
			 struct tscfk_pp *pp, struct tscfk_cpu_result *r)
{
	struct tscfk_pair pair;

	tscfk_pp_measure(pp, &pair);
	m->max_irqoff_ns = max(m->max_irqoff_ns, pair.max_irqoff_ns);
	if (pair.why == TSCFK_WHY_REFERENCE_NOT_STARTED)
		m->ref_unresponsive = true;
	r->why = pair.why;
	if (pair.why != TSCFK_WHY_NONE)
		return;
	r->status = TSCFK_MEASURED;
	r->offset = pair.result;
	r->clean_rounds = pair.clean_rounds;
	r->have_adjust = pair.have_adjust;
	r->adjust = pair.adjust;
	check_adjust(m, cpu, r);
}

/* One CPU's fresh result.  Under cpus_read_lock(): no CPU comes or goes. */
static void judge_cpu(struct measurement *m, unsigned int cpu)
{
	struct tscfk_cpu_result *r = per_cpu_ptr(&fresh, cpu);
	struct tscfk_pp *pp = *per_cpu_ptr(&pending, cpu);

	*per_cpu_ptr(&pending, cpu) = NULL;
	*r = (struct tscfk_cpu_result){ .status = TSCFK_UNMEASURED };
	if (cpu == m->ref) {
		r->status = TSCFK_REFERENCE;
		r->why = TSCFK_WHY_NONE;
		r->offset.consistent = true;
		r->offset.monotonic = true;
		r->have_adjust = m->ref_have_adjust;
		r->adjust = m->ref_adjust;
	} else if (!cpu_online(cpu)) {
		r->why = TSCFK_WHY_OFFLINE;
	} else if (!cpu_wanted(cpu)) {
		r->why = TSCFK_WHY_ISOLATED;
	} else if (IS_ERR(pp)) {
		r->why = TSCFK_WHY_NO_MEMORY;
		pp = NULL;
	} else if (!pp || READ_ONCE(stopping) || !cpu_online(m->ref)) {
		/* Came online since, or this measurement is to be dropped. */
		r->why = TSCFK_WHY_PENDING;
	} else if (m->ref_unresponsive) {
		r->why = TSCFK_WHY_REFERENCE_NOT_STARTED;
	} else {
		measure_pair(m, cpu, pp, r);
		pp = NULL;
	}
	if (!IS_ERR_OR_NULL(pp))
		tscfk_pp_drop(pp);
	log_why(cpu, r->why);
}

/*
 * Publish, but not the CPUs that hotplug published since the measurement
 * began, nor a measurement against a reference that went offline: that
 * one asks for another, against a new reference.  The offline callback
 * asks too, but only for the published reference, which this one need
 * not be (the first measurement has none).
 */
static void publish(const struct cpumask *todo, const struct measurement *m)
{
	unsigned int cpu;

	if (READ_ONCE(stopping))
		return;
	if (!cpu_online(m->ref)) {
		request(-1);
		return;
	}
	mutex_lock(&tscfk_results_lock);
	for_each_cpu(cpu, todo)
		if (!cpumask_test_cpu(cpu, &hotplugged))
			*per_cpu_ptr(&published, cpu) = *per_cpu_ptr(&fresh, cpu);
	tscfk_summary.generation++;
	tscfk_summary.measured_ns = ktime_get_ns();
	tscfk_summary.max_irqoff_ns = m->max_irqoff_ns;
	tscfk_summary.reference_cpu = m->ref;
	mutex_unlock(&tscfk_results_lock);
}

static void measure_requested(struct work_struct *work)
{
	static struct cpumask todo;	/* measure_work's alone */
	struct measurement m = { };
	unsigned int cpu;

	cpus_read_lock();
	m.ref = pick_reference();
	begin(&todo, &m);
	cpus_read_unlock();

	for_each_cpu(cpu, &todo) {
		cpus_read_lock();
		judge_cpu(&m, cpu);
		cpus_read_unlock();
	}

	cpus_read_lock();
	publish(&todo, &m);
	cpus_read_unlock();
}

/*
 * Skew over the online CPUs, from the published results.  Returns true when
 * every online CPU has a result, so that the verdict covers them all.
 */
bool tscfk_summarise(struct tscfk_skew *skew)
{
	bool all = true;
	unsigned int cpu;

	tscfk_skew_init(skew);
	mutex_lock(&tscfk_results_lock);
	for_each_online_cpu(cpu) {
		const struct tscfk_cpu_result *r = tscfk_cpu_result(cpu);

		if (r->status == TSCFK_UNMEASURED)
			all = false;
		else
			tscfk_skew_add(skew, &r->offset);
	}
	mutex_unlock(&tscfk_results_lock);
	return all;
}

static void request(int cpu)
{
	/* Nothing new once rmmod began: it waits for the run under way only. */
	if (READ_ONCE(stopping))
		return;
	spin_lock(&request_lock);
	if (cpu < 0)
		request_all = true;
	else
		cpumask_set_cpu(cpu, &requested);
	spin_unlock(&request_lock);
	queue_work(system_unbound_wq, &measure_work);
}

/* Return once a measurement of every CPU that started after this call has ended. */
void tscfk_measure_all_sync(void)
{
	request(-1);
	flush_work(&measure_work);
}

/*
 * First thing on unload: the run under way skips its remaining pairs, and
 * nothing requests another, so that whoever waits for it (a remeasure
 * writer, and so sysfs removal) waits for one pair at most.
 */
void tscfk_measure_stop(void)
{
	WRITE_ONCE(stopping, true);
}

/* Called when nothing can request a measurement any more: one pair at most. */
void tscfk_measure_cancel(void)
{
	tscfk_measure_stop();
	cancel_work_sync(&measure_work);
}

/* Publish one CPU's new state at once: a reader must never see it stale. */
static void publish_hotplug(unsigned int cpu, enum tscfk_why why)
{
	mutex_lock(&tscfk_results_lock);
	*tscfk_cpu_result(cpu) = (struct tscfk_cpu_result){
		.status = TSCFK_UNMEASURED, .why = why,
	};
	cpumask_set_cpu(cpu, &hotplugged);
	tscfk_summary.generation++;
	mutex_unlock(&tscfk_results_lock);
}

/* cpuhp callbacks: sleepable, called with the hotplug lock held. */
int tscfk_cpu_online(unsigned int cpu)
{
	publish_hotplug(cpu, TSCFK_WHY_PENDING);
	request(cpu);
	return 0;
}

int tscfk_cpu_offline(unsigned int cpu)
{
	bool was_reference;

	publish_hotplug(cpu, TSCFK_WHY_OFFLINE);
	mutex_lock(&tscfk_results_lock);
	was_reference = tscfk_summary.reference_cpu == (int)cpu;
	mutex_unlock(&tscfk_results_lock);

	if (cpu == 0)
		pr_info("cpu0 going offline: the tsc_freq_khz files stay, tsc_khz is system-wide\n");
	/* The others' offsets are relative to it: measure against another. */
	if (was_reference)
		request(-1);
	return 0;
}
