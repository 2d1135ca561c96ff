// SPDX-License-Identifier: GPL-2.0
/*
 * Measure every online CPU against the reference and publish the results.
 *
 * One work item does all measuring, so measurements never overlap: a load,
 * a CPU coming online and any number of writes to 'remeasure' queue the same
 * work, and a request made while it runs queues one more run after it.  It
 * holds cpus_read_lock() while it measures, so CPUs cannot go away under a
 * measurement; a CPU that is offlined waits for it to end and is then marked
 * unmeasured by tscfk_cpu_offline().
 */
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/minmax.h>
#include <linux/percpu.h>
#include <linux/timekeeping.h>
#include <linux/workqueue.h>

#include "tscfk.h"

/* Guards the published results and tscfk_summary, never held while measuring. */
DEFINE_MUTEX(tscfk_results_lock);
struct tscfk_summary tscfk_summary = { .reference_cpu = -1 };

/* Published results, under tscfk_results_lock. */
static DEFINE_PER_CPU(struct tscfk_cpu_result, published);
/* The measurement in progress, touched only by measure_work. */
static DEFINE_PER_CPU(struct tscfk_cpu_result, fresh);

static void measure_all(struct work_struct *work);
static DECLARE_WORK(measure_work, measure_all);

struct tscfk_cpu_result *tscfk_cpu_result(unsigned int cpu)
{
	lockdep_assert_held(&tscfk_results_lock);
	return per_cpu_ptr(&published, cpu);
}

static unsigned int pick_reference(void)
{
	int ref = tscfk_reference_cpu;

	if (ref < 0)
		return cpumask_first(cpu_online_mask);
	if (cpu_online(ref))
		return ref;
	pr_warn("reference_cpu=%d is offline, measuring against cpu%u\n",
		ref, cpumask_first(cpu_online_mask));
	return cpumask_first(cpu_online_mask);
}

static void measure_one(unsigned int ref, unsigned int cpu,
			struct tscfk_cpu_result *r, u64 *max_irqoff_ns)
{
	struct tscfk_pair pair = { .ref_cpu = ref, .target_cpu = cpu };

	tscfk_pingpong(&pair);
	*max_irqoff_ns = max(*max_irqoff_ns, pair.max_irqoff_ns);
	if (!pair.ok) {
		pr_warn("cpu%u: fewer than %u probes answered within %u ms, left unmeasured\n",
			cpu, TSCFK_OFFSET_MIN_ROUNDS, tscfk_timeout_ms);
		return;
	}
	r->status = TSCFK_MEASURED;
	r->offset = pair.result;
}

static void measure_all(struct work_struct *work)
{
	u64 max_irqoff_ns = 0;
	unsigned int cpu, ref;

	cpus_read_lock();
	ref = pick_reference();
	for_each_possible_cpu(cpu) {
		struct tscfk_cpu_result *r = per_cpu_ptr(&fresh, cpu);

		*r = (struct tscfk_cpu_result){ .status = TSCFK_UNMEASURED };
		if (cpu == ref) {
			r->status = TSCFK_REFERENCE;
			r->offset.consistent = true;
			r->offset.monotonic = true;
		} else if (cpu_online(cpu)) {
			measure_one(ref, cpu, r, &max_irqoff_ns);
		}
	}

	mutex_lock(&tscfk_results_lock);
	for_each_possible_cpu(cpu) {
		struct tscfk_cpu_result *to = per_cpu_ptr(&published, cpu);

		*to = *per_cpu_ptr(&fresh, cpu);
	}
	tscfk_summary.generation++;
	tscfk_summary.measured_ns = ktime_get_ns();
	tscfk_summary.max_irqoff_ns = max_irqoff_ns;
	tscfk_summary.reference_cpu = ref;
	mutex_unlock(&tscfk_results_lock);
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

void tscfk_measure_queue(void)
{
	queue_work(system_unbound_wq, &measure_work);
}

/* Return once a measurement that started after this call has ended. */
void tscfk_measure_sync(void)
{
	tscfk_measure_queue();
	flush_work(&measure_work);
}

void tscfk_measure_cancel(void)
{
	cancel_work_sync(&measure_work);
}

/* cpuhp callbacks: sleepable, called with the hotplug lock held. */
int tscfk_cpu_online(unsigned int cpu)
{
	tscfk_measure_queue();
	return 0;
}

int tscfk_cpu_offline(unsigned int cpu)
{
	bool was_reference;

	mutex_lock(&tscfk_results_lock);
	tscfk_cpu_result(cpu)->status = TSCFK_UNMEASURED;
	was_reference = tscfk_summary.reference_cpu == (int)cpu;
	mutex_unlock(&tscfk_results_lock);

	if (cpu == 0)
		pr_info("cpu0 going offline: cpu0/tsc_freq_khz stays, tsc_khz is system-wide\n");
	/* The others' offsets are relative to it: measure against another. */
	if (was_reference)
		tscfk_measure_queue();
	return 0;
}
