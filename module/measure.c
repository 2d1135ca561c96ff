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
 * a time, with no hotplug lock held while they are: cpus_read_lock() is
 * only taken for moments, to pick the reference and judge a CPU, so that
 * CPU hotplug, and behind it every new reader of the hotplug lock (a
 * static key's flip, a module's load), never waits for a measurement.  A
 * CPU may go offline during its pair's turn: its side's next
 * interrupts-off window sees that it runs elsewhere, and a CPU that
 * hotplug touched during the measurement is not published from it.
 * rmmod is refused while a side's thread holds the module (pingpong.c),
 * and once it began, the run under way skips its remaining pairs.  A
 * writer of remeasure, who waits for the whole measurement, waits
 * interruptibly.  Results are published when the measurement ends, but
 * not for the CPUs that went offline or came online meanwhile: the
 * hotplug callbacks published those at once, and queued another run for
 * them.
 *
 * CPUs outside the kernel's housekeeping set (isolcpus=, nohz_full=, an
 * isolated cpuset partition from 6.7 on) are left alone unless
 * measure_isolated is set: the people who isolate a CPU want nothing else
 * to run on it.  That holds for the reference too, which spins as much as
 * any target: if every online CPU is isolated, nothing is measured.
 */
#include <linux/bitops.h>
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/minmax.h>
#include <linux/mutex.h>
#include <linux/preempt.h>
#include <linux/sched/isolation.h>
#include <linux/seqlock.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/timekeeping.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <asm/cpufeature.h>
#include <asm/msr.h>

#include "compat.h"
#include "tscfk.h"

/*
 * The published results.  Their writers (measure_work and the hotplug
 * callbacks) take publish_lock, never held while measuring; readers (the
 * sysfs files, any user's) take no lock at all and retry on results_seq,
 * so that no reader can ever hold up a hotplug callback, which publishes
 * under the hotplug lock.  Not a seqcount_mutex_t: on PREEMPT_RT its
 * readers take the mutex when they meet a writer.  Instead the writers
 * keep preemption off for the copy, which no reader can lengthen, and
 * which holds only the CPUs whose result changed: after a measurement of
 * all, those with a result and those whose reason changed, not every
 * possible CPU.  (Struct padding can only make a result look changed.)
 */
static DEFINE_MUTEX(publish_lock);
static seqcount_t results_seq = SEQCNT_ZERO(results_seq);
static struct tscfk_summary summary = { .reference_cpu = -1 };
static struct tscfk_cpu_result *published;	/* nr_cpu_ids of them */
/* CPUs whose state hotplug published since the measurement began. */
static struct cpumask hotplugged;
/* publish()'s own, under publish_lock: the CPUs to write. */
static struct cpumask changed;

/* What the next run of measure_work is to measure. */
static DEFINE_SPINLOCK(request_lock);
static struct cpumask requested;	/* CPUs that came online */
static bool request_all;

/*
 * Requests are taken from tscfk_measure_start() to tscfk_measure_stop():
 * nothing is measured before every step of the load that can fail is
 * done, and no more pairs once rmmod began.
 */
static bool accepting;

/*
 * Runs of measure_work, numbered as they take the request (under
 * request_lock) and as they end: a writer of remeasure waits for the run
 * after the one that has taken the last request.
 */
static unsigned long runs_taken, runs_ended;
static DECLARE_WAIT_QUEUE_HEAD(runs_wq);

/* measure_work's own: the measurement in progress, and the causes logged. */
struct cpu_work {
	struct tscfk_cpu_result fresh;
	struct tscfk_pp *pending;	/* the pair queued by begin() */
	unsigned long why_logged;	/* bit per enum tscfk_why */
	bool adjust_logged;
};

static struct cpu_work *cpu_work;	/* nr_cpu_ids of them */
static struct cpumask isolated_unsaid;	/* said in one line, once each */
static bool ref_unresponsive_said;

struct measurement {
	unsigned long run;	/* its number in runs_taken */
	u64 started_ns;		/* CLOCK_MONOTONIC before any pair began */
	int ref;		/* -1: none, every online CPU is isolated */
	unsigned long start_by;	/* jiffies: the targets' sides must have started */
	bool ref_unresponsive;	/* its side did not start: skip the rest */
	bool ref_lost;		/* hotplugged or isolated since: skip the rest */
	bool ref_have_adjust;
	s64 ref_adjust;
	u64 max_irqoff_ns;
	u64 ref_irqoff_ns;
};

static void measure_requested(struct work_struct *work);
static DECLARE_WORK(measure_work, measure_requested);
static bool request(int cpu, unsigned long *run);

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

/* Open and close a change to the published results, under publish_lock. */
static void publish_begin(void)
{
	lockdep_assert_held(&publish_lock);
	preempt_disable();
	write_seqcount_begin(&results_seq);
}

static void publish_end(void)
{
	write_seqcount_end(&results_seq);
	preempt_enable();
}

/* Copy one CPU's published result; false if it has none. */
bool tscfk_read_result(unsigned int cpu, struct tscfk_cpu_result *r)
{
	unsigned int seq;

	do {
		seq = read_seqcount_begin(&results_seq);
		*r = published[cpu];
	} while (read_seqcount_retry(&results_seq, seq));
	return r->status != TSCFK_UNMEASURED;
}

/* Copy the summary of the published results. */
void tscfk_read_summary(struct tscfk_summary *s)
{
	unsigned int seq;

	do {
		seq = read_seqcount_begin(&results_seq);
		*s = summary;
	} while (read_seqcount_retry(&results_seq, seq));
}

static bool cpu_wanted(unsigned int cpu)
{
	return tscfk_measure_isolated || !tscfk_cpu_isolated(cpu);
}

/*
 * The parameter if online and not isolated (main.c refused an isolated one
 * at load, but a cpuset may isolate it since), else the first online CPU
 * we may disturb; -1 if there is none.  Under cpus_read_lock().
 */
static int pick_reference(void)
{
	static bool warned, none_said;
	int ref = tscfk_reference_cpu;
	unsigned int cpu;

	if (ref >= 0 && cpu_online(ref) && cpu_wanted(ref)) {
		warned = false;
		none_said = false;
		return ref;
	}
	for_each_online_cpu(cpu)
		if (cpu_wanted(cpu))
			break;
	if (cpu >= nr_cpu_ids) {
		if (!none_said)
			pr_info("every online CPU is isolated: nothing measured (measure_isolated=1 measures them)\n");
		none_said = true;
		return -1;
	}
	none_said = false;
	if (ref >= 0 && !warned) {
		pr_warn("reference_cpu=%d is %s, measuring against cpu%u until it is back\n",
			ref, cpu_online(ref) ? "isolated" : "offline", cpu);
		warned = true;
	}
	return cpu;
}

/*
 * Say once per CPU and cause why it is unmeasured, until it is measured.
 * Causes shared by many CPUs are said once for all: the isolated CPUs in
 * one line at the end of the measurement, an unresponsive reference once
 * (measure_pair()).
 */
static void log_why(unsigned int cpu, enum tscfk_why why)
{
	unsigned long *logged = &cpu_work[cpu].why_logged;

	if (why == TSCFK_WHY_NONE) {
		*logged = 0;
		return;
	}
	if (why == TSCFK_WHY_OFFLINE || why == TSCFK_WHY_PENDING ||
	    why == TSCFK_WHY_REFERENCE_NOT_STARTED ||
	    __test_and_set_bit(why, logged))
		return;
	switch (why) {
	case TSCFK_WHY_ISOLATED:
		cpumask_set_cpu(cpu, &isolated_unsaid);
		break;
	case TSCFK_WHY_NOT_STARTED:
		pr_warn("cpu%u: its side did not run within timeout_ms=%u (a real-time task may own the CPU), left unmeasured\n",
			cpu, tscfk_timeout_ms);
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

	if (m->ref >= 0 && boot_cpu_has(X86_FEATURE_TSC_ADJUST) &&
	    !rdmsrq_safe_on_cpu(m->ref, MSR_IA32_TSC_ADJUST, &v)) {
		m->ref_adjust = (s64)v;
		m->ref_have_adjust = true;
	}
}

/*
 * Take the request: every CPU if the reference is not the published one.
 * Called under cpus_read_lock(), so that no hotplug callback runs between
 * clearing 'hotplugged' and picking the reference.  False if there is
 * nothing to measure: a hotplug callback queued this run while the one
 * before waited for the hotplug lock, and that one took the request.
 */
static bool begin(struct cpumask *todo, struct measurement *m)
{
	bool all;

	spin_lock(&request_lock);
	all = request_all;
	request_all = false;
	cpumask_copy(todo, &requested);
	cpumask_clear(&requested);
	m->run = ++runs_taken;
	spin_unlock(&request_lock);

	mutex_lock(&publish_lock);
	cpumask_clear(&hotplugged);
	if (summary.reference_cpu != m->ref)
		all = true;
	mutex_unlock(&publish_lock);
	if (all)
		cpumask_copy(todo, cpu_possible_mask);
	if (cpumask_empty(todo))
		return false;
	read_ref_adjust(m);
	return true;
}

/*
 * Start the targets' sides of every CPU to measure: they all get the same
 * time to start, timeout_ms from the last one's creation (a round trip to
 * kthreadd each, which the load may stretch).  Outside the hotplug lock,
 * as starting a thread is no business of CPU hotplug's: a CPU that goes
 * away meanwhile is judged offline, or its side finds itself elsewhere;
 * one that comes has asked for another measurement.
 */
static void start_targets(const struct cpumask *todo, struct measurement *m)
{
	unsigned int cpu;

	for_each_cpu(cpu, todo) {
		struct tscfk_pp *pp = NULL;

		if (m->ref >= 0 && (int)cpu != m->ref && cpu_online(cpu) &&
		    cpu_wanted(cpu))
			pp = tscfk_pp_start(m->ref, cpu);
		cpu_work[cpu].pending = pp;
	}
	m->start_by = jiffies + msecs_to_jiffies(tscfk_timeout_ms);
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
	bool *logged = &cpu_work[cpu].adjust_logged;
	s64 want = (s64)((u64)r->adjust - (u64)m->ref_adjust);

	if (!r->have_adjust || !m->ref_have_adjust || *logged ||
	    topology_physical_package_id(cpu) !=
	    topology_physical_package_id(m->ref) ||
	    tscfk_offset_adjust_agrees(&r->offset, r->adjust, m->ref_adjust))
		return;
	*logged = true;
	pr_info("cpu%u: TSC_ADJUST %lld against cpu%d's %lld says offset %lld, measured [%lld, %lld]: the TSCs were not started together\n",
		cpu, r->adjust, m->ref, m->ref_adjust, want, r->offset.min,
		r->offset.max);
}

static void measure_pair(struct measurement *m, unsigned int cpu,
			 struct tscfk_pp *pp, struct tscfk_cpu_result *r)
{
	struct tscfk_pair pair;

	tscfk_pp_measure(pp, &pair);
	m->max_irqoff_ns = max(m->max_irqoff_ns, pair.max_irqoff_ns);
	m->ref_irqoff_ns += pair.ref_irqoff_ns;
	if (pair.why == TSCFK_WHY_REFERENCE_NOT_STARTED) {
		m->ref_unresponsive = true;
		if (!ref_unresponsive_said)
			pr_warn("cpu%d, the reference: its side did not run within timeout_ms=%u (a real-time task may own the CPU), the others left unmeasured\n",
				m->ref, tscfk_timeout_ms);
		ref_unresponsive_said = true;
	} else if (pair.why == TSCFK_WHY_NONE) {
		ref_unresponsive_said = false;
	}
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

/*
 * Did CPU hotplug take or bring back 'cpu' or the reference since the
 * measurement began?  Then its result is not published (publish()).
 */
static bool hotplug_touched(const struct measurement *m, unsigned int cpu)
{
	bool touched;

	mutex_lock(&publish_lock);
	touched = cpumask_test_cpu(cpu, &hotplugged) ||
		  (m->ref >= 0 && cpumask_test_cpu(m->ref, &hotplugged));
	mutex_unlock(&publish_lock);
	return touched;
}

/*
 * Has the reference gone since the measurement began: offline, or offline
 * and back (whatever is measured against it is dropped by publish()), or
 * isolated by a cpuset (not ours to disturb)?  Then the rest of the run is
 * not measured, and publish() asks for another, against a new reference.
 * The hotplug lock does not hold isolation still (cpuset writers take it
 * for reading too): this narrows the window to the moment between the
 * judgement and the start of the pair's reference side (tscfk_pp_measure()),
 * as cpu_wanted() does for the targets.  Under cpus_read_lock().
 */
static bool ref_lost(struct measurement *m)
{
	/* No reference, no pair prepared: judge_cpu() stops before this. */
	if (WARN_ON_ONCE(m->ref < 0))
		return true;
	if (!m->ref_lost && (!cpu_online(m->ref) || !cpu_wanted(m->ref) ||
			     hotplug_touched(m, m->ref)))
		m->ref_lost = true;
	return m->ref_lost;
}

/*
 * One CPU's fresh result: judged under cpus_read_lock(), for a moment, but
 * measured without it.  The caller releases the pair.
 */
static void judge_cpu(struct measurement *m, unsigned int cpu,
		      struct tscfk_pp *pp)
{
	struct tscfk_cpu_result *r = &cpu_work[cpu].fresh;
	bool turn = false;

	/*
	 * started_ns only where there is a result (tscfk_measured_since()
	 * reads no other): an unmeasured CPU's is the same from one run to
	 * the next, and publish() need not copy it again.
	 */
	*r = (struct tscfk_cpu_result){ .status = TSCFK_UNMEASURED };
	cpus_read_lock();
	if ((int)cpu == m->ref) {
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
	} else if (IS_ERR(pp) && PTR_ERR(pp) != -ENODEV) {
		/* No memory, or no thread could be started. */
		r->why = TSCFK_WHY_NO_MEMORY;
	} else if (IS_ERR_OR_NULL(pp) || !READ_ONCE(accepting) ||
		   ref_lost(m)) {
		/* Came online since, or this measurement is to be dropped. */
		r->why = TSCFK_WHY_PENDING;
	} else if (m->ref_unresponsive) {
		r->why = TSCFK_WHY_REFERENCE_NOT_STARTED;
	} else {
		turn = true;
	}
	cpus_read_unlock();

	if (turn) {
		measure_pair(m, cpu, pp, r);
		/* Not to be published: nothing to say of it either. */
		if (hotplug_touched(m, cpu)) {
			r->status = TSCFK_UNMEASURED;
			r->why = TSCFK_WHY_PENDING;
		}
	}
	if (r->status != TSCFK_UNMEASURED)
		r->started_ns = m->started_ns;
	log_why(cpu, r->why);
}

/*
 * Publish, but not the CPUs that hotplug published since the measurement
 * began, nor a measurement against a reference that hotplug took (or took
 * and brought back) or a cpuset isolated meanwhile (ref_lost()): that one
 * asks for another, against the reference of then, and returns false.
 * The offline callback asks too, but only for the published reference,
 * which this one need not be (the first measurement has none).  No hotplug
 * lock is needed: the callbacks publish under publish_lock too.
 */
static bool publish(const struct cpumask *todo, const struct measurement *m)
{
	unsigned int cpu;
	u64 now;

	if (!READ_ONCE(accepting))
		return true;
	mutex_lock(&publish_lock);
	if (m->ref_lost || (m->ref >= 0 && cpumask_test_cpu(m->ref, &hotplugged))) {
		mutex_unlock(&publish_lock);
		return !request(-1, NULL);
	}
	cpumask_clear(&changed);
	for_each_cpu(cpu, todo)
		if (!cpumask_test_cpu(cpu, &hotplugged) &&
		    memcmp(&published[cpu], &cpu_work[cpu].fresh, sizeof(*published)))
			cpumask_set_cpu(cpu, &changed);
	now = ktime_get_ns();
	publish_begin();
	for_each_cpu(cpu, &changed)
		published[cpu] = cpu_work[cpu].fresh;
	summary.generation++;
	summary.measured_ns = now;
	summary.max_irqoff_ns = m->max_irqoff_ns;
	summary.reference_irqoff_ns = m->ref_irqoff_ns;
	summary.reference_cpu = m->ref;
	publish_end();
	mutex_unlock(&publish_lock);
	return true;
}

/* Wake the writers of remeasure who wait for run number 'run'. */
static void end_run(unsigned long run)
{
	WRITE_ONCE(runs_ended, run);
	wake_up_all(&runs_wq);
}

static void measure_requested(struct work_struct *work)
{
	static struct cpumask todo;	/* measure_work's alone */
	struct measurement m = { };
	unsigned int cpu;
	bool busy;

	m.started_ns = ktime_get_ns();
	cpus_read_lock();
	m.ref = pick_reference();
	busy = begin(&todo, &m);
	cpus_read_unlock();
	/*
	 * Nothing measured is nothing to publish: generation, last_measured_ns
	 * and max_irqoff_ns stay those of the last measurement.  The run still
	 * ends, so that its number is never waited for in vain.
	 */
	if (!busy) {
		end_run(m.run);
		return;
	}
	start_targets(&todo, &m);

	for_each_cpu(cpu, &todo) {
		struct tscfk_pp *pp = cpu_work[cpu].pending;

		cpu_work[cpu].pending = NULL;
		if (!m.ref_unresponsive && !m.ref_lost)
			tscfk_pp_prepare(pp, m.start_by);
		judge_cpu(&m, cpu, pp);
		tscfk_pp_release(pp);
	}

	if (!cpumask_empty(&isolated_unsaid))
		pr_info("not measuring isolated CPUs %*pbl (measure_isolated=1 measures them)\n",
			cpumask_pr_args(&isolated_unsaid));
	cpumask_clear(&isolated_unsaid);

	/* Not a run whose reference went away: the next one serves its writers. */
	if (publish(&todo, &m))
		end_run(m.run);
}

/*
 * Skew over the online CPUs, from the published results, and in *s (unless
 * NULL) the summary of the same generation.  Returns true when every online
 * CPU has a result, so that the verdict covers them all.
 */
bool tscfk_summarise(struct tscfk_skew *skew, struct tscfk_summary *s)
{
	unsigned int seq, cpu;
	bool all;

	do {
		seq = read_seqcount_begin(&results_seq);
		if (s)
			*s = summary;
		all = true;
		tscfk_skew_init(skew);
		for_each_online_cpu(cpu) {
			/*
			 * KCSAN takes a seqcount reader's accesses as atomic
			 * for KCSAN_SEQLOCK_REGION_MAX of them only, fewer
			 * than this loop makes on a big machine: a copy torn
			 * by a writer is thrown away by the retry.
			 */
			struct tscfk_cpu_result r = data_race(published[cpu]);

			if (r.status == TSCFK_UNMEASURED)
				all = false;
			else
				tscfk_skew_add(skew, &r.offset);
		}
	} while (read_seqcount_retry(&results_seq, seq));
	return all;
}

/*
 * When the oldest measurement that the online CPUs' results come from
 * began: every offset behind max_skew_ticks was measured after it.  A
 * CPU that came online is measured alone, against offsets of the others
 * from before.  0 while no online CPU has a result.
 */
u64 tscfk_measured_since(void)
{
	unsigned int seq, cpu;
	u64 since;

	do {
		seq = read_seqcount_begin(&results_seq);
		since = U64_MAX;
		for_each_online_cpu(cpu) {
			/* As in tscfk_summarise(): the retry drops a torn copy. */
			struct tscfk_cpu_result r = data_race(published[cpu]);

			if (r.status != TSCFK_UNMEASURED)
				since = min(since, r.started_ns);
		}
	} while (read_seqcount_retry(&results_seq, seq));
	return since == U64_MAX ? 0 : since;
}

/*
 * Ask for a measurement of 'cpu', or of every CPU if it is -1, and say in
 * *run (unless NULL) the number of the run that will take the request.
 * measure_work only sleeps and waits, it never spins: an unbound worker
 * suits it, and a CPU may go offline under it without moving it.
 */
static bool request(int cpu, unsigned long *run)
{
	if (!READ_ONCE(accepting))
		return false;
	spin_lock(&request_lock);
	if (cpu < 0)
		request_all = true;
	else
		cpumask_set_cpu(cpu, &requested);
	if (run)
		*run = runs_taken + 1;
	spin_unlock(&request_lock);
	queue_work(system_dfl_wq, &measure_work);
	return true;
}

/* Has run number 'run' ended, or is the module unloading? */
static bool run_ended(unsigned long run)
{
	return (long)(READ_ONCE(runs_ended) - run) >= 0 || !READ_ONCE(accepting);
}

/*
 * Return 0 once a measurement of every CPU that started after this call
 * has ended.  The wait is interruptible, and ends at once if the module
 * begins to unload: it may be long, if many CPUs stall one after another
 * (pingpong.c).  -ERESTARTSYS on a signal: the write fails with EINTR, or
 * is made again, asking again, which concurrent writes may share; and the
 * freezer's wake-up restarts it unseen.  -EAGAIN while the module is
 * loading or unloading.
 */
int tscfk_measure_all_sync(void)
{
	unsigned long run;

	if (!request(-1, &run))
		return -EAGAIN;
	if (wait_event_interruptible(runs_wq, run_ended(run)))
		return -ERESTARTSYS;
	return READ_ONCE(accepting) ? 0 : -EAGAIN;
}

/* Before anything can read a result or request a measurement. */
int tscfk_measure_init(void)
{
	published = kcalloc(nr_cpu_ids, sizeof(*published), GFP_KERNEL);
	cpu_work = kcalloc(nr_cpu_ids, sizeof(*cpu_work), GFP_KERNEL);
	if (published && cpu_work)
		return 0;
	tscfk_measure_exit();
	return -ENOMEM;
}

/* Once nothing reads a result and measure_work is cancelled. */
void tscfk_measure_exit(void)
{
	kfree(cpu_work);
	kfree(published);
}

/* Once the load can no longer fail: take requests from now on. */
void tscfk_measure_start(void)
{
	WRITE_ONCE(accepting, true);
}

/*
 * First thing on unload: the run under way skips its remaining pairs, and
 * nothing requests another, so that whoever waits for it (a remeasure
 * writer, and so sysfs removal) waits for one pair at most.
 */
void tscfk_measure_stop(void)
{
	WRITE_ONCE(accepting, false);
	wake_up_all(&runs_wq);
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
	mutex_lock(&publish_lock);
	cpumask_set_cpu(cpu, &hotplugged);
	publish_begin();
	published[cpu] = (struct tscfk_cpu_result){
		.status = TSCFK_UNMEASURED, .why = why,
	};
	summary.generation++;
	publish_end();
	mutex_unlock(&publish_lock);
}

/* cpuhp callbacks: sleepable, called with the hotplug lock held. */
int tscfk_cpu_online(unsigned int cpu)
{
	publish_hotplug(cpu, TSCFK_WHY_PENDING);
	request(cpu, NULL);
	return 0;
}

int tscfk_cpu_offline(unsigned int cpu)
{
	bool was_reference;

	publish_hotplug(cpu, TSCFK_WHY_OFFLINE);
	mutex_lock(&publish_lock);
	was_reference = summary.reference_cpu == (int)cpu;
	mutex_unlock(&publish_lock);

	if (cpu == 0)
		pr_info("cpu0 going offline: the tsc_freq_khz files stay, tsc_khz is system-wide\n");
	/* The others' offsets are relative to it: measure against another. */
	if (was_reference)
		request(-1, NULL);
	return 0;
}
