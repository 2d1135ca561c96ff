// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The disciplined system clock: where the kernel publishes no mapping
 * from the TSC to its clocks (the module absent, or a clocksource other
 * than the TSC), the library keeps one of its own, in the module's page
 * layout, so that the readers are the same code.  One thread re-syncs it
 * about once a second (the caller's, through tsc_sysclock_sync(), or a
 * helper the library starts), and slews it onto the system's clocks.
 *
 * CLOCK_MONOTONIC is the one disciplined: its rate is what the system's
 * MONOTONIC did against the TSC since the last sync (NTP's slewing
 * included), corrected by the error seen now spread over the longest of
 * the last intervals between syncs (CONVERGE_S at least;
 * tsc__discipline_corr()),
 * at most MAX_SLEW.  Each sync starts a new segment where the
 * old one is at that moment: the clock is continuous and never goes back.
 * REALTIME and BOOTTIME differ from it by offsets the kernel changes only
 * in steps (settimeofday(), leap seconds; suspend), so the library takes
 * them as they are at each sync, each on its own: they step when the
 * system's did.  The rule for MONOTONIC itself, which the kernel never
 * steps: behind by more than STEP_NS (a TSC reset by a suspend, a sync
 * long overdue) it jumps forward to the system's; ahead by more, it steps
 * back only if BOOTTIME's offset jumped in the same sync (a suspend that
 * the TSC counted and MONOTONIC did not), and is slewed otherwise.  Steps
 * change the generation.
 *
 * A clock's pages are never freed: a reader on another thread may still
 * hold one (as the module's mappings are never unmapped).  fini and a
 * new init stop the helper first, then retire the block, both pages odd.
 *
 * A page is read for three sync periods past its segment's start at most
 * (tsc__discipline_max_delta()), and with a helper for a second past the
 * helper's last renewal (renew()): a helper starved, a caller that
 * stopped syncing, a fork's child (which has no helper, and whose clocks
 * the fork handler sends to clock_gettime() at once) and a suspend longer
 * than that, all leave a page that nobody moves on, and extrapolating it
 * would add an error that grows with time (after a suspend, the time
 * asleep, which MONOTONIC does not count).  Past the bound the readers
 * read clock_gettime(), held at the page's value at the bound while that
 * is ahead (tsc__sysclock_slow_bounded()), so never back; and the sync
 * after it starts the clock again no lower than they read (sync_locked()).
 *
 * The readers are given one of two pages and the writer fills the other,
 * then swaps: the page a reader holds is never odd while it is current
 * (a writer preempted half-way would otherwise send every reader to
 * clock_gettime(), which is not this clock).  The page left behind is
 * made odd, so that a reader still in it retries through the slow path,
 * which takes the current one.  See new_segment() for why no reader of
 * the old page sees more than a later reader of the new one.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tsc_clock_page.h"

__extension__ typedef unsigned __int128 u128;

#define SYNC_PERIOD_NS	1000000000LL
#define LEASE_NS	1000000000	/* the helper's page is read this long past a renewal */
#define RENEW_MS	250
#define RETRY_MS	10		/* a sync whose sample was too noisy, again (retry_ns()) */
#define CONVERGE_S	1.0		/* an error is slewed out over this */
#define MAX_SLEW	1e-3		/* 1000 ppm: NTP slews at up to 500 */
#define STEP_NS		10000000	/* MONOTONIC off by more: step */
#define OFFSET_STEP_NS	10000		/* REALTIME, BOOTTIME offsets moved by more */
#define FLOOR_SLACK_NS	2		/* two segments' roundings */
#define LATE_READ_NS	1000		/* a reader's rdtsc after its seq check */
#define HORIZON_NS	50000		/* new >= old from t0 to this after it */
#define RENEW_MARGIN_NS	250000000	/* a lease this close to its end is not renewed */
#define NEAR_BOUND_NS	1000000		/* a sync this close to the bound may not beat it */
#define SAMPLE_TRIES	8
/*
 * A sample is used if no wider than this, or than 4 times the narrowest
 * seen at the start: clock_gettime() is a system call and a slow device
 * read where the clocksource is hpet or acpi_pm.
 */
#define SAMPLE_MAX_NS	5000

/* MONOTONIC = v0 + (t - t0) * mult / 2^shift, from t0 on. */
struct segment {
	uint64_t t0, v0;
	uint32_t mult, shift;
};

/* A readers' page, on cache lines of its own. */
struct reader_page {
	struct tscfk_clock_page p;
} __attribute__((aligned(64)));

struct tsc__discipline {
	/* The readers' pages, alternately. */
	struct reader_page pages[2];
	struct tsc_sysclock *clock;
	unsigned int cur;		/* the page the readers are given */
	uint32_t generation;
	struct segment seg;		/* the one on that page */
	bool have_seg;
	uint64_t bound_t;		/* the TSC past which readers leave the page */
	bool lapsed;			/* readers may have left it before a renewal */
	int64_t real_d, boot_d;		/* REALTIME, BOOTTIME minus MONOTONIC */
	double ns_per_tick;		/* the system's MONOTONIC, lately */
	uint64_t max_width;		/* the widest sample used */
	uint64_t last_t, last_mono;	/* the last sample */
	uint64_t sync_mono;		/* MONOTONIC at the last sync */
	uint64_t intervals[TSC__DISCIPLINE_INTERVALS];	/* the last ones between syncs */
	pthread_mutex_t lock;		/* one sync at a time */
	bool unusable;			/* the kernel withdrew tsc since */
	char root[256];			/* sysfs, for the kernel's word on tsc */
	/* The helper, if asked for; pid: a fork's child has none. */
	bool helper;
	bool leased;			/* readers held to LEASE_NS: a helper renews */
	pid_t pid;
	pthread_t thread;
	int stop_fd, set_fd;
	struct tsc__discipline *next;	/* on the live list, or the retired */
};

/*
 * Blocks of clocks in use, and of finished clocks, whose pages readers
 * may still hold: neither is ever freed.
 */
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tsc__discipline *live, *retired;

#ifdef TSC__TEST_HOOKS
unsigned int tsc__test_wide_samples;
#endif

/* One reading of the system's clocks, bracketed by the TSC. */
struct sample {
	uint64_t t, mono, width;
	int64_t real_d, boot_d;
};

/*
 * MONOTONIC between two reads of it, with REALTIME and BOOTTIME between
 * them, and the TSC outside: the narrowest of a few tries.  A sample is
 * as wide as the wider of its two brackets (ns_per_tick converts the
 * TSC's): a pause between a TSC read and a clock read shows there.
 */
static void take_sample(struct sample *s, double ns_per_tick)
{
	s->width = UINT64_MAX;
#ifdef TSC__TEST_HOOKS
	if (__atomic_load_n(&tsc__test_wide_samples, __ATOMIC_ACQUIRE)) {
		__atomic_fetch_sub(&tsc__test_wide_samples, 1, __ATOMIC_ACQ_REL);
		return;
	}
#endif
	for (int i = 0; i < SAMPLE_TRIES; i++) {
		uint64_t a = tsc_rdtsc_ordered();
		int64_t m1 = tsc__ns_now(CLOCK_MONOTONIC), r = tsc__ns_now(CLOCK_REALTIME);
		int64_t b = tsc__ns_now(CLOCK_BOOTTIME), m2 = tsc__ns_now(CLOCK_MONOTONIC);
		uint64_t z = tsc_rdtsc_ordered();
		int64_t mid = m1 + (m2 - m1) / 2;
		double tsc_ns = (double)(z - a) * ns_per_tick;
		uint64_t width;

		if (m2 < m1 || z < a)
			continue;
		width = (uint64_t)(m2 - m1);
		if (tsc_ns > (double)width)
			width = (uint64_t)tsc_ns;
		if (width >= s->width)
			continue;
		s->width = width;
		s->t = a + (z - a) / 2;
		s->mono = (uint64_t)mid;
		s->real_d = r - mid;
		s->boot_d = b - mid;
	}
}

/* A segment at rate ns_per_tick, mult as large as 32 bits allow. */
static struct segment segment(uint64_t t0, uint64_t v0, double ns_per_tick)
{
	struct segment g = { .t0 = t0, .v0 = v0, .shift = 32 };

	while (g.shift > 1 && ldexp(ns_per_tick, (int)g.shift) >= 4294967295.0)
		g.shift--;
	g.mult = (uint32_t)llround(ldexp(ns_per_tick, (int)g.shift));
	return g;
}

/* MONOTONIC on segment g at t (t before t0 counts as t0). */
static uint64_t seg_at(const struct segment *g, uint64_t t)
{
	u128 x;

	if (t < g->t0)
		t = g->t0;
	x = (u128)(t - g->t0) * g->mult;
	return g->v0 + (uint64_t)(x >> g->shift);
}

/* Fill the page the readers are not given (odd meanwhile). */
static void fill(struct tsc__discipline *d)
{
	struct tscfk_clock_page *p = &d->pages[!d->cur].p;
	const struct segment *g = &d->seg;
	uint64_t real0 = g->v0 + (uint64_t)d->real_d;
	struct tscfk_clock_state s = {
		.cycle_last = g->t0, .mult = g->mult, .shift = g->shift,
		.xtime_sec = real0 / 1000000000,
		.xtime_nsec = (real0 % 1000000000) << g->shift,
		.wall_to_mono_ns = -d->real_d, .mono_to_boot_ns = d->boot_d,
		/* Not disciplined; the segment's, so that the page is whole. */
		.raw_mult = g->mult, .raw_shift = g->shift, .raw_cycle_last = g->t0,
		.raw_sec = g->v0 / 1000000000,
		.raw_nsec = (g->v0 % 1000000000) << g->shift,
		/* 2^20 ticks last 2^20 * mult / 2^shift ns: the rate. */
		.cycle_interval = 1u << 20,
		.ntp_tick = (uint64_t)g->mult << (20 + 32 - g->shift),
	};
	uint32_t seq = __atomic_load_n(&p->seq, __ATOMIC_RELAXED) | 1;

	__atomic_store_n(&p->seq, seq, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	tscfk_clock_page_fill(p, &s);	/* shift is 1..32: cannot fail */
	p->version = TSCFK_CLOCK_PAGE_VERSION;
	p->flags = TSCFK_CLOCK_TSC;
	p->generation = d->generation;
	p->max_cycles = tsc__discipline_max_delta(d->intervals, ldexp(g->mult, -(int)g->shift));
	__atomic_store_n(&p->seq, seq + 1, __ATOMIC_RELEASE);
}

/* LEASE_NS in ticks of the current segment. */
static uint64_t lease_ticks(const struct tsc__discipline *d)
{
	return (uint64_t)(LEASE_NS / ldexp(d->seg.mult, -(int)d->seg.shift));
}

/* The writer's TSC after everything it stored before: fence, then lfence (AMD too). */
static uint64_t tsc_after_stores(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return tsc_rdtsc_ordered();
}

/* Give the readers the filled page; leave the old one odd.  The TSC after. */
static uint64_t swap(struct tsc__discipline *d)
{
	struct tscfk_clock_page *p = &d->pages[!d->cur].p, *old = &d->pages[d->cur].p;
	uint64_t bound = p->max_cycles, lease = lease_ticks(d);

	if (d->leased && lease < bound)
		bound = lease;		/* the segment starts now */
	/*
	 * The page, the old one odd, then the bound (see
	 * tsc__sysclock_slow_bounded()): a fast reader still holding the
	 * old page that loads the new bound, longer, finds that page odd
	 * and takes the slow path, rather than reading it past its own.
	 */
	__atomic_store_n(&d->clock->page, (const volatile struct tsc_timepage *)p,
			 __ATOMIC_RELEASE);
	d->cur = !d->cur;
	__atomic_store_n(&old->seq, __atomic_load_n(&old->seq, __ATOMIC_RELAXED) | 1,
			 __ATOMIC_RELEASE);
	__atomic_store_n(&d->clock->max_delta, bound, __ATOMIC_RELEASE);
	d->bound_t = d->seg.t0 + bound;
	d->lapsed = false;
	return tsc_after_stores();
}

/*
 * A new segment at rate ns_per_tick from now on, starting where the old
 * one is now, or (a step) at the system's MONOTONIC, sys_ns at TSC sys_t;
 * published.
 *
 * Readers go on reading the old page until the swap, and a late one a
 * little after (done: the writer's TSC once the old page is marked).  So
 * the new segment must be at or above the old from t0 to done: it starts
 * above it by FLOOR_SLACK_NS (their roundings) plus what a faster old
 * segment gains over HORIZON_NS, which covers the writer's own time; a
 * writer that took longer than that (preempted) before the swap builds
 * the segment again from later, and one delayed between the swap and the
 * mark publishes once more from the later of the two.
 *
 * A reader past the old page's bound before the swap (and a late one)
 * read clock_gettime(), which may be above the old segment: then the
 * new one starts no lower than the system's, sys_ns at sys_t (the
 * sample's MONOTONIC plus its width: above what any clock_gettime()
 * before the sample gave), a step forward, in a new generation.
 */
static void new_segment(struct tsc__discipline *d, double ns_per_tick, bool step,
			uint64_t sys_t, uint64_t sys_ns)
{
	uint64_t horizon = (uint64_t)(HORIZON_NS / ns_per_tick);
	uint64_t late = (uint64_t)(LATE_READ_NS / ns_per_tick);
	const uint64_t bound_t = d->bound_t;
	struct segment old = d->seg;
	bool had = d->have_seg && !step, forward = false;

	for (int tries = 0; tries < 8; tries++) {
		uint64_t t0 = tsc_rdtsc_ordered(), v0, done;
		uint64_t sys = sys_ns + (uint64_t)llround((double)(int64_t)(t0 - sys_t) * ns_per_tick);

		if (!had) {
			v0 = sys;
		} else {
			double gain = ldexp(old.mult, -(int)old.shift) - ns_per_tick;

			v0 = seg_at(&old, t0) + FLOOR_SLACK_NS +
			     (gain > 0 ? (uint64_t)ceil(gain * (double)horizon) : 0);
			if ((d->lapsed || t0 + horizon + late >= bound_t) && sys > v0) {
				v0 = sys;
				if (!forward)
					d->generation++;
				forward = true;
			}
		}
		d->seg = segment(t0, v0, ns_per_tick);
		d->have_seg = true;
		fill(d);
		if (had && tsc_after_stores() + late > t0 + horizon)
			continue;	/* preempted before the swap: again */
		done = swap(d);
		if (!had || done + late <= t0 + horizon ||
		    seg_at(&old, done + late) < seg_at(&d->seg, done + late))
			return;
		/* Preempted after it: again from the later of the two. */
		old = seg_at(&old, done + late) > seg_at(&d->seg, done + late) ? old : d->seg;
	}
	/* Never this slow eight times over: the last one stands. */
}

/* The kernel withdrew tsc as a clocksource: readers to clock_gettime(). */
static int withdraw(struct tsc__discipline *d)
{
	d->unusable = true;
	__atomic_store_n(&d->clock->page, &tsc__syscall_page, __ATOMIC_RELEASE);
	return tsc__fail(-ENODEV, "the kernel no longer offers tsc as a clocksource: the clock reads clock_gettime() now");
}

/*
 * The rate correction that slews err (ns, the clock minus the system's
 * MONOTONIC) out over the coming interval: over the longest of the last
 * TSC__DISCIPLINE_INTERVALS intervals between syncs, or CONVERGE_S if
 * they were shorter, at most MAX_SLEW.  The correction stays in the
 * segment's rate until the next sync, so over an interval P it removes
 * err * P / horizon.  With a fixed horizon of a second, a caller syncing
 * every P > 2 s removed more than the error, and the error grew at every
 * sync (e' = (1 - P / 1 s) e: 3 s doubled it, 4 s tripled it up to the
 * slew limit).  With the last interval alone as the horizon, intervals
 * alternating between a and b > 2.6 a grew it too.  With the longest of
 * the last few, any pattern of intervals among them removes a share of
 * the error at each sync; an interval k times longer than all of them
 * overshoots once, by k - 1 times the error, and the syncs after it take
 * that longer horizon until it leaves the window.
 */
double tsc__discipline_corr(int64_t err, uint64_t horizon)
{
	double h = (double)horizon > CONVERGE_S * 1e9 ? (double)horizon : CONVERGE_S * 1e9;
	double corr = -(double)err / h;

	return corr > MAX_SLEW ? MAX_SLEW : corr < -MAX_SLEW ? -MAX_SLEW : corr;
}

uint64_t tsc__discipline_max_delta(const uint64_t *intervals, double ns_per_tick)
{
	double period = CONVERGE_S * 1e9;

	for (int i = 0; i < TSC__DISCIPLINE_INTERVALS; i++)
		if ((double)intervals[i] > period)
			period = (double)intervals[i];
	period = 3 * period / ns_per_tick;
	/* Below 2^63: a reading before t0, which wraps, is past it too. */
	return period < 0x1p62 ? (uint64_t)period : 1ull << 62;
}

uint64_t tsc__discipline_horizon(uint64_t *intervals, uint64_t interval)
{
	uint64_t longest = interval;

	for (int i = TSC__DISCIPLINE_INTERVALS - 1; i > 0; i--) {
		intervals[i] = intervals[i - 1];
		if (intervals[i] > longest)
			longest = intervals[i];
	}
	intervals[0] = interval;
	return longest;
}

static int sync_locked(struct tsc__discipline *d)
{
	/* An offset read twice moves by up to the two samples' widths. */
	const long long offset_step = OFFSET_STEP_NS > 2 * (long long)d->max_width ?
				      OFFSET_STEP_NS : 2 * (long long)d->max_width;
	bool gap, suspended, near, stepped = false;
	uint64_t interval, horizon, above;
	double rate, corr;
	struct sample s;
	int64_t err;

	if (d->unusable)
		return tsc__fail(-ENODEV, "the kernel withdrew tsc as a clocksource: the clock reads clock_gettime()");
	if (d->pid != getpid())
		return tsc__fail(-EINVAL, "a disciplined clock of the parent process: initialise it again");
	if (tsc__tsc_available(d->root) == 0)
		return withdraw(d);
	take_sample(&s, d->ns_per_tick);
	if (s.width > d->max_width)
		return tsc__fail(-EAGAIN, "sync: the system's clocks read %llu ns apart at best, over %llu ns: try again",
				 (unsigned long long)s.width, (unsigned long long)d->max_width);
	/*
	 * The system's MONOTONIC against the TSC over half a second or
	 * more; not across a suspend (MONOTONIC stood still, or the TSC
	 * was reset), which only moves the starting point on.
	 */
	suspended = llabs(s.boot_d - d->boot_d) > offset_step;
	gap = s.t <= d->last_t || s.mono <= d->last_mono || suspended;
	if (!gap && s.mono - d->last_mono >= 500000000)
		d->ns_per_tick = (double)(s.mono - d->last_mono) / (double)(s.t - d->last_t);
	if (gap || s.mono - d->last_mono >= 500000000) {
		d->last_t = s.t;
		d->last_mono = s.mono;
	}
	rate = d->ns_per_tick;
	/* Each offset on its own: a REALTIME step leaves BOOTTIME's be. */
	if (llabs(s.real_d - d->real_d) > offset_step) {
		d->real_d = s.real_d;
		stepped = true;
	}
	if (suspended) {
		d->boot_d = s.boot_d;
		stepped = true;
	}
	err = (int64_t)(seg_at(&d->seg, s.t) - s.mono);
	interval = gap ? 0 : s.mono - d->sync_mono;
	d->sync_mono = s.mono;
	/* Learnt whatever this sync does: the next page's bound follows it. */
	horizon = tsc__discipline_horizon(d->intervals, interval);
	/*
	 * Near or past its bound, readers may leave the page for
	 * clock_gettime() before the swap: the new page starts no lower than
	 * the system's clocks, above by the sample's width (new_segment()),
	 * with the offsets as sampled now; and a step back after a suspend
	 * no lower than the page's value at its bound, where the readers
	 * were held if that was within TSC__FLOOR_MAX_NS of the system's.
	 */
	near = d->lapsed || s.t + (uint64_t)(NEAR_BOUND_NS / rate) >= d->bound_t;
	above = s.mono + s.width + FLOOR_SLACK_NS;
	if (near) {
		d->real_d = s.real_d;
		d->boot_d = s.boot_d;
	}
	if (err < -STEP_NS || (err > STEP_NS && suspended)) {
		uint64_t from = near ? above : s.mono, held = seg_at(&d->seg, d->bound_t);

		if (near && held > from && held - from <= TSC__FLOOR_MAX_NS)
			from = held + FLOOR_SLACK_NS;
		d->generation++;
		new_segment(d, rate, true, s.t, from);
		return 0;
	}
	if (stepped)
		d->generation++;
	corr = tsc__discipline_corr(err, horizon);
	new_segment(d, rate * (1 + corr), false, s.t, above);
	return 0;
}

int tsc__discipline_sync(struct tsc__discipline *d)
{
	int ret;

	/* A fork's child may hold the lock as the parent's helper left it. */
	if (d->pid != getpid())
		return tsc__fail(-EINVAL, "a disciplined clock of the parent process: initialise it again");
	pthread_mutex_lock(&d->lock);
	ret = sync_locked(d);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/*
 * The helper's lease on the page: readers extrapolate it LEASE_NS past the
 * helper's last renewal at most, rather than three sync periods past its
 * start.  A suspend that the TSC counts through freezes the helper with
 * every other task, and MONOTONIC does not count it: after one longer than
 * the lease, every reader reads clock_gettime() until the helper's sync,
 * which the resume wakes at once, instead of reading ahead by the time
 * asleep.  A shorter suspend no reader can see.  A helper starved for a
 * second is caught the same way.  Never past the segment's own bound,
 * three periods, which holds while syncs keep failing.
 *
 * A lease that ended, or ends within RENEW_MARGIN_NS, is not renewed:
 * readers past it read clock_gettime(), and a longer bound would take
 * them back to the page, below what they read.  The sync ends it.  One
 * found to have ended while the renewal was stored all the same (the
 * helper stalled between its check and its store) marks the page lapsed
 * and syncs at once, a step forward if the page is behind: true if that
 * sync was made.
 */
static bool renew(struct tsc__discipline *d)
{
	bool synced = false;

	pthread_mutex_lock(&d->lock);
	if (d->leased && d->have_seg && !d->unusable) {
		const struct tscfk_clock_page *p = &d->pages[d->cur].p;
		uint64_t now = tsc_rdtsc_ordered(), was = d->bound_t;
		uint64_t lease = now - d->seg.t0 + lease_ticks(d);
		uint64_t margin = (uint64_t)(RENEW_MARGIN_NS / ldexp(d->seg.mult, -(int)d->seg.shift));

		if (now + margin < was) {
			lease = lease < p->max_cycles ? lease : p->max_cycles;
			__atomic_store_n(&d->clock->max_delta, lease, __ATOMIC_RELEASE);
			d->bound_t = d->seg.t0 + lease;
			if (tsc_after_stores() >= was) {
				d->lapsed = true;
				synced = sync_locked(d) == 0;
			}
		}
	}
	pthread_mutex_unlock(&d->lock);
	return synced;
}

/* A CANCEL_ON_SET timer: readable (ECANCELED) when the clock is set or the system resumes. */
static int arm_set_fd(int fd)
{
	struct itimerspec far = { .it_value = { .tv_sec = (time_t)1 << 40 } };

	return timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &far, NULL);
}

/*
 * When a sync whose sample was too noisy (a guest's vCPU descheduled, an
 * interrupt storm) is tried again, the failed-th in a row: RETRY_MS on,
 * twice as long each time after, up to a period.  A sync a period late
 * would widen the horizon that the next ones correct over
 * (tsc__discipline_corr()) for as many syncs as it spans; and where
 * samples keep failing (a clocksource whose reads are slow since
 * initialisation), tries cost no more than syncs did.
 */
static int64_t retry_ns(unsigned int failed)
{
	int64_t ns = RETRY_MS * 1000000LL;

	while (--failed && ns < SYNC_PERIOD_NS)
		ns *= 2;
	return ns < SYNC_PERIOD_NS ? ns : SYNC_PERIOD_NS;
}

/* How long to poll: RENEW_MS at most, until due at the least. */
static int poll_ms(int64_t due)
{
	int64_t left = due - tsc__ns_now(CLOCK_MONOTONIC);

	if (left <= 0)
		return 0;
	return left >= RENEW_MS * 1000000LL ? RENEW_MS : (int)((left + 999999) / 1000000);
}

static void *helper(void *arg)
{
	struct tsc__discipline *d = arg;
	int64_t due = tsc__ns_now(CLOCK_MONOTONIC) + SYNC_PERIOD_NS;	/* the next sync */
	unsigned int failed = 0;	/* syncs in a row whose sample was too noisy */
	bool stale = false;		/* the clock set, or a resume, since the last sync */

	for (;;) {
		struct pollfd fds[2] = {
			{ .fd = d->stop_fd, .events = POLLIN },
			{ .fd = d->set_fd, .events = POLLIN },
		};
		int n = poll(fds, d->set_fd >= 0 ? 2 : 1, poll_ms(due));

		if (n > 0 && fds[0].revents)
			break;
		if (n > 0 && fds[1].revents) {
			uint64_t expired;

			/* ECANCELED: the clock was set or the system resumed; re-arm, sync now. */
			if (read(d->set_fd, &expired, sizeof(expired)) < 0)
				(void)arm_set_fd(d->set_fd);
			stale = true;
			due = tsc__ns_now(CLOCK_MONOTONIC);
		}
		/*
		 * A sync that failed is tried again soon (retry_ns()), the
		 * lease renewed meanwhile; but not a page the clock's set or
		 * a resume made wrong: its readers go to clock_gettime() when
		 * the lease ends.
		 */
		if (tsc__ns_now(CLOCK_MONOTONIC) < due) {
			if (stale || !renew(d))
				continue;
		} else if (tsc__discipline_sync(d) == -EAGAIN) {
			if (stale || !renew(d)) {
				due = tsc__ns_now(CLOCK_MONOTONIC) + retry_ns(++failed);
				continue;
			}
		}
		failed = 0;
		stale = false;
		due = tsc__ns_now(CLOCK_MONOTONIC) + SYNC_PERIOD_NS;
	}
	return NULL;
}

/*
 * Where the helper runs, unless the caller asked it to inherit: under
 * SCHED_OTHER on the housekeeping CPUs, whatever the caller is.  A
 * caller is often a SCHED_FIFO thread pinned to an isolated CPU; a helper
 * that inherited both would wake there once a second, and never run at
 * all while a busy-poller of the same priority owns that CPU, leaving the
 * clock unsynced.  *where says which CPUs, for the clock's why.
 */
static int helper_attr(struct tsc__discipline *d, pthread_attr_t *attr, bool *pinned,
		       char *where, size_t size)
{
	struct sched_param none = { .sched_priority = 0 };
	cpu_set_t set;
	int err;

	*pinned = false;
	err = pthread_attr_setinheritsched(attr, PTHREAD_EXPLICIT_SCHED);
	if (!err)
		err = pthread_attr_setschedpolicy(attr, SCHED_OTHER);
	if (!err)
		err = pthread_attr_setschedparam(attr, &none);
	if (err)
		return tsc__fail(-err, "the helper's scheduling: %s", strerror(err));
	if (tsc__housekeeping_cpus(d->root, &set)) {
		/* A helper on the caller's CPUs beats none: said in why. */
		snprintf(where, size, "SCHED_OTHER on the caller's CPUs (no housekeeping CPUs: %.150s)",
			 tsc_last_error());
		tsc__clear_error();
		return 0;
	}
	err = pthread_attr_setaffinity_np(attr, sizeof(set), &set);
	if (err)
		return tsc__fail(-err, "the helper's CPUs: %s", strerror(err));
	*pinned = true;
	snprintf(where, size, "SCHED_OTHER on housekeeping CPUs ");
	tsc__format_cpulist(&set, where + strlen(where), size - strlen(where));
	return 0;
}

/* The helper, with attr; a cpuset that refuses its CPUs: the caller's. */
static int create_helper(struct tsc__discipline *d, pthread_attr_t *attr, bool pinned,
			 char *where, size_t size)
{
	sigset_t all, old;
	cpu_set_t mine;
	int err;

	/* The helper takes no signals: the application's threads do. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&d->thread, attr, helper, d);
	if (err == EINVAL && pinned && !sched_getaffinity(0, sizeof(mine), &mine) &&
	    !pthread_attr_setaffinity_np(attr, sizeof(mine), &mine)) {
		snprintf(where, size, "SCHED_OTHER on the caller's CPUs (the cpuset refuses the housekeeping ones)");
		err = pthread_create(&d->thread, attr, helper, d);
	}
	if (err == EPERM) {
		/* A seccomp filter, say, refusing the policy or the CPUs: none set. */
		snprintf(where, size, "with the caller's scheduling and CPUs (setting them was refused: EPERM)");
		err = pthread_create(&d->thread, NULL, helper, d);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err ? tsc__fail(-err, "pthread_create: %s", strerror(err)) : 0;
}

static int start_helper(struct tsc__discipline *d, bool inherit, char *where, size_t size)
{
	pthread_attr_t attr;
	bool pinned = false;
	int err;

	d->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (d->stop_fd < 0)
		return tsc__fail(-errno, "eventfd: %s", strerror(errno));
	d->set_fd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
	if (d->set_fd >= 0 && arm_set_fd(d->set_fd)) {
		close(d->set_fd);
		d->set_fd = -1;		/* steps are then seen within a second */
	}
	err = pthread_attr_init(&attr);
	if (err) {
		err = tsc__fail(-err, "pthread_attr_init: %s", strerror(err));
		goto err_fds;
	}
	snprintf(where, size, "with the caller's scheduling and CPUs, as asked");
	if (!inherit)
		err = helper_attr(d, &attr, &pinned, where, size);
	if (!err)
		err = create_helper(d, &attr, pinned, where, size);
	pthread_attr_destroy(&attr);
	if (err)
		goto err_fds;
	d->helper = true;
	return 0;
err_fds:
	if (d->set_fd >= 0)
		close(d->set_fd);
	close(d->stop_fd);
	d->stop_fd = d->set_fd = -1;
	return err;
}

/*
 * Retire a block: no sync publishes from it again, the readers are sent
 * to clock_gettime() and its pages made odd; kept, never freed.
 */
static void retire(struct tsc__discipline *d)
{
	/* A fork's child may find the lock held by the parent's helper. */
	bool ours = d->pid == getpid();

	if (ours)
		pthread_mutex_lock(&d->lock);
	d->unusable = true;
	if (__atomic_load_n(&d->clock->page, __ATOMIC_ACQUIRE) ==
	    (const volatile struct tsc_timepage *)&d->pages[d->cur].p)
		__atomic_store_n(&d->clock->page, &tsc__syscall_page, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		__atomic_store_n(&d->pages[i].p.seq, d->pages[i].p.seq | 1, __ATOMIC_RELEASE);
	if (ours)
		pthread_mutex_unlock(&d->lock);
	pthread_mutex_lock(&blocks_lock);
	for (struct tsc__discipline **l = &live; *l; l = &(*l)->next) {
		if (*l == d) {
			*l = d->next;
			break;
		}
	}
	d->next = retired;
	retired = d;
	pthread_mutex_unlock(&blocks_lock);
}

void tsc__discipline_fork_lock(void)
{
	pthread_mutex_lock(&blocks_lock);
}

void tsc__discipline_fork_unlock(void)
{
	pthread_mutex_unlock(&blocks_lock);
}

/*
 * In a fork's child, the only thread: every live clock's pages lose TSC
 * and stay odd, so that its readers take clock_gettime() (page_begin()
 * waits only for a page that says TSC), until it is initialised again.
 * Written plainly: nothing else runs here, and no lock is taken that the
 * parent's helper may have held.
 */
void tsc__discipline_forked(void)
{
	for (struct tsc__discipline *d = live; d; d = d->next) {
		d->unusable = true;
		for (int i = 0; i < 2; i++) {
			d->pages[i].p.flags = 0;
			__atomic_store_n(&d->pages[i].p.seq, d->pages[i].p.seq | 1,
					 __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&blocks_lock);
}

int tsc__discipline_start(struct tsc_sysclock *c, const char *root, bool helper, bool inherit)
{
	char where[256] = "";
	TSC_OPTS(fo, .sysfs_root = root);
	struct tsc__discipline *d;
	struct tsc_freq f;
	struct sample s;
	int err;

	if (tsc__tsc_available(root) == 0)
		return tsc__fail(-ENODEV, "the kernel does not offer tsc as a clocksource (it marked the TSC unstable, or never trusted it): no TSC clock is kept in step across CPUs");
	if (strlen(root) >= sizeof(d->root))
		return tsc__fail(-ENAMETOOLONG, "sysfs root %s: too long", root);
	err = tsc_freq_get(&f, &fo);
	if (err)
		return err;
	d = aligned_alloc(64, (sizeof(*d) + 63) / 64 * 64);
	if (!d)
		return tsc__fail(-ENOMEM, "out of memory");
	memset(d, 0, sizeof(*d));
	d->clock = c;
	d->pid = getpid();
	d->stop_fd = d->set_fd = -1;
	snprintf(d->root, sizeof(d->root), "%s", root);
	pthread_mutex_init(&d->lock, NULL);
	/* Both pages odd until written: a stale pointer never reads zeros. */
	d->pages[0].p.seq = d->pages[1].p.seq = 1;
	d->ns_per_tick = 1e9 / f.hz;
	/* The narrowest of many: how close the system's clocks can be read here. */
	take_sample(&s, d->ns_per_tick);
	for (int i = 0; i < 20; i++) {
		struct sample t;

		take_sample(&t, d->ns_per_tick);
		if (t.width < s.width)
			s = t;
	}
	if (s.width == UINT64_MAX) {
		err = tsc__fail(-EIO, "the system's clocks never read in order: nothing to anchor to");
		goto fail;
	}
	d->max_width = s.width * 4 > SAMPLE_MAX_NS ? s.width * 4 : SAMPLE_MAX_NS;
	d->real_d = s.real_d;
	d->boot_d = s.boot_d;
	d->last_t = s.t;
	d->last_mono = s.mono;
	d->sync_mono = s.mono;
	/* The first page on a lease already: the helper renews it from its start. */
	d->leased = helper;
	new_segment(d, d->ns_per_tick, true, s.t, s.mono);
	if (helper) {
		err = start_helper(d, inherit, where, sizeof(where));
		if (err)
			goto fail;
	}
	c->disc = d;
	pthread_mutex_lock(&blocks_lock);
	d->next = live;
	live = d;
	pthread_mutex_unlock(&blocks_lock);
	snprintf(c->why, sizeof(c->why),
		 "disciplined: the library's own mapping from the TSC (%.6f MHz from %s), slewed onto clock_gettime() %s%s",
		 f.hz / 1e6, tsc_source_name(f.source),
		 helper ? "about once a second by a thread of the library's, " :
		 "at each tsc_sysclock_sync()", where);
	return 0;
fail:
	retire(d);
	__atomic_store_n(&c->page, &tsc__syscall_page, __ATOMIC_RELEASE);
	return err;
}

/*
 * Stop the helper (joined: it publishes no more), then retire the block:
 * the clock reads clock_gettime() until initialised again.
 */
void tsc__discipline_stop(struct tsc__discipline *d)
{
	if (d->helper) {
		uint64_t one = 1;

		if (d->pid == getpid() && write(d->stop_fd, &one, sizeof(one)) == sizeof(one))
			pthread_join(d->thread, NULL);
		if (d->set_fd >= 0)
			close(d->set_fd);
		close(d->stop_fd);
		d->helper = false;
	}
	retire(d);
}

int tsc__discipline_helper(const struct tsc_sysclock *c, pthread_t *thread)
{
	if (!c->disc || !c->disc->helper)
		return -ENOENT;
	*thread = c->disc->thread;
	return 0;
}
