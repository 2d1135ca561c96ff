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
 * Both sides spin with interrupts off, so that brackets are tight, but only
 * in windows of at most irqoff_max_us each, timed by each side on its own
 * clock.  Correctness does not depend on the windows overlapping: a round
 * answered with interrupts on is merely wider.  Neither side waits forever:
 * the reference gives up after timeout_ms, the target after timeout_ms
 * without a new round.  Nothing here takes a lock; the stores and loads on
 * the shared line are the only synchronisation, which keeps this valid on
 * PREEMPT_RT.  The machine is never stopped: only these two CPUs take part.
 *
 * The caller holds cpus_read_lock(), so both CPUs stay online and the bound
 * workers stay on them.
 */
#include <linux/minmax.h>
#include <linux/nmi.h>
#include <linux/sched.h>
#include <linux/smp.h>
#include <linux/timekeeping.h>
#include <linux/workqueue.h>
#include <asm/tsc.h>

#include "tscfk.h"

/* Round numbers start at 1; 0 means "nothing sent yet". */
#define PP_STOP		U32_MAX

static void pp_reference(struct work_struct *work);
static void pp_target(struct work_struct *work);

static struct {
	/* The only line both CPUs write: the reference ping, the target the rest. */
	struct {
		u32 ping;	/* round sent by the reference, or PP_STOP */
		u32 pong;	/* round answered by the target */
		u64 tsc;	/* the target's reading for round 'pong' */
	} line ____cacheline_aligned_in_smp;

	/* Set before the works are queued, or written by one side only. */
	struct tscfk_pair *pair ____cacheline_aligned_in_smp;
	u64 budget_ticks;	/* longest interrupts-off window */
	u64 timeout_ticks;	/* longest wait for the other side */
	struct tscfk_offset_est est;
	u64 ref_irqoff_ns, target_irqoff_ns;
	struct work_struct ref_work, target_work;
} pp = {
	.ref_work = __WORK_INITIALIZER(pp.ref_work, pp_reference),
	.target_work = __WORK_INITIALIZER(pp.target_work, pp_target),
};

static bool tsc_before(u64 now, u64 deadline)
{
	return (s64)(now - deadline) < 0;
}

/*
 * Read the TSC after every earlier instruction and before every later one,
 * stores included.  rdtsc_ordered() fences only before the read; Intel's
 * SDM asks for LFENCE after RDTSC when later memory accesses must not be
 * performed first.  A lock-prefixed instruction would not do: on AMD it
 * does not order RDTSC.
 */
static __always_inline u64 rdtsc_fenced(void)
{
	u64 t = rdtsc_ordered();

	asm volatile("lfence" ::: "memory");
	return t;
}

/* One interrupts-off window. */
struct irqoff_window {
	unsigned long flags;
	u64 start_ns;
	u64 end_tsc;
};

static void window_open(struct irqoff_window *w)
{
	local_irq_save(w->flags);
	w->start_ns = ktime_get_mono_fast_ns();
	w->end_tsc = rdtsc() + pp.budget_ticks;
}

/* Close the window, keep its length, and let the rest of the system in. */
static void window_close(struct irqoff_window *w, u64 *max_ns)
{
	u64 ns = ktime_get_mono_fast_ns() - w->start_ns;

	local_irq_restore(w->flags);
	*max_ns = max(*max_ns, ns);
	/* As tsc_sync.c does: we spin on purpose, do not call it a lockup. */
	touch_nmi_watchdog();
	cond_resched();
}

/* One probe; false if the target did not answer before 'end'. */
static bool pp_round(u32 round, u64 end, u64 *t1, u64 *t, u64 *t2)
{
	*t1 = rdtsc_fenced();
	WRITE_ONCE(pp.line.ping, round);
	/* Pairs with the release in pp_target(): makes line.tsc visible. */
	while (smp_load_acquire(&pp.line.pong) != round) {
		if (!tsc_before(rdtsc(), end))
			return false;
		cpu_relax();
	}
	*t2 = rdtsc_ordered();
	/* Written before pong, which the acquire above has seen. */
	*t = READ_ONCE(pp.line.tsc);
	return true;
}

static void pp_reference(struct work_struct *work)
{
	u64 deadline = rdtsc() + pp.timeout_ticks;
	struct irqoff_window w;
	unsigned int done = 0;
	u32 round = 0;

	WARN_ON_ONCE(raw_smp_processor_id() != pp.pair->ref_cpu);
	while (done < tscfk_rounds && tsc_before(rdtsc(), deadline)) {
		window_open(&w);
		while (done < tscfk_rounds) {
			u64 t1, t, t2;

			if (!pp_round(++round, w.end_tsc, &t1, &t, &t2))
				break;
			tscfk_offset_add(&pp.est, t1, t, t2);
			done++;
			if (!tsc_before(t2, w.end_tsc))
				break;
		}
		window_close(&w, &pp.ref_irqoff_ns);
	}
	/* No ordering needed beyond the store itself; release documents it. */
	smp_store_release(&pp.line.ping, PP_STOP);
}

static void pp_target(struct work_struct *work)
{
	u64 idle_deadline = rdtsc() + pp.timeout_ticks;
	struct irqoff_window w;
	bool stop = false;
	u32 seen = 0;

	WARN_ON_ONCE(raw_smp_processor_id() != pp.pair->target_cpu);
	while (!stop) {
		bool answered = false;
		u64 now;

		window_open(&w);
		do {
			/* Pairs with the reference's stores to line.ping. */
			u32 ping = smp_load_acquire(&pp.line.ping);

			if (ping == PP_STOP) {
				stop = true;
				break;
			}
			if (ping != seen) {
				WRITE_ONCE(pp.line.tsc, rdtsc_fenced());
				/* Publish line.tsc before the answer. */
				smp_store_release(&pp.line.pong, ping);
				seen = ping;
				answered = true;
			}
			cpu_relax();
			now = rdtsc();
		} while (tsc_before(now, w.end_tsc));
		window_close(&w, &pp.target_irqoff_ns);

		if (answered)
			idle_deadline = rdtsc() + pp.timeout_ticks;
		else if (!tsc_before(rdtsc(), idle_deadline))
			stop = true;
	}
}

void tscfk_pingpong(struct tscfk_pair *pair)
{
	u64 khz = tsc_khz;

	pp.pair = pair;
	pp.budget_ticks = div_u64((u64)tscfk_irqoff_max_us * khz, 1000);
	pp.timeout_ticks = (u64)tscfk_timeout_ms * khz;
	tscfk_offset_init(&pp.est);
	pp.ref_irqoff_ns = 0;
	pp.target_irqoff_ns = 0;
	pp.line.ping = 0;
	pp.line.pong = 0;

	/* queue_work_on() orders the stores above before the works run. */
	queue_work_on(pair->target_cpu, system_highpri_wq, &pp.target_work);
	queue_work_on(pair->ref_cpu, system_highpri_wq, &pp.ref_work);
	flush_work(&pp.ref_work);
	flush_work(&pp.target_work);

	pair->ok = tscfk_offset_result(&pp.est, &pair->result);
	pair->max_irqoff_ns = max(pp.ref_irqoff_ns, pp.target_irqoff_ns);
}
