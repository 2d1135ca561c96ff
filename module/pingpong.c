// SPDX-License-Identifier: GPL-2.0
/*
 * Measure one CPU's TSC offset against the reference CPU.
 *
 * Two work items, one bound to each CPU, bounce a cache line: the reference
 * reads t1 and sends round r, the target reads t when it sees r and answers
 * r with t, the reference reads t2 when it sees the answer.  The offset
 * (target - reference) then lies in [t - t2, t - t1]; common/tsc_offset.c
 * turns the brackets into an interval.
 *
 * Both sides spin with interrupts off, so that more probes are clean (not
 * stretched by an interrupt), but only in windows of at most irqoff_max_us
 * each, timed by each side on its own TSC.  The pair's deadline is in
 * jiffies, the same on every CPU: a CPU whose TSC is far from the
 * reference's must be measured, not cut short.  Correctness does not depend
 * on interrupts being off, nor on the windows overlapping: a probe that an
 * interrupt delays is merely wider, and the intersection keeps the narrow
 * ones.  The target keeps interrupts off only while rounds arrive.  Nothing
 * here takes a lock while spinning; the stores and loads on the shared line
 * are the only synchronisation, which keeps this valid on PREEMPT_RT.
 * Only these two CPUs take part.
 *
 * Bounded, whatever the CPUs are doing.  A work item may never start, for
 * example on a CPU that a SCHED_FIFO task owns with RT throttling off, or
 * start and then be preempted for good.  So:
 *
 *  - tscfk_pp_start() queues the target's side at once, for every CPU of a
 *    measurement, and the caller waits for it to start only until a
 *    deadline common to the whole measurement: CPUs that never run cost
 *    timeout_ms once, not once each.  A side that started sleeps (TASK_IDLE)
 *    until its pair's turn.
 *  - At its turn, tscfk_pp_measure() queues the reference's side and waits
 *    for both sides only until timeout_ms, plus slack for a last window.
 *  - A side the caller stops waiting for is cancelled if it has not run.
 *    A late side finds its pair stopped and ends at once: it belongs to
 *    its own struct tscfk_pp and can never take part in another pair.
 *  - A side holds the module from being queued to its last instruction,
 *    so that rmmod fails at once (EAGAIN) while one may still run, rather
 *    than wait in destroy_workqueue() for a side that a real-time task
 *    keeps off its CPU.  Holding it only once given up on would be too
 *    late: an rmmod already under way cannot be refused any more.
 *
 * The caller holds cpus_read_lock() during a pair's turn, so both CPUs stay
 * online while it runs, and the bound workers stay on them.  Before its
 * turn a target's CPU may go offline and back: every window checks, with
 * interrupts off, that it runs on its CPU.
 */
#include <linux/completion.h>
#include <linux/jiffies.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/timekeeping.h>
#include <linux/workqueue.h>
#include <asm/cpufeature.h>
#include <asm/msr.h>
#include <asm/tsc.h>

#include "tscfk.h"

/* Round numbers start at 1; 0 means "nothing sent yet". */
#define PP_STOP		U32_MAX

/*
 * How long after the deadline a side that started may take to notice it:
 * one interrupts-off window, and time to be scheduled back in after it.
 */
#define PP_SLACK_MS	100

/* Its own workqueue: see tscfk_pingpong_init(). */
static struct workqueue_struct *pp_wq;

struct pp_side {
	struct work_struct work;
	struct completion started;	/* it ran, on its CPU or not */
	struct completion done;		/* it has finished with the pair */
	unsigned int cpu;
	bool queued;
	bool wrong_cpu;			/* WRITE_ONCE, then 'started' or 'done' */
	bool have_adjust;		/* these before 'done' */
	s64 adjust;
	u64 irqoff_ns;
};

struct tscfk_pp {
	/* The only line both CPUs write: the reference ping, the target the rest. */
	struct {
		u32 ping;	/* round sent by the reference, or PP_STOP */
		u32 pong;	/* round answered by the target */
		u64 tsc;	/* the target's reading for round 'pong' */
	} line ____cacheline_aligned_in_smp;

	/* Set before 'go' is completed and the reference queued, but 'stop'. */
	unsigned long end ____cacheline_aligned_in_smp;	/* jiffies: both end */
	u64 budget_ticks;	/* longest interrupts-off window */
	bool stop;		/* the caller gave up waiting: end now */
	struct completion go;	/* the pair's turn, or the caller gave up */
	unsigned long start_by;	/* jiffies: the target must have started */

	/* The reference's, read by the caller once the reference is done. */
	struct tscfk_offset_est est;
	u32 *trips;		/* each probe's round trip t2 - t1, ticks */
	unsigned int nr_trips;

	struct pp_side ref, target;
	refcount_t refs;	/* the caller's and one per queued side */
};

static bool tsc_before(u64 now, u64 end)
{
	return (s64)(now - end) < 0;
}

static bool pp_going(struct tscfk_pp *pp)
{
	return !READ_ONCE(pp->stop) && time_before(jiffies, pp->end);
}

static void pp_put(struct tscfk_pp *pp)
{
	if (refcount_dec_and_test(&pp->refs)) {
		kvfree(pp->trips);
		kfree(pp);
	}
}

/*
 * One interrupts-off window.  It may end up to irqoff_max_us after the
 * pair's deadline: PP_SLACK_MS covers that.
 */
struct irqoff_window {
	unsigned long flags;
	u64 start_ns;
	u64 end_tsc;
};

/*
 * Open a window; false, with interrupts on again, if the side is not on
 * its CPU (it went offline and the worker was moved): then stop the pair.
 */
static bool window_open(struct tscfk_pp *pp, struct pp_side *side,
			struct irqoff_window *w)
{
	local_irq_save(w->flags);
	if (unlikely(raw_smp_processor_id() != side->cpu)) {
		local_irq_restore(w->flags);
		WRITE_ONCE(side->wrong_cpu, true);
		WRITE_ONCE(pp->stop, true);
		return false;
	}
	w->start_ns = ktime_get_mono_fast_ns();
	w->end_tsc = rdtsc() + pp->budget_ticks;
	return true;
}

/* Close the window, keep its length, and let the rest of the system in. */
static void window_close(struct irqoff_window *w, u64 *max_ns)
{
	u64 ns = ktime_get_mono_fast_ns() - w->start_ns;

	local_irq_restore(w->flags);
	*max_ns = max(*max_ns, ns);
	cond_resched();
}

/* Wait for 'c' until jiffies 'end' at the latest. */
static bool wait_until(struct completion *c, unsigned long end)
{
	long left = (long)(end - jiffies);

	if (left <= 0)
		return completion_done(c);
	return wait_for_completion_timeout(c, left);
}

/*
 * Begin a side: false if it must not run, because the caller gave up on it
 * or the workqueue ran it on another CPU (its own went offline).
 */
static bool pp_side_begin(struct tscfk_pp *pp, struct pp_side *side)
{
	bool go = !READ_ONCE(pp->stop);

	if (go && raw_smp_processor_id() != side->cpu) {
		WRITE_ONCE(side->wrong_cpu, true);
		go = false;
	}
	/* _all: a waiter that timed out may look again with completion_done(). */
	complete_all(&side->started);
	return go;
}

/*
 * Last thing a side does.  Once it drops the module, rmmod may begin: the
 * few instructions left of the work item are what destroy_workqueue()
 * still waits for.
 */
static void pp_side_end(struct tscfk_pp *pp, struct pp_side *side)
{
	complete_all(&side->done);
	pp_put(pp);
	module_put(THIS_MODULE);
}

/*
 * One probe; false if the target did not answer before 'end'.
 *
 * No fence is needed between reading t1 and sending the round: a store
 * becomes visible only after it retires, so after the RDTSC before it has
 * executed.  rdtsc_ordered() fences before its read, which is what t2
 * needs: it must not execute before the load that saw the answer.
 */
static bool pp_round(struct tscfk_pp *pp, u32 round, u64 end,
		     u64 *t1, u64 *t, u64 *t2)
{
	*t1 = rdtsc_ordered();
	WRITE_ONCE(pp->line.ping, round);
	/* Pairs with the release in pp_answer(): makes line.tsc visible. */
	while (smp_load_acquire(&pp->line.pong) != round) {
		if (!tsc_before(rdtsc(), end))
			return false;
		cpu_relax();
	}
	*t2 = rdtsc_ordered();
	*t = READ_ONCE(pp->line.tsc);
	return true;
}

static void pp_reference(struct work_struct *work)
{
	struct tscfk_pp *pp = container_of(work, struct tscfk_pp, ref.work);
	struct irqoff_window w;
	unsigned int done = 0, trips = 0;
	u32 round = 0;

	if (!pp_side_begin(pp, &pp->ref))
		goto out;
	while (done < tscfk_rounds && pp_going(pp)) {
		if (!window_open(pp, &pp->ref, &w))
			break;
		while (done < tscfk_rounds) {
			u64 t1, t, t2;

			if (!pp_round(pp, ++round, w.end_tsc, &t1, &t, &t2))
				break;
			tscfk_offset_add(&pp->est, t1, t, t2);
			/* Each probe the estimator took: clean <= rounds. */
			if (pp->est.rounds > trips)
				pp->trips[trips++] = min_t(u64, t2 - t1, U32_MAX);
			done++;
			if (!tsc_before(t2, w.end_tsc))
				break;
		}
		window_close(&w, &pp->ref.irqoff_ns);
	}
	pp->nr_trips = trips;
	/* The target needs nothing else from us: no ordering to add. */
	WRITE_ONCE(pp->line.ping, PP_STOP);
out:
	pp_side_end(pp, &pp->ref);
}

/*
 * Answer a round with the time it was seen: rdtsc_ordered() fences before
 * its read, so the read follows the load that saw the round.
 */
static void pp_answer(struct tscfk_pp *pp, u32 round)
{
	WRITE_ONCE(pp->line.tsc, rdtsc_ordered());
	/* line.tsc before the answer: pairs with the acquire in pp_round(). */
	smp_store_release(&pp->line.pong, round);
}

/* IA32_TSC_ADJUST of this CPU, where the CPU has one. */
static void read_tsc_adjust(struct pp_side *side)
{
	u64 v;

	if (boot_cpu_has(X86_FEATURE_TSC_ADJUST) &&
	    !rdmsrl_safe(MSR_IA32_TSC_ADJUST, &v)) {
		side->adjust = (s64)v;
		side->have_adjust = true;
	}
}

/*
 * Sleep until the pair's turn, then until the reference runs.  Then wait
 * for a round with interrupts on; once one comes, answer rounds with
 * interrupts off until the window ends, and wait again.  Interrupts are
 * thus off only while the reference is sending.
 */
static void pp_target(struct work_struct *work)
{
	struct tscfk_pp *pp = container_of(work, struct tscfk_pp, target.work);
	struct irqoff_window w;
	u32 seen = 0, ping;

	if (!pp_side_begin(pp, &pp->target))
		goto out;
	/* Idle, not a hung task: earlier pairs may take timeout_ms each. */
	wait_for_completion_state(&pp->go, TASK_IDLE);
	/* 'stop' first: a pair given up before its turn has no 'end'. */
	if (READ_ONCE(pp->stop) || !wait_until(&pp->ref.started, pp->end))
		goto out;
	read_tsc_adjust(&pp->target);
	while (pp_going(pp)) {
		ping = READ_ONCE(pp->line.ping);
		if (ping == PP_STOP)
			break;
		if (ping == seen) {
			cpu_relax();
			cond_resched();
			continue;
		}
		if (!window_open(pp, &pp->target, &w))
			break;
		do {
			if (ping != seen) {
				pp_answer(pp, ping);
				seen = ping;
			}
			cpu_relax();
			ping = READ_ONCE(pp->line.ping);
		} while (ping != PP_STOP && tsc_before(rdtsc(), w.end_tsc));
		window_close(&w, &pp->target.irqoff_ns);
	}
out:
	pp_side_end(pp, &pp->target);
}

static void pp_side_init(struct pp_side *side, unsigned int cpu,
			 work_func_t fn)
{
	INIT_WORK(&side->work, fn);
	init_completion(&side->started);
	init_completion(&side->done);
	side->cpu = cpu;
}

/*
 * Queue a side, holding the pair and the module for it.  Fails only once
 * rmmod began: its caller is then about to stop measuring anyway.
 */
static bool pp_queue(struct tscfk_pp *pp, struct pp_side *side)
{
	if (!try_module_get(THIS_MODULE))
		return false;
	refcount_inc(&pp->refs);
	side->queued = true;
	queue_work_on(side->cpu, pp_wq, &side->work);
	return true;
}

/*
 * Stop waiting for a queued side.  If it has not run it never will, and
 * what it held is dropped here.  If it has, it may still be running,
 * preempted for good: it drops them itself when it ends (pp_side_end()).
 */
static void pp_abandon(struct tscfk_pp *pp, struct pp_side *side)
{
	if (side->queued && cancel_work(&side->work)) {
		pp_put(pp);
		module_put(THIS_MODULE);
	}
}

/* End the pair now, whatever its sides are doing, and drop the caller's hold. */
static void pp_give_up(struct tscfk_pp *pp)
{
	WRITE_ONCE(pp->stop, true);
	complete_all(&pp->go);
	pp_abandon(pp, &pp->target);
	pp_abandon(pp, &pp->ref);
	pp_put(pp);
}

struct tscfk_pp *tscfk_pp_start(unsigned int ref_cpu, unsigned int target_cpu,
				unsigned long start_by)
{
	struct tscfk_pp *pp = kzalloc(sizeof(*pp), GFP_KERNEL);

	if (!pp)
		return ERR_PTR(-ENOMEM);
	pp_side_init(&pp->ref, ref_cpu, pp_reference);
	pp_side_init(&pp->target, target_cpu, pp_target);
	init_completion(&pp->go);
	pp->start_by = start_by;
	refcount_set(&pp->refs, 1);
	if (!pp_queue(pp, &pp->target)) {
		pp_put(pp);
		return ERR_PTR(-ENODEV);
	}
	return pp;
}

void tscfk_pp_drop(struct tscfk_pp *pp)
{
	pp_give_up(pp);
}

/* Wait, within the bound, for both sides; say why the pair has no result. */
static enum tscfk_why pp_wait(struct tscfk_pp *pp)
{
	unsigned long late = pp->end +
		msecs_to_jiffies(tscfk_irqoff_max_us / 1000 + PP_SLACK_MS);
	bool ref_started, ref_done, target_done;

	ref_started = wait_until(&pp->ref.started, pp->end);
	if (!ref_started)
		WRITE_ONCE(pp->stop, true);
	target_done = wait_until(&pp->target.done, late);
	ref_done = ref_started && wait_until(&pp->ref.done, late);

	if (READ_ONCE(pp->ref.wrong_cpu) || READ_ONCE(pp->target.wrong_cpu))
		return TSCFK_WHY_WRONG_CPU;
	if (!ref_started)
		return TSCFK_WHY_REFERENCE_NOT_STARTED;
	if (!target_done || !ref_done)
		return TSCFK_WHY_STALLED;
	return TSCFK_WHY_NONE;
}

/* Probes no slower than twice the fastest: not stretched by a disturbance. */
static unsigned int count_clean(const u32 *trips, unsigned int n)
{
	unsigned int i, clean = 0;
	u64 fastest = U32_MAX;

	for (i = 0; i < n; i++)
		fastest = min_t(u64, fastest, trips[i]);
	for (i = 0; i < n; i++)
		clean += trips[i] <= 2 * fastest;
	return clean;
}

void tscfk_pp_measure(struct tscfk_pp *pp, struct tscfk_pair *pair)
{
	u64 khz = tsc_khz;

	*pair = (struct tscfk_pair){ .why = TSCFK_WHY_NONE };
	if (!wait_until(&pp->target.started, pp->start_by)) {
		pair->why = TSCFK_WHY_NOT_STARTED;
		goto give_up;
	}
	if (READ_ONCE(pp->target.wrong_cpu)) {
		pair->why = TSCFK_WHY_WRONG_CPU;
		goto give_up;
	}
	pp->trips = kvmalloc_array(tscfk_rounds, sizeof(*pp->trips), GFP_KERNEL);
	if (!pp->trips) {
		pair->why = TSCFK_WHY_NO_MEMORY;
		goto give_up;
	}
	pp->budget_ticks = div_u64((u64)tscfk_irqoff_max_us * khz, 1000);
	pp->end = jiffies + msecs_to_jiffies(tscfk_timeout_ms);
	tscfk_offset_init(&pp->est);

	/* Queueing and complete_all() order the stores above before both sides. */
	if (!pp_queue(pp, &pp->ref)) {
		pair->why = TSCFK_WHY_PENDING;	/* rmmod began: nothing is published */
		goto give_up;
	}
	complete_all(&pp->go);
	pair->why = pp_wait(pp);
	if (pair->why != TSCFK_WHY_NONE)
		goto give_up;

	/* Both are done: 'done' orders their writes before this. */
	pair->max_irqoff_ns = max(pp->ref.irqoff_ns, pp->target.irqoff_ns);
	pair->have_adjust = pp->target.have_adjust;
	pair->adjust = pp->target.adjust;
	if (tscfk_offset_result(&pp->est, &pair->result))
		pair->clean_rounds = count_clean(pp->trips, pp->nr_trips);
	else
		pair->why = TSCFK_WHY_TOO_FEW_PROBES;
	pp_put(pp);
	return;

give_up:
	pp_give_up(pp);
}

/*
 * The sides spin for up to timeout_ms: on a shared pool they would hold up
 * every other item queued behind them on that CPU.  WQ_CPU_INTENSIVE keeps
 * them out of the pool's concurrency management, so other items get
 * another worker; WQ_HIGHPRI lets them run before ordinary kworkers.
 */
int tscfk_pingpong_init(void)
{
	pp_wq = alloc_workqueue("tsc_freq_khz", WQ_HIGHPRI | WQ_CPU_INTENSIVE, 0);
	return pp_wq ? 0 : -ENOMEM;
}

/*
 * Every side held the module until its last instruction, and rmmod found
 * it held by none: what is left on the queue is returning.
 */
void tscfk_pingpong_exit(void)
{
	destroy_workqueue(pp_wq);
}
