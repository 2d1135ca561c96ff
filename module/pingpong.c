// SPDX-License-Identifier: GPL-2.0
/*
 * Measure one CPU's TSC offset against the reference CPU.
 *
 * Two kernel threads, one bound to each CPU, bounce a cache line: the reference
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
 * Bounded, whatever the CPUs are doing.  A side's thread may never run, for
 * example on a CPU that a SCHED_FIFO task owns with RT throttling off, or
 * run and then be preempted for good.  So:
 *
 *  - tscfk_pp_start() starts the target's side at once, for every CPU of a
 *    measurement, and tscfk_pp_prepare() waits for it to start only until
 *    a deadline common to the whole measurement: CPUs that never run cost
 *    timeout_ms once, not once each.  tscfk_pp_measure() starts the
 *    reference's side at the turn, once the pair is judged to be measured.
 *    A side that started sleeps (TASK_IDLE) until its pair's turn.
 *  - At the turn, tscfk_pp_measure() waits for both sides only until
 *    timeout_ms, plus slack for a last window.
 *  - A side that is done sleeps until tscfk_pp_release() has moved it to
 *    the housekeeping CPUs (a real-time task can keep a thread off one CPU,
 *    not off all of them; an isolated CPU must not run its exit), and only
 *    then ends.  A side not done finds its pair stopped there and ends at
 *    once.  A side belongs to its own struct tscfk_pp and can never take
 *    part in another pair.
 *  - No hotplug lock is held here, nor by the caller during a turn
 *    (measure.c): CPU hotplug never waits for a pair.
 *  - A side holds the module from its start to its last instruction, which
 *    is module_put_and_kthread_exit(): it never returns into the module.  So
 *    rmmod is refused at once (EAGAIN) while a side may still run, and never
 *    waits for one; and a side holds the module after its pair's release
 *    only until a housekeeping CPU has run it.  This is why the sides are
 *    threads of their own and not work items: a work item runs on after its
 *    function returns, in a worker that is bound to the CPU and cannot be
 *    moved, and destroy_workqueue() at rmmod waits for it without a bound.
 *  - Moving a side never waits long.  set_cpus_allowed_ptr() waits without
 *    a bound for a task that a real-time one preempted with migration
 *    disabled, as the sleeping spinlocks of PREEMPT_RT disable it, and the
 *    exit path takes those.  Until its release a side takes raw spinlocks
 *    only (a completion's), so it is asleep, queued or running: its move is
 *    a change of mask, a requeue, or the stopper's, after one window at most.
 *
 * Either CPU may go offline at any time, before the pair's turn or during
 * it.  A side inside a window keeps its CPU (interrupts are off, so the
 * stop_machine() of an offline waits for the window to close); between
 * windows the kernel may push it to another CPU, and the next window,
 * which checks with interrupts off that it runs on its CPU, ends the pair
 * (wrong_cpu).  So every probe was taken on the right pair of CPUs.
 */
#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/sched/isolation.h>
#include <linux/sched/prio.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <asm/cpufeature.h>
#include <asm/msr.h>
#include <asm/tsc.h>

#include "compat.h"
#include "tscfk.h"

/* Round numbers start at 1; 0 means "nothing sent yet". */
#define PP_STOP		U32_MAX

/*
 * How long after the deadline a side that started may take to notice it:
 * one interrupts-off window, and time to be scheduled back in after it.
 */
#define PP_SLACK_MS	100

struct pp_side {
	struct task_struct *task;	/* held (get_task_struct) once started */
	struct completion started;	/* it ran, on its CPU or not */
	struct completion done;		/* it has finished with the pair */
	unsigned int cpu;
	bool wrong_cpu;			/* WRITE_ONCE, then 'started' or 'done' */
	bool have_adjust;		/* these before 'done' */
	s64 adjust;
	u64 irqoff_ticks;	/* the longest window */
	u64 irqoff_total_ticks;	/* all its windows */
};

struct tscfk_pp {
	/* The only line both CPUs write: the reference ping, the target the rest. */
	struct {
		u32 ping;	/* round sent by the reference, or PP_STOP */
		u32 pong;	/* round answered by the target */
		u64 tsc;	/* the target's reading for round 'pong' */
	} line ____cacheline_aligned_in_smp;

	/* Set before 'go' is completed, but 'stop'. */
	unsigned long end ____cacheline_aligned_in_smp;	/* jiffies: both end */
	u64 budget_ticks;	/* longest interrupts-off window */
	bool stop;		/* the caller gave up waiting: end now */
	struct completion go;	/* the pair's turn, or the caller gave up */
	struct completion released;	/* the sides were moved: they may end */

	/* The reference's, read by the caller once the reference is done. */
	struct tscfk_offset_est est;
	u32 *trips;		/* each probe's round trip t2 - t1, ticks */
	unsigned int nr_trips;

	struct pp_side ref, target;
	refcount_t refs;	/* the caller's and one per started side */
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
	if (!refcount_dec_and_test(&pp->refs))
		return;
	if (pp->ref.task)
		put_task_struct(pp->ref.task);
	if (pp->target.task)
		put_task_struct(pp->target.task);
	kvfree(pp->trips);
	kfree(pp);
}

/*
 * One interrupts-off window, timed on this CPU's TSC alone: no clocksource
 * is read with interrupts off (an HPET read is a microsecond or so, and
 * 6.1's KCSAN takes the unannotated seqcount latch of the kernel's fast
 * clock for a data race).  It may end up to irqoff_max_us after the
 * pair's deadline: PP_SLACK_MS covers that.
 */
struct irqoff_window {
	unsigned long flags;
	u64 start_tsc;
	u64 end_tsc;
};

/*
 * Open a window; false, with interrupts on again, if the side is not on
 * its CPU (it went offline and the thread was moved): then stop the pair.
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
	w->start_tsc = rdtsc();
	w->end_tsc = w->start_tsc + pp->budget_ticks;
	return true;
}

/*
 * Is the window over at TSC reading 'now'?  Past its end, or before its
 * start: a TSC written backwards (firmware that writes TSC_ADJUST, which
 * the kernel detects and corrects, but later) would otherwise keep
 * interrupts off until the TSC caught up with the window's end again.
 */
static bool window_over(const struct irqoff_window *w, u64 now)
{
	return !tsc_before(now, w->end_tsc) || tsc_before(now, w->start_tsc);
}

/*
 * Close the window, keep its length, and let the rest of the system in:
 * the window's length in ticks.
 */
static u64 window_close(struct irqoff_window *w, struct pp_side *side)
{
	u64 ticks = rdtsc() - w->start_tsc;

	local_irq_restore(w->flags);
	/*
	 * A TSC that went backwards gives no length; the window ended where
	 * that was seen, after about its budget at most.  Not 2^64 - n.
	 */
	if ((s64)ticks < 0)
		ticks = w->end_tsc - w->start_tsc;
	side->irqoff_ticks = max(side->irqoff_ticks, ticks);
	side->irqoff_total_ticks += ticks;
	cond_resched();
	return ticks;
}

/*
 * After a window the target did not answer in, when it has answered
 * nothing for over a jiffy (its side preempted, or a real-time task
 * owning its CPU), interrupts stay on for at least a jiffy and nine times
 * the window's length, whichever is longer: else the reference's windows
 * would follow each other for the whole turn, interrupts off nearly all
 * the time.  So past that first jiffy or two they are off at most a tenth
 * of the reference CPU's time while the target does not answer (a
 * fiftieth at the default 20 us and HZ=1000).  Spun with interrupts on,
 * not slept: a side takes no timer (see pp_target()); cond_resched()
 * gives the CPU's other tasks their share, little beside a thread at
 * nice -20.
 */
static void pp_pause(struct tscfk_pp *pp, u64 window_ticks)
{
	unsigned long until = jiffies + 2;	/* a whole jiffy at least */
	u64 start = rdtsc(), ticks = 9 * window_ticks;

	while (pp_going(pp) &&
	       (time_before(jiffies, until) || rdtsc() - start < ticks)) {
		cpu_relax();
		cond_resched();
	}
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
 * or it runs on another CPU (its own went offline, or it was moved off).
 */
static bool pp_side_begin(struct tscfk_pp *pp, struct pp_side *side)
{
	bool go = !READ_ONCE(pp->stop);

	if (go && raw_smp_processor_id() != side->cpu) {
		WRITE_ONCE(side->wrong_cpu, true);
		/*
		 * As window_open(): the pair is over.  Before 'started', which
		 * the target waits for: else it spins till the deadline for a
		 * reference that never sends.
		 */
		WRITE_ONCE(pp->stop, true);
		go = false;
	}
	/* _all: a waiter that timed out may look again with completion_done(). */
	complete_all(&side->started);
	return go;
}

/*
 * Last thing a side does before module_put_and_kthread_exit(), which drops
 * the module in code that is not the module's and never returns: say it is
 * done, and sleep until the caller moved it (tscfk_pp_release()), so that
 * it begins to exit where no real-time task keeps it, nor the exit path
 * disturbs an isolated CPU.  Bounded: the caller releases each pair after
 * the turns of those before it, each bounded.
 */
static void pp_side_end(struct tscfk_pp *pp, struct pp_side *side)
{
	complete_all(&side->done);
	wait_for_completion_state(&pp->released, TASK_IDLE);
	pp_put(pp);
}

/*
 * One probe; false if the target did not answer before the window is over.
 *
 * No fence is needed between reading t1 and sending the round: a store
 * becomes visible only after it retires, so after the RDTSC before it has
 * executed.  rdtsc_ordered() fences before its read, which is what t2
 * needs: it must not execute before the load that saw the answer.
 */
static bool pp_round(struct tscfk_pp *pp, u32 round,
		     const struct irqoff_window *w, u64 *t1, u64 *t, u64 *t2)
{
	*t1 = rdtsc_ordered();
	WRITE_ONCE(pp->line.ping, round);
	/* Pairs with the release in pp_answer(): makes line.tsc visible. */
	while (smp_load_acquire(&pp->line.pong) != round) {
		if (window_over(w, rdtsc()))
			return false;
		cpu_relax();
	}
	*t2 = rdtsc_ordered();
	*t = READ_ONCE(pp->line.tsc);
	return true;
}

static int pp_reference(void *data)
{
	struct tscfk_pp *pp = data;
	struct irqoff_window w;
	unsigned int done = 0, trips = 0;
	u32 round = 0, pong = 0, answer;
	unsigned long pong_at;

	if (!pp_side_begin(pp, &pp->ref))
		goto out;
	/* Started at the turn, just before complete_all(go): idle till then. */
	wait_for_completion_state(&pp->go, TASK_IDLE);
	if (READ_ONCE(pp->stop))
		goto out;
	pong_at = jiffies;
	while (done < tscfk_rounds && pp_going(pp)) {
		bool answered = true;
		u64 ticks;

		if (!window_open(pp, &pp->ref, &w))
			break;
		while (done < tscfk_rounds) {
			u64 t1, t, t2;

			if (!pp_round(pp, ++round, &w, &t1, &t, &t2)) {
				answered = false;
				break;
			}
			tscfk_offset_add(&pp->est, t1, t, t2);
			/* Each probe the estimator took: clean <= rounds. */
			if (pp->est.rounds > trips)
				pp->trips[trips++] = min_t(u64, t2 - t1, U32_MAX);
			done++;
			if (window_over(&w, t2))
				break;
		}
		ticks = window_close(&w, &pp->ref);
		/*
		 * A target slower than a window (under emulation, or with
		 * windows of a microsecond) still answers, late: only one that
		 * answered nothing for over a jiffy makes the reference pause.
		 */
		answer = READ_ONCE(pp->line.pong);
		if (answer != pong) {
			pong = answer;
			pong_at = jiffies;
		}
		if (!answered && time_after(jiffies, pong_at + 1))
			pp_pause(pp, ticks);
	}
	pp->nr_trips = trips;
	/* The target needs nothing else from us: no ordering to add. */
	WRITE_ONCE(pp->line.ping, PP_STOP);
out:
	pp_side_end(pp, &pp->ref);
	module_put_and_kthread_exit(0);
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
	    !rdmsrq_safe(MSR_IA32_TSC_ADJUST, &v)) {
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
static int pp_target(void *data)
{
	struct tscfk_pp *pp = data;
	struct irqoff_window w;
	u32 seen = 0, ping;

	if (!pp_side_begin(pp, &pp->target))
		goto out;
	/* Idle, not a hung task: earlier pairs may take timeout_ms each. */
	wait_for_completion_state(&pp->go, TASK_IDLE);
	if (READ_ONCE(pp->stop))
		goto out;
	/*
	 * Untimed: pp_wait() completes 'started' if it gives up on the
	 * reference.  A timed wait may end in del_timer_sync(), which on
	 * PREEMPT_RT can take a sleeping lock and disable migration: then a
	 * real-time task preempting this side would stall its move.
	 */
	wait_for_completion_state(&pp->ref.started, TASK_IDLE);
	if (READ_ONCE(pp->stop))
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
		} while (ping != PP_STOP && !window_over(&w, rdtsc()));
		window_close(&w, &pp->target);
	}
out:
	pp_side_end(pp, &pp->target);
	module_put_and_kthread_exit(0);
}

static void pp_side_init(struct pp_side *side, unsigned int cpu)
{
	init_completion(&side->started);
	init_completion(&side->done);
	side->cpu = cpu;
}

/*
 * Start a side's thread on its CPU, holding the pair and the module for
 * it.  Fails as kthread_create_on_cpu() does, or with ENODEV once rmmod
 * began (its caller is then about to stop measuring anyway): only for a
 * target, as the target's side holds the module while the reference's
 * starts (but for rmmod -f).
 */
static int pp_side_start(struct tscfk_pp *pp, struct pp_side *side,
			 int (*fn)(void *data))
{
	struct task_struct *task;

	if (!try_module_get(THIS_MODULE))
		return -ENODEV;
	task = kthread_create_on_cpu(fn, pp, side->cpu, "tscfk/%u");
	if (IS_ERR(task)) {
		module_put(THIS_MODULE);
		return PTR_ERR(task);
	}
	/* As a WQ_HIGHPRI worker: before ordinary tasks, after real-time ones. */
	sched_set_normal(task, MIN_NICE);
	side->task = get_task_struct(task);
	refcount_inc(&pp->refs);
	wake_up_process(task);
	return 0;
}

/*
 * Move a started side to the housekeeping CPUs that are not isolated,
 * where it ends: as pp_side_begin() or window_open() sees another CPU, or
 * the pair stopped, or straight from pp_side_end().  A side that is done
 * may stay on its CPU if that is one of them: its CPU just ran it, and
 * moving it would wake another.  A side that is not done leaves its CPU,
 * where a real-time task may keep it for good, if there is another.  Only
 * measure_work moves sides, one at a time: the mask is its own.
 */
static void pp_move(struct pp_side *side)
{
	static struct cpumask elsewhere;
	unsigned int cpu;

	if (!side->task)
		return;
	cpumask_clear(&elsewhere);
	/*
	 * The housekeeping mask is copied inside an RCU read-side section:
	 * from 7.2 on a cpuset change may free it (tscfk_cpu_isolated()).
	 * set_cpus_allowed_ptr() sleeps, so it gets the copy, after.
	 */
	rcu_read_lock();
	for_each_cpu_and(cpu, cpu_online_mask, housekeeping_cpumask(HK_TYPE_KTHREAD))
		if (!tscfk_cpu_isolated(cpu))
			__cpumask_set_cpu(cpu, &elsewhere);
	rcu_read_unlock();
	if (!completion_done(&side->done) && cpumask_weight(&elsewhere) > 1)
		__cpumask_clear_cpu(side->cpu, &elsewhere);
	if (cpumask_empty(&elsewhere) || set_cpus_allowed_ptr(side->task, &elsewhere))
		pr_warn_once("cpu%u: a thread of the module's could not be moved to a housekeeping CPU: it ends where it is\n",
			     side->cpu);
}

struct tscfk_pp *tscfk_pp_start(unsigned int ref_cpu, unsigned int target_cpu)
{
	struct tscfk_pp *pp = kzalloc(sizeof(*pp), GFP_KERNEL);
	int err;

	if (!pp)
		return ERR_PTR(-ENOMEM);
	pp_side_init(&pp->ref, ref_cpu);
	pp_side_init(&pp->target, target_cpu);
	init_completion(&pp->go);
	init_completion(&pp->released);
	refcount_set(&pp->refs, 1);
	err = pp_side_start(pp, &pp->target, pp_target);
	if (err) {
		pp_put(pp);
		return ERR_PTR(err);
	}
	return pp;
}

/*
 * Before the pair's turn: wait, until the measurement's common deadline
 * start_by (jiffies), for the target's side to start.  The reference's
 * side starts only at the turn, once the pair is judged to be measured:
 * a reference that went away meanwhile is not woken for nothing.
 */
void tscfk_pp_prepare(struct tscfk_pp *pp, unsigned long start_by)
{
	if (!IS_ERR_OR_NULL(pp))
		wait_until(&pp->target.started, start_by);
}

/*
 * Once the pair is judged or not to be measured: end it, whatever its
 * sides are doing, and drop the caller's hold.  The sides are moved first,
 * then let end (and a target asleep until its turn wakes where it was
 * moved to, with no IPI to its own CPU).  Each side holds the module until
 * it ends: rmmod is refused meanwhile.
 */
void tscfk_pp_release(struct tscfk_pp *pp)
{
	if (IS_ERR_OR_NULL(pp))
		return;
	WRITE_ONCE(pp->stop, true);
	pp_move(&pp->target);
	pp_move(&pp->ref);
	complete_all(&pp->released);
	complete_all(&pp->go);
	pp_put(pp);
}

/* Wait, within the bound, for both sides; say why the pair has no result. */
static enum tscfk_why pp_wait(struct tscfk_pp *pp)
{
	unsigned long late = pp->end +
		msecs_to_jiffies(tscfk_irqoff_max_us / 1000 + PP_SLACK_MS);
	bool ref_started, ref_done, target_done;

	ref_started = wait_until(&pp->ref.started, pp->end);
	if (!ref_started) {
		WRITE_ONCE(pp->stop, true);
		/* Frees the target, which waits for it untimed: 'stop' first. */
		complete_all(&pp->ref.started);
	}
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

/*
 * The pair's turn.  Waits no longer than timeout_ms and PP_SLACK_MS; the
 * caller then releases the pair (tscfk_pp_release()), with a result or not.
 */
void tscfk_pp_measure(struct tscfk_pp *pp, struct tscfk_pair *pair)
{
	u64 khz = READ_ONCE(tsc_khz), ticks;

	*pair = (struct tscfk_pair){ .why = TSCFK_WHY_NONE };
	if (!completion_done(&pp->target.started)) {
		pair->why = TSCFK_WHY_NOT_STARTED;
		return;
	}
	if (READ_ONCE(pp->target.wrong_cpu)) {
		pair->why = TSCFK_WHY_WRONG_CPU;
		return;
	}
	/* First: without it, no reference side is started only to be stopped. */
	pp->trips = kvmalloc_array(tscfk_rounds, sizeof(*pp->trips), GFP_KERNEL);
	if (!pp->trips) {
		pair->why = TSCFK_WHY_NO_MEMORY;
		return;
	}
	/* The target's side holds the module: ENODEV only for rmmod -f. */
	if (pp_side_start(pp, &pp->ref, pp_reference)) {
		pair->why = TSCFK_WHY_NO_MEMORY;
		return;
	}
	pp->budget_ticks = div_u64((u64)tscfk_irqoff_max_us * khz, 1000);
	pp->end = jiffies + msecs_to_jiffies(tscfk_timeout_ms);
	tscfk_offset_init(&pp->est);

	/* complete_all() orders the stores above before both sides. */
	complete_all(&pp->go);
	pair->why = pp_wait(pp);

	/*
	 * The windows of every side that is done count, whatever became of
	 * the pair (max_irqoff_ns covers them all): 'done' orders the side's
	 * writes before completion_done() sees it.  A side not done may be
	 * inside a window still, and is not read.
	 */
	ticks = 0;
	if (completion_done(&pp->target.done))
		ticks = pp->target.irqoff_ticks;
	if (completion_done(&pp->ref.done)) {
		ticks = max(ticks, pp->ref.irqoff_ticks);
		pair->ref_irqoff_ns = mul_u64_u32_div(pp->ref.irqoff_total_ticks,
						      NSEC_PER_MSEC, khz);
	}
	pair->max_irqoff_ns = mul_u64_u32_div(ticks, NSEC_PER_MSEC, khz);
	if (pair->why != TSCFK_WHY_NONE)
		return;

	pair->have_adjust = pp->target.have_adjust;
	pair->adjust = pp->target.adjust;
	if (tscfk_offset_result(&pp->est, &pair->result))
		pair->clean_rounds = count_clean(pp->trips, pp->nr_trips);
	else
		pair->why = TSCFK_WHY_TOO_FEW_PROBES;
}
