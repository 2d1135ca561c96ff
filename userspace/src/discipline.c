// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The disciplined system clock: where the kernel publishes no mapping
 * from the TSC to its clocks (the module absent, or a clocksource other
 * than the TSC), the library keeps one of its own, in the module's page
 * layout, so that the readers are the same code.  It is re-synced about
 * once a second, and slewed onto the system's clocks, by one of three:
 * the caller, through tsc_sysclock_sync(); a helper thread the library
 * starts; or its own readers, the first of whom to find it due syncs it
 * in passing (TSC_DISCIPLINE_READERS, no thread at all).
 *
 * CLOCK_MONOTONIC is the one disciplined.  Its rate is the TSC's rate in
 * MONOTONIC_RAW's ns (tsc__discipline_raw_rate(), over a long base) times
 * the rate the kernel's NTP state gives MONOTONIC against RAW now
 * (adjtimex()'s tick, freq, the PLL's share of its offset this second,
 * adjtime()'s slew: kernel_rate()), times the ratio of what MONOTONIC did
 * against RAW to that model over the last interval in which the model
 * held still (the kernel's own roundings, ntp_tick_adj: bias).  While the
 * kernel's state holds still that is the rate the system's MONOTONIC ran
 * at since the last sync; when it changes (an NTP daemon's update), the
 * new rate is taken at the first sync after, not an interval later.
 * Where adjtimex() may not be called (a seccomp filter, which may kill
 * the process for it), fails, or models MONOTONIC 1000 ppm off what it
 * did, the rate is what MONOTONIC did since the last sync.  Either is
 * corrected by the error seen now spread over the longest of the last
 * intervals between syncs (CONVERGE_S at least; tsc__discipline_corr()),
 * at most MAX_SLEW.
 * Each sync starts a new segment where the old one is at that moment:
 * the clock is continuous and never goes back.
 * REALTIME and BOOTTIME differ from it by offsets the kernel changes only
 * in steps (settimeofday(), leap seconds; suspend), so the library takes
 * them as they are at each sync, each on its own: they step when the
 * system's did.  The rule for MONOTONIC itself, which the kernel never
 * steps: behind by more than STEP_NS (a sync long overdue) it jumps
 * forward to the system's; ahead by more after a suspend (which the TSC
 * counted and MONOTONIC did not), it holds still until the system's
 * catches up (a hold page, below); ahead by more otherwise, it is slewed.
 * Steps and holds change the generation.
 *
 * A TSC that reads below the segment's start (by more than SKEW_NS, more
 * than CPUs' TSCs differ by) was reset, as a resume from S3 does on bare
 * metal: the page's arithmetic no longer applies, and its readers are
 * held at the most any reader may have had from it (its value at its
 * bound) until the next sync, which then holds or steps forward.
 *
 * A clock's pages are never freed: a reader on another thread may still
 * hold one (as the module's mappings are never unmapped).  fini and a
 * new init stop the helper first, then retire the block, both pages odd
 * and without TSC, so that a reader still holding one (a copy of the
 * clock, say) reads clock_gettime() at once rather than waiting for a
 * write that never ends.
 *
 * A page is read for three sync periods past its segment's start at most
 * (tsc__discipline_max_delta()), with a helper for 1.25 s (a lease that
 * its sync a second renews), and synced by its readers for a period
 * and a half, the first of them past one period syncing it (the bound
 * they are given): a helper starved, a caller that stopped syncing, a fork's
 * child (which has no helper, and whose clocks the fork handler sends to
 * clock_gettime() at once) and a suspend longer than that, all leave a
 * page that nobody moves on, and extrapolating it would add an error
 * that grows with time (after a suspend, the time asleep, which
 * MONOTONIC does not count).  Past the bound the readers read
 * clock_gettime(), MONOTONIC and BOOTTIME held at the page's value at
 * the bound while that is ahead (tsc__sysclock_slow_bounded()), so never
 * back; and the sync after it starts the clock again no lower than they
 * read (new_segment()).
 *
 * A hold page is the clock holding still: a page of rate 0, so that any
 * reader reads its start, and of bound 0, so that every reader past its
 * start takes the slow path, which gives REALTIME as clock_gettime()
 * does and MONOTONIC and BOOTTIME no lower than the page's start, the
 * most any reader had before.  (A reader that takes the new page with
 * the old bound reads its start.)  The next sync is due when the
 * system's MONOTONIC reaches it.
 *
 * The readers are given one of two pages and the writer fills the other,
 * then swaps: the page a reader holds is never odd while it is current
 * (a writer preempted half-way would otherwise send every reader to
 * clock_gettime(), which is not this clock).  The page left behind is
 * made odd, so that a reader still in it retries through the slow path,
 * which takes the current one.  See new_segment() for why no reader of
 * the old page sees more than a later reader of the new one.
 *
 * Where the readers find the page and its bound is a pair of slots: a
 * struct tsc_sysclock's page and max_delta, or the front door's
 * (front.c).  The library writes nothing else of the caller's.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tsc_clock_page.h"

__extension__ typedef unsigned __int128 u128;

#define SYNC_PERIOD_NS	1000000000LL
/* The helper's page is read this long past its start: a sync a second, and a quarter's slack. */
#define LEASE_NS	1250000000
#define RETRY_MS	10		/* a sync whose sample was too noisy, again (retry_ns()) */
#define CONVERGE_S	1.0		/* an error is slewed out over this */
#define MAX_SLEW	1e-3		/* 1000 ppm: NTP slews at up to 500 */
#define STEP_NS		10000000	/* MONOTONIC off by more: step, or hold */
#define OFFSET_STEP_NS	10000		/* REALTIME, BOOTTIME offsets moved by more */
#define FLOOR_SLACK_NS	2		/* two segments' roundings */
#define LATE_READ_NS	1000		/* a reader's rdtsc after its seq check */
#define HORIZON_NS	50000		/* new >= old from t0 to this after it */
#define NEAR_BOUND_NS	1000000		/* a sync this close to the bound may not beat it */
#define SAMPLE_TRIES	8
#define RAW_BASE_NS	32000000000ull	/* MONOTONIC_RAW's rate over 32 to 64 s */
#define RAW_NOISE	2e-6		/* beside the samples': RAW's rate moved */
#define MAX_TICKADJ_NS	500000.0	/* adjtime() slews 500 us a second at most */
#define MAX_TC		10		/* the kernel's MAXTC: the PLL's constant */
/*
 * A sample is used if no wider than this, or than 4 times the narrowest
 * seen at the start: clock_gettime() is a system call and a slow device
 * read where the clocksource is hpet or acpi_pm.
 */
#define SAMPLE_MAX_NS	5000
/*
 * A single long interval between syncs counts at most this many times
 * the longest before it in the page's bound (tsc__discipline_max_delta()).
 */
#define GAP_FACTOR	2

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
	/* Where the readers find the page and its bound. */
	const volatile struct tsc_timepage **page_slot;
	uint64_t *bound_slot;
	enum tsc_sysclock_discipline mode;
	unsigned int cur;		/* the page the readers are given */
	uint32_t generation;
	struct segment seg;		/* the one on that page */
	bool have_seg;
	bool published;			/* a page was given to the readers */
	bool hold;			/* that page holds still (bound 0) */
	uint64_t bound_t;		/* the TSC past which readers leave the page */
	int64_t real_d, boot_d;		/* REALTIME, BOOTTIME minus MONOTONIC */
	double ns_per_tick;		/* the system's MONOTONIC, lately */
	/* MONOTONIC_RAW against the TSC, and at the last sample (with last_t and last_mono). */
	struct tsc__raw_base raw;
	double kernel_last;		/* kernel_rate() then; 0: not known */
	double bias;			/* MONOTONIC over RAW, measured over the model */
	long user_hz;			/* adjtimex()'s tick is in us per 1/user_hz s */
	/* Rate from the measure alone: a seccomp filter may kill for adjtimex(), or its model is off. */
	bool no_adjtimex;
	uint64_t max_width;		/* the widest sample used */
	uint64_t fail_width;		/* the narrowest of the last sync that failed */
	uint64_t last_t, last_mono;	/* the last sample */
	uint64_t sync_mono;		/* MONOTONIC at the last sync */
	int64_t next_ns;		/* MONOTONIC when the next sync is due */
	uint64_t intervals[TSC__DISCIPLINE_INTERVALS];	/* the last ones between syncs */
	pthread_mutex_t lock;		/* one sync at a time: the helper's, the caller's */
	/* Synced by its readers: the one syncing, and the TSC before which none tries. */
	int busy;
	uint64_t due_t;
	uint64_t t0_pub;		/* the current page's start, for its readers */
	uint64_t skew_ticks;		/* TSC__SKEW_NS: a TSC further below t0 was reset */
	unsigned int failed;		/* syncs in a row whose sample was too noisy */
	bool clock_set;			/* the helper saw the system's clock set */
#ifdef TSC__TEST_HOOKS
	unsigned int wakeups;		/* the helper's syncs and tries */
#endif
	bool unusable;			/* the kernel withdrew tsc since */
	char root[256];			/* sysfs, for the housekeeping CPUs */
	char avail[320];		/* its available_clocksource, for the kernel's word on tsc */
	/* The helper, if asked for; pid: a fork's child has none. */
	bool helper;
	bool leased;			/* readers held to LEASE_NS: a helper syncs it */
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
int64_t tsc__test_sample_offset_ns;
#endif

/* One reading of the system's clocks, bracketed by the TSC. */
struct sample {
	uint64_t t, mono, width;
	uint64_t raw_t, raw;		/* MONOTONIC_RAW at TSC raw_t */
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
		/* RAW in a bracket of its own: the others' middle stays MONOTONIC's. */
		uint64_t ra = tsc_rdtsc_ordered();
		int64_t raw = tsc__ns_now(CLOCK_MONOTONIC_RAW);
		uint64_t a = tsc_rdtsc_ordered();
		int64_t m1 = tsc__ns_now(CLOCK_MONOTONIC), r = tsc__ns_now(CLOCK_REALTIME);
		int64_t b = tsc__ns_now(CLOCK_BOOTTIME), m2 = tsc__ns_now(CLOCK_MONOTONIC);
		uint64_t z = tsc_rdtsc_ordered();
		int64_t mid = m1 + (m2 - m1) / 2;
		double tsc_ns = (double)(z - a) * ns_per_tick;
		double raw_tsc_ns = (double)(a - ra) * ns_per_tick;
		uint64_t width;

		if (m2 < m1 || z < a || a < ra)
			continue;
		width = (uint64_t)(m2 - m1);
		if (tsc_ns > (double)width)
			width = (uint64_t)tsc_ns;
		if (raw_tsc_ns > (double)width)
			width = (uint64_t)raw_tsc_ns;
		if (width >= s->width)
			continue;
		s->width = width;
		s->t = a + (z - a) / 2;
		s->mono = (uint64_t)mid;
		s->raw = (uint64_t)raw;
		s->raw_t = ra + (a - ra) / 2;
		s->real_d = r - mid;
		s->boot_d = b - mid;
	}
#ifdef TSC__TEST_HOOKS
	s->real_d -= __atomic_load_n(&tsc__test_sample_offset_ns, __ATOMIC_RELAXED);
	s->boot_d -= __atomic_load_n(&tsc__test_sample_offset_ns, __ATOMIC_RELAXED);
#endif
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

/* ns in ticks, at the system's rate (a hold's segment has none). */
static uint64_t ticks_of(const struct tsc__discipline *d, double ns)
{
	return (uint64_t)(ns / d->ns_per_tick);
}

/*
 * How far past its start a clock its readers sync may be read: a period
 * and a half, its readers syncing it a period past its start (the bound
 * they are given; past it they take the slow path, the first of them to
 * sync, the rest reading the page on to this).
 */
static uint64_t readers_stale(const struct tsc__discipline *d)
{
	return ticks_of(d, (double)SYNC_PERIOD_NS * 3 / 2);
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
	uint64_t stale;

	__atomic_store_n(&p->seq, seq, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	tscfk_clock_page_fill(p, &s);	/* shift is 1..32: cannot fail */
	p->version = TSCFK_CLOCK_PAGE_VERSION;
	p->flags = TSCFK_CLOCK_TSC | TSC__TIMEPAGE_OWN;
	p->generation = d->generation;
	/* A hold is read at its start and no further. */
	stale = d->hold ? 0 : tsc__discipline_max_delta(d->intervals,
							ldexp(g->mult, -(int)g->shift));
	/*
	 * A hold's start 2^63 ticks on, which its values, of rate 0, do not
	 * depend on: no reader's unsigned compare passes it, whatever bound
	 * the reader loaded (an old page's, before the swap stored the
	 * hold's 0), and every reader takes the slow path, which holds.
	 */
	if (d->hold)
		p->cycle_last = g->t0 + (1ull << 63);
	if (d->mode == TSC_DISCIPLINE_READERS) {
		p->flags |= TSC__TIMEPAGE_READERS;
		stale = stale < readers_stale(d) ? stale : readers_stale(d);
	}
	p->max_cycles = stale;
	__atomic_store_n(&p->seq, seq + 1, __ATOMIC_RELEASE);
}

/* The writer's TSC after everything it stored before: fence, then lfence (AMD too). */
static uint64_t tsc_after_stores(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return tsc_rdtsc_ordered();
}

/*
 * A page the readers no longer use, or may not use: odd, and without
 * TSC, so that a reader still holding it goes to the slow path, and one
 * that holds nothing newer (a copy of the clock) to clock_gettime(),
 * rather than waiting for a write.  fill() gives it TSC again.
 */
static void leave(struct tscfk_clock_page *p)
{
	uint32_t seq = __atomic_load_n(&p->seq, __ATOMIC_RELAXED);

	__atomic_store_n(&p->seq, seq | 1, __ATOMIC_RELEASE);
	__atomic_store_n(&p->flags, (uint16_t)(p->flags & ~TSCFK_CLOCK_TSC), __ATOMIC_RELEASE);
}

/*
 * The bound the readers are given for the page now filled, past which
 * they take the slow path: its own max_cycles (0 for a hold); synced by
 * its readers, one period, at which the first of them syncs (the page
 * itself is read to max_cycles); with a helper, the lease.
 */
static uint64_t page_bound(const struct tsc__discipline *d)
{
	uint64_t bound = d->pages[!d->cur].p.max_cycles, b;

	if (d->mode == TSC_DISCIPLINE_READERS) {
		b = ticks_of(d, (double)SYNC_PERIOD_NS);
		bound = b < bound ? b : bound;
	}
	if (d->leased) {
		b = ticks_of(d, LEASE_NS);	/* the segment starts now */
		bound = b < bound ? b : bound;
	}
	return bound;
}

/*
 * Give the readers the filled page; leave the old one.  The TSC after,
 * or 0 where the clock was retired meanwhile (a readers' sync under way
 * when another thread finished the clock, which does not wait for it):
 * the slot is the retirer's then, and the page is left too.
 */
static uint64_t swap(struct tsc__discipline *d)
{
	struct tscfk_clock_page *p = &d->pages[!d->cur].p, *old = &d->pages[d->cur].p;
	const volatile struct tsc_timepage *was = (const volatile void *)old;
	const uint64_t bound = page_bound(d);

	/*
	 * The page, the old one odd, then the bound (see
	 * tsc__sysclock_slow_bounded()): a fast reader still holding the
	 * old page that loads the new bound, longer, finds that page odd
	 * and takes the slow path, rather than reading it past its own.
	 * The first page takes the slot whatever is there: the clock's
	 * start is no race.
	 */
	if (!d->published)
		__atomic_store_n(d->page_slot, (const volatile struct tsc_timepage *)p,
				 __ATOMIC_RELEASE);
	else if (!__atomic_compare_exchange_n(d->page_slot, &was,
					      (const volatile struct tsc_timepage *)p, false,
					      __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
		leave(p);
		return 0;
	}
	d->published = true;
	d->cur = !d->cur;
	leave(old);
	__atomic_store_n(d->bound_slot, bound, __ATOMIC_RELEASE);
	d->bound_t = d->seg.t0 + (d->mode == TSC_DISCIPLINE_READERS ? p->max_cycles : bound);
	__atomic_store_n(&d->t0_pub, d->seg.t0, __ATOMIC_RELEASE);
	return tsc_after_stores();
}

/*
 * What a sync sampled of the offsets of REALTIME and BOOTTIME from
 * MONOTONIC, what the page had, and whether each moved by more than a
 * sample's noise (a step of the system's clock; a suspend).
 */
struct offsets {
	int64_t real, boot;
	int64_t real_had, boot_had;
	bool real_step, boot_step;
};

static int64_t at_least(int64_t v, int64_t floor)
{
	return v > floor ? v : floor;
}

/*
 * REALTIME's offset: the system's (sys), or what readers were held at
 * (floor) where that is above it by no more than the clock's error, as
 * the slow path holds REALTIME (tsc__clock_slow()); further above, the
 * system's REALTIME was stepped back, and readers followed it.
 */
static int64_t real_at_least(int64_t sys, int64_t floor)
{
	return floor > sys && floor - sys <= TSC__FLOOR_MAX_NS ? floor : sys;
}

/*
 * The offsets of a new segment starting at v0, when the system's
 * MONOTONIC is sys and the old page at its bound held (the most its
 * readers had): a step taken as sampled; otherwise, where readers may
 * have left the old page for clock_gettime() (passed), no lower than the
 * system's clocks nor than the old page at its bound (REALTIME: within
 * its error), so that REALTIME and BOOTTIME go back no more than
 * MONOTONIC does, whatever the sample's noise; elsewhere as they were.  A
 * hold starts REALTIME and BOOTTIME at the system's, or no lower than
 * readers had them.
 */
static void set_offsets(struct tsc__discipline *d, const struct offsets *o, uint64_t v0,
			uint64_t sys, uint64_t held, bool passed, bool hold)
{
	int64_t had_lead = passed ? (int64_t)(v0 - held) : 0;

	if (hold) {
		/*
		 * The system's at the start, and as far on as the swap may
		 * be (a reader that takes the hold with the old page's bound
		 * reads it there, for REALTIME and BOOTTIME too).
		 */
		int64_t lead = (int64_t)(v0 - sys) - (HORIZON_NS + LATE_READ_NS);

		d->real_d = o->real_step ? o->real - lead :
			    real_at_least(o->real - lead, o->real_had - had_lead);
		d->boot_d = at_least(o->boot - lead, o->boot_had - had_lead);
	} else if (passed) {
		d->real_d = o->real_step ? o->real : real_at_least(o->real, o->real_had - had_lead);
		d->boot_d = o->boot_step ? o->boot : at_least(o->boot, o->boot_had - had_lead);
	} else {
		d->real_d = o->real_step ? o->real : o->real_had;
		d->boot_d = o->boot_step ? o->boot : o->boot_had;
	}
}

/* What new_segment() changes, to put back where it publishes nothing. */
struct seg_state {
	struct segment seg;
	bool have_seg, hold;
	uint32_t generation;
	int64_t real_d, boot_d;
};

static void seg_state_save(const struct tsc__discipline *d, struct seg_state *st)
{
	*st = (struct seg_state){ d->seg, d->have_seg, d->hold, d->generation, d->real_d, d->boot_d };
}

static void seg_state_restore(struct tsc__discipline *d, const struct seg_state *st)
{
	d->seg = st->seg;
	d->have_seg = st->have_seg;
	d->hold = st->hold;
	d->generation = st->generation;
	d->real_d = st->real_d;
	d->boot_d = st->boot_d;
}

/*
 * A new segment at rate ns_per_tick from now on, starting where the old
 * one is now, or (a step) at the system's MONOTONIC, sys_ns at TSC sys_t;
 * and no lower than floor.  A hold page if hold: the readers read it at
 * its start, clock_gettime() past it, and MONOTONIC and BOOTTIME never
 * below its start.  Published, with the offsets o gives (set_offsets());
 * false if it could not be (the writer preempted each time, or the clock
 * retired meanwhile), and then nothing changed.
 *
 * Readers go on reading the old page until the swap, and a late one a
 * little after (done: the writer's TSC once the old page is marked).  So
 * the new segment must be at or above the old from t0 to done: it starts
 * above it by FLOOR_SLACK_NS (their roundings) plus what a faster old
 * segment gains over HORIZON_NS, which covers the writer's own time; a
 * writer that took longer than that (preempted) before the swap builds
 * the segment again from later, and one delayed between the swap and the
 * mark publishes once more from the later of the two.  A hold, which
 * does not advance, starts where the old segment is at the end of that
 * horizon.
 *
 * The old page is read to its bound and no further: readers past it read
 * clock_gettime(), MONOTONIC and BOOTTIME held at the old page's value at
 * the bound (tsc__sysclock_slow_bounded()).  Where any may have passed it
 * before the swap (the sync near or past the bound),
 * the new segment starts no lower than that value, nor than the system's,
 * sys_ns at sys_t (the sample's MONOTONIC plus its width: above what any
 * clock_gettime() before the sample gave); the latter a step forward, in
 * a new generation where it is more than a sample's noise.
 */
static bool new_segment(struct tsc__discipline *d, double ns_per_tick, bool step,
			uint64_t sys_t, uint64_t sys_ns, uint64_t floor, bool hold,
			const struct offsets *o)
{
	uint64_t horizon = (uint64_t)(HORIZON_NS / ns_per_tick);
	uint64_t late = (uint64_t)(LATE_READ_NS / ns_per_tick);
	const uint64_t bound_t = d->bound_t;
	const struct segment first = d->seg;
	struct segment old = first;
	bool had = d->have_seg && !step, forward = false, published = false, last = false;
	struct seg_state good;

	seg_state_save(d, &good);
	for (int tries = 0; tries < 8; tries++) {
		uint64_t t0 = tsc_rdtsc_ordered(), v0, done, end;
		uint64_t sys = sys_ns + (uint64_t)llround((double)(int64_t)(t0 - sys_t) * ns_per_tick);
		uint64_t held = seg_at(&first, bound_t) + FLOOR_SLACK_NS;
		bool passed = had ? t0 + horizon + late >= bound_t : floor != 0;

		if (!had) {
			v0 = sys;
		} else if (t0 >= bound_t) {
			v0 = held;	/* nobody reads the old page here: held at its bound */
		} else if (hold) {
			end = t0 + horizon + late;
			v0 = seg_at(&old, end < bound_t ? end : bound_t) + FLOOR_SLACK_NS;
		} else {
			double gain = ldexp(old.mult, -(int)old.shift) - ns_per_tick;

			v0 = seg_at(&old, t0) + FLOOR_SLACK_NS +
			     (gain > 0 ? (uint64_t)ceil(gain * (double)horizon) : 0);
		}
		if (had && passed) {
			v0 = held > v0 ? held : v0;
			if (sys > v0) {
				if (!forward && sys - v0 > OFFSET_STEP_NS)
					d->generation++;
				forward = true;
				v0 = sys;
			}
		}
		v0 = floor > v0 ? floor : v0;
		set_offsets(d, o, v0, sys, held, passed, hold);
		d->seg = segment(t0, v0, ns_per_tick);
		if (hold)
			d->seg.mult = 0;	/* read anywhere, it is its start */
		d->have_seg = true;
		d->hold = hold;
		fill(d);
		last = false;
		if (had && tsc_after_stores() + late > t0 + horizon)
			continue;	/* preempted before the swap: again */
		done = swap(d);
		if (!done)
			break;		/* retired meanwhile */
		published = last = true;
		seg_state_save(d, &good);
		/* The old page is read to its bound and no further. */
		end = done + late < bound_t ? done + late : bound_t;
		if (!had || done + late <= t0 + horizon ||
		    seg_at(&old, end) < seg_at(&d->seg, done + late))
			return true;
		/* Preempted after it: again from the later of the two. */
		if (seg_at(&old, end) <= seg_at(&d->seg, done + late))
			old = d->seg;
	}
	/*
	 * Never this slow eight times over; the last page published stands,
	 * and what the clock keeps says what it holds.  Where none was,
	 * nothing changed: the readers keep the old page, and the sync says
	 * so (-EAGAIN).  A page filled and not given is left.
	 */
	if (!last) {
		leave(&d->pages[!d->cur].p);
		seg_state_restore(d, &good);
	}
	return published;
}

/* The kernel withdrew tsc as a clocksource: readers to clock_gettime(). */
static void withdraw(struct tsc__discipline *d)
{
	d->unusable = true;
	__atomic_store_n(d->page_slot, &tsc__syscall_page, __ATOMIC_RELEASE);
}

/*
 * Whether the kernel offers tsc as a clocksource: 1, 0, -1 if it cannot
 * be told.  Safe in a signal handler (readers sync): system calls only.
 */
static int tsc_offered(const struct tsc__discipline *d)
{
	char buf[256];
	ssize_t n;
	int fd = open(d->avail, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* A list of names, each followed by a space or a newline. */
	for (const char *w = buf; *w; ) {
		size_t len = strcspn(w, " \n");

		if (len == 3 && !memcmp(w, "tsc", 3))
			return 1;
		w += len;
		w += strspn(w, " \n");
	}
	return 0;
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

/*
 * Three periods, the period the longest of the last intervals; each
 * interval counted at most GAP_FACTOR times the longest before it (or
 * CONVERGE_S), so that one long gap (a caller that paused for an hour)
 * widens the bound twice over at most, not by its own length; a caller
 * that syncs at a longer period from now on gets it in full from its
 * second interval.
 */
uint64_t tsc__discipline_max_delta(const uint64_t *intervals, double ns_per_tick)
{
	double period = CONVERGE_S * 1e9, before = CONVERGE_S * 1e9;

	for (int i = TSC__DISCIPLINE_INTERVALS - 1; i >= 0; i--) {
		double iv = (double)intervals[i];

		if (iv > GAP_FACTOR * before)
			iv = GAP_FACTOR * before;
		if (iv > period)
			period = iv;
		if ((double)intervals[i] > before)
			before = (double)intervals[i];
	}
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

double tsc__discipline_kernel_rate(const struct timex *tx, long adjtime_us, long user_hz)
{
	const int pps = STA_PPSTIME | STA_PPSSIGNAL;
	double ns = (double)tx->tick * 1e3 * (double)user_hz + (double)tx->freq / 65536 * 1e3;
	double offset_ns = (double)tx->offset;

	if ((tx->status & pps) == pps || tx->constant < 0 || tx->constant > MAX_TC ||
	    user_hz <= 0)
		return 0;
	/*
	 * In microseconds kernels from 5.1 until the fix (6.13, and the
	 * stable branches since) report the offset as (u32)ns / 1000: a
	 * negative one comes out above 2^31 / 1000 (the PLL's offset is
	 * 0.5 s at most either way).
	 */
	if (!(tx->status & STA_NANO))
		offset_ns = tx->offset > 2147483 ?
			    (double)(int32_t)(uint32_t)((uint64_t)tx->offset * 1000) :
			    offset_ns * 1e3;
	/*
	 * Each second the kernel slews out offset / 2^k of the PLL's offset
	 * (k = 2 + constant) and reports what is left: this second's share
	 * is what is left / (2^k - 1).
	 */
	ns += offset_ns / (ldexp(1, 2 + (int)tx->constant) - 1);
	/* adjtime() slews 500 us a second while more than that is left. */
	if (adjtime_us)
		ns += adjtime_us > 0 ? MAX_TICKADJ_NS : -MAX_TICKADJ_NS;
	return ns > 0 ? ns / 1e9 : 0;
}

/*
 * The caller's word that its seccomp filters allow adjtimex(): how many
 * filters the thread that gave it had, plus one (0: no word).  It holds
 * on a thread with as many: one added since (a lockdown after set-up)
 * may forbid the call, and is not taken for allowed.
 */
static int allowed_filters;

/*
 * The calling thread's seccomp mode and number of filters (-1: not
 * shown, before Linux 5.9), from its status; false if it cannot be told.
 * A filter may kill the process for adjtimex(), which most sandboxes do
 * not allow (systemd's @system-service), and is never taken off.  System
 * calls only that every filter allows: a reader's sync asks, maybe in a
 * signal handler.
 */
static bool thread_seccomp(int *mode, int *filters)
{
	char buf[4096];
	size_t len = 0;
	ssize_t n;
	const char *f;
	int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return false;
	while (len < sizeof(buf) - 1 &&
	       (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	*mode = 0;
	*filters = -1;
	/* No such line: a kernel without seccomp. */
	f = strstr(buf, "\nSeccomp:\t");
	if (f)
		*mode = f[10] - '0';
	f = strstr(buf, "\nSeccomp_filters:\t");
	if (f)
		*filters = (int)strtol(f + 18, NULL, 10);
	return len > 0;
}

void tsc__adjtimex_allow(void)
{
	int mode, filters;

	if (thread_seccomp(&mode, &filters) && filters >= 0)
		__atomic_store_n(&allowed_filters, filters + 1, __ATOMIC_RELAXED);
}

bool tsc__adjtimex_callable(void)
{
	int mode, filters, allowed = __atomic_load_n(&allowed_filters, __ATOMIC_RELAXED);

	if (!thread_seccomp(&mode, &filters))
		return false;
	return mode == 0 || (allowed && filters == allowed - 1);
}

/*
 * The kernel's NTP state now (reading it needs no privilege; system
 * calls only, for a reader's sync in a signal handler): MONOTONIC's rate
 * over MONOTONIC_RAW's, or 0.  One call, and a second only while the
 * PLL runs (each takes the kernel's timekeeping lock a moment).
 */
static double kernel_rate(struct tsc__discipline *d)
{
	struct timex tx = { .modes = ADJ_OFFSET_SS_READ }, pll = { .modes = 0 };
	long adjtime_us;

	if (d->no_adjtimex || (d->no_adjtimex = !tsc__adjtimex_callable()))
		return 0;
	if (adjtimex(&tx) < 0)
		return 0;
	adjtime_us = tx.offset;
	tx.offset = 0;
	if (tx.status & STA_PLL) {
		if (adjtimex(&pll) < 0)
			return 0;
		tx = pll;
	}
	return tsc__discipline_kernel_rate(&tx, adjtime_us, d->user_hz);
}

/*
 * The TSC's rate in MONOTONIC_RAW ns: RAW runs at the clocksource's own
 * rate, which NTP never touches, so a base of 32 to 64 s measures it
 * finely; 0 until half a second is seen.  It starts again across a gap (a
 * suspend, which RAW does not count, or a TSC reset), and where the last
 * interval's rate (interval_rate, 0: none) tells another (a clocksource
 * changed, a VM paused with its TSC running) beyond the samples' noise.
 */
double tsc__discipline_raw_rate(struct tsc__raw_base *b, uint64_t t, uint64_t ns, bool gap,
				double interval_rate, double noise)
{
	double rate = 0;

	if (ns > b->ns[0] && ns - b->ns[0] >= 500000000 && t > b->t[0])
		rate = (double)(ns - b->ns[0]) / (double)(t - b->t[0]);
	if (interval_rate > 0 && rate > 0 && fabs(interval_rate / rate - 1) > noise) {
		/* From the last sample on: the interval's rate. */
		b->t[0] = b->t[1] = b->last_t;
		b->ns[0] = b->ns[1] = b->last_ns;
		return interval_rate;
	}
	if (gap || ns <= b->ns[1] || t <= b->t[1]) {
		b->t[0] = b->t[1] = t;
		b->ns[0] = b->ns[1] = ns;
		return 0;
	}
	if (ns - b->ns[1] >= RAW_BASE_NS) {
		b->t[0] = b->t[1];
		b->ns[0] = b->ns[1];
		b->t[1] = t;
		b->ns[1] = ns;
	}
	return rate;
}

/* A CANCEL_ON_SET timer: readable (ECANCELED) when the clock is set or the system resumes. */
static int arm_set_fd(int fd)
{
	struct itimerspec far = { .it_value = { .tv_sec = (time_t)1 << 40 } };

	return timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &far, NULL);
}

/*
 * A CANCEL_ON_SET timer of the clock's own, or -1 where there is none
 * (then only a step of REALTIME larger than a sample's noise is seen).
 */
static int open_set_fd(void)
{
	int fd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);

	if (fd >= 0 && arm_set_fd(fd)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/*
 * Was the system's clock set, or did the system resume, since the last
 * time this was asked (re-armed then)?  System calls only: a reader's
 * sync asks it, in a signal handler perhaps.
 */
static bool clock_was_set(struct tsc__discipline *d)
{
	uint64_t expired;

	if (d->set_fd < 0 || read(d->set_fd, &expired, sizeof(expired)) >= 0 ||
	    errno != ECANCELED)
		return false;
	(void)arm_set_fd(d->set_fd);
	return true;
}

/*
 * One sync, its caller holding the block's lock (or, synced by its
 * readers, busy): 0, or a negative errno, and *why (NULL for -EAGAIN,
 * whose reason is fail_width).  Nothing here is unsafe in a signal
 * handler: a reader may be in one.  next_ns says when the next is due.
 */
static int sync_core(struct tsc__discipline *d, const char **why)
{
	/* An offset read twice moves by up to the two samples' widths. */
	const long long offset_step = OFFSET_STEP_NS > 2 * (long long)d->max_width ?
				      OFFSET_STEP_NS : 2 * (long long)d->max_width;
	bool gap, reset, measured, beyond, past, hold, set, ok;
	uint64_t interval, horizon, above, held;
	double rate, raw, kernel, interval_raw;
	struct offsets o;
	struct sample s;
	int64_t err;

	*why = NULL;
	if (d->unusable) {
		*why = "the kernel withdrew tsc as a clocksource: the clock reads clock_gettime()";
		return -ENODEV;
	}
	if (d->pid != getpid()) {
		*why = "a disciplined clock of the parent process: initialise it again";
		return -EINVAL;
	}
	if (tsc_offered(d) == 0) {
		withdraw(d);
		*why = "the kernel no longer offers tsc as a clocksource: the clock reads clock_gettime() now";
		return -ENODEV;
	}
	/*
	 * A step of REALTIME smaller than a sample's noise (a PTP servo's
	 * ADJ_SETOFFSET of a microsecond) is told by the clock being set:
	 * then REALTIME's offset is taken as sampled, however little it moved.
	 */
	set = clock_was_set(d) || d->clock_set;
	take_sample(&s, d->ns_per_tick);
	if (s.width > d->max_width) {
		d->fail_width = s.width;
		d->clock_set = set;	/* for the next try */
		return -EAGAIN;
	}
	d->clock_set = false;
	/*
	 * Each offset on its own: a REALTIME step leaves BOOTTIME's be, and
	 * BOOTTIME's moves only across a suspend.
	 */
	o = (struct offsets){
		.real = s.real_d, .boot = s.boot_d, .real_had = d->real_d, .boot_had = d->boot_d,
		.real_step = llabs(s.real_d - d->real_d) > offset_step || set,
		.boot_step = llabs(s.boot_d - d->boot_d) > offset_step,
	};
	/*
	 * The system's MONOTONIC against the TSC over half a second or
	 * more; not across a suspend (MONOTONIC stood still, or the TSC
	 * was reset), which only moves the starting point on.
	 */
	reset = s.t + d->skew_ticks < d->seg.t0;
	gap = s.t <= d->last_t || s.mono <= d->last_mono || s.raw <= d->raw.last_ns ||
	      s.raw_t <= d->raw.last_t || o.boot_step || reset;
	measured = !gap && s.mono - d->last_mono >= 500000000;
	kernel = kernel_rate(d);
	interval_raw = 0;
	if (measured) {
		double q = (double)(s.mono - d->last_mono) / (double)(s.raw - d->raw.last_ns);

		d->ns_per_tick = (double)(s.mono - d->last_mono) / (double)(s.t - d->last_t);
		interval_raw = (double)(s.raw - d->raw.last_ns) / (double)(s.raw_t - d->raw.last_t);
		/*
		 * Where the model held still over the interval, what it
		 * leaves out (the kernel's roundings, ntp_tick_adj); a model
		 * 1000 ppm off does not describe this kernel, and is dropped.
		 */
		if (kernel > 0 && kernel == d->kernel_last) {
			if (fabs(q / kernel - 1) > MAX_SLEW)
				d->no_adjtimex = true;
			d->bias = d->bias > 0 ? d->bias + (q / kernel - d->bias) / 4 : q / kernel;
		}
	}
	raw = tsc__discipline_raw_rate(&d->raw, s.raw_t, s.raw, gap, interval_raw,
				       measured ? 4.0 * (double)d->max_width /
						  (double)(s.mono - d->last_mono) + RAW_NOISE : 0);
	if (gap || measured) {
		d->last_t = s.t;
		d->last_mono = s.mono;
		d->raw.last_t = s.raw_t;
		d->raw.last_ns = s.raw;
		d->kernel_last = kernel;
	}
	/* The kernel's rate now, where it tells; else the last interval's. */
	rate = raw > 0 && kernel > 0 && !d->no_adjtimex ?
	       raw * kernel * (d->bias > 0 ? d->bias : 1) : d->ns_per_tick;
	interval = gap ? 0 : s.mono - d->sync_mono;
	d->sync_mono = s.mono;
	d->next_ns = (int64_t)s.mono + SYNC_PERIOD_NS;
	/* Learnt whatever this sync does: the next page's bound follows it. */
	horizon = tsc__discipline_horizon(d->intervals, interval);
	/*
	 * Beyond the page (past its bound, a hold, or a TSC reset below its
	 * start), readers read clock_gettime() held at the page's value at
	 * the bound: that is the clock now, or the system's if above.  Near
	 * the bound, readers may leave the page before the swap: the new
	 * page starts no lower than the system's clocks, above by the
	 * sample's width, nor than the old page at its bound (new_segment()).
	 */
	beyond = reset || d->hold || s.t >= d->bound_t;
	past = beyond || s.t + (uint64_t)(NEAR_BOUND_NS / rate) >= d->bound_t;
	held = seg_at(&d->seg, d->bound_t) + FLOOR_SLACK_NS;
	above = s.mono + s.width + FLOOR_SLACK_NS;
	if (beyond)
		err = held > s.mono ? (int64_t)(held - s.mono) : 0;
	else
		err = (int64_t)(seg_at(&d->seg, s.t) - s.mono);
	/*
	 * Ahead by more than a step after a suspend (which the TSC counted
	 * and MONOTONIC did not, or a reset): readers may have had it, so
	 * the clock holds still until the system's catches up, rather than
	 * going back; a hold synced before that holds on.
	 */
	hold = (o.boot_step || reset) ? err > STEP_NS : d->hold && err > 0;
	if (hold || reset || err < -STEP_NS) {
		d->generation++;
		ok = new_segment(d, rate, reset || !hold, s.t, past ? above : s.mono,
				 past ? held : 0, hold, &o);
		if (ok && hold)
			d->next_ns = (int64_t)d->seg.v0;
	} else {
		double corr = tsc__discipline_corr(err, horizon);

		if (o.real_step || o.boot_step)
			d->generation++;
		ok = new_segment(d, rate * (1 + corr), false, s.t, above, 0, false, &o);
	}
	if (!ok) {
		*why = "sync: preempted while publishing, or the clock was finished: try again";
		return -EAGAIN;
	}
	return 0;
}

/* sync_core(), its reason for tsc_last_error(). */
static int sync_locked(struct tsc__discipline *d)
{
	const char *why;
	int err = sync_core(d, &why);

	if (err == -EAGAIN && !why)
		return tsc__fail(-EAGAIN, "sync: the system's clocks read %llu ns apart at best, over %llu ns: try again",
				 (unsigned long long)d->fail_width,
				 (unsigned long long)d->max_width);
	return err ? tsc__fail(err, "%s", why) : 0;
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

/* Take busy, a readers' clock's sync: false if another has it. */
static bool take_busy(struct tsc__discipline *d)
{
	int idle = 0;

	return __atomic_compare_exchange_n(&d->busy, &idle, 1, false, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

static void drop_busy(struct tsc__discipline *d)
{
	__atomic_store_n(&d->busy, 0, __ATOMIC_RELEASE);
}

/*
 * A readers' clock, synced: when the next is due (the TSC), from how
 * this one went.
 */
static void readers_synced(struct tsc__discipline *d, int err)
{
	int64_t in = err == -EAGAIN ? retry_ns(++d->failed) :
		     d->next_ns - tsc__ns_now(CLOCK_MONOTONIC);

	if (err != -EAGAIN)
		d->failed = 0;
	if (in < 0)
		in = 0;
	__atomic_store_n(&d->due_t, tsc_rdtsc_ordered() + ticks_of(d, (double)in),
			 __ATOMIC_RELEASE);
}

int tsc__discipline_sync(struct tsc__discipline *d)
{
	int ret;

	/* A fork's child may hold the lock as the parent's helper left it. */
	if (d->pid != getpid())
		return tsc__fail(-EINVAL, "a disciplined clock of the parent process: initialise it again");
	if (d->mode == TSC_DISCIPLINE_READERS) {
		if (!take_busy(d))
			return tsc__fail(-EAGAIN, "a reader is syncing the clock: try again");
		ret = sync_locked(d);
		readers_synced(d, ret);
		drop_busy(d);
		return ret;
	}
	pthread_mutex_lock(&d->lock);
	ret = sync_locked(d);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/*
 * A reader of a clock its readers sync, at TSC reading t, past the page
 * (tsc__sysclock_slow_bounded()): if a sync is due, or the TSC went back
 * below the page (a reset), and no other reader is syncing, this one
 * does, and the readers then read the new page.  Never waits: another
 * reader's sync under way, or one not due, leaves the page as it is.
 * Safe in a signal handler: the sync makes system calls and does
 * arithmetic, and errno is left as it was.
 */
void tsc__discipline_poll(struct tsc__discipline *d, uint64_t t)
{
	const char *why;
	int saved = errno;

	if (d->mode != TSC_DISCIPLINE_READERS || __atomic_load_n(&d->unusable, __ATOMIC_RELAXED))
		return;
	if (t < __atomic_load_n(&d->due_t, __ATOMIC_ACQUIRE) &&
	    t + d->skew_ticks >= __atomic_load_n(&d->t0_pub, __ATOMIC_ACQUIRE))
		return;
	if (d->pid != getpid() || !take_busy(d))
		return;
	if (!d->unusable)
		readers_synced(d, sync_core(d, &why));
	drop_busy(d);
	errno = saved;
}

/*
 * The helper's lease on the page: readers extrapolate it LEASE_NS past its
 * start at most, a quarter of a second past the next sync, rather than
 * three sync periods.  A suspend that the TSC counts through freezes the
 * helper with every other task, and MONOTONIC does not count it: after
 * one longer than what is left of the lease, every reader reads
 * clock_gettime() (held at the page's value at the bound) until the
 * helper's sync, which the resume wakes at once, instead of reading ahead
 * by the time asleep; after a shorter one the readers may read ahead by
 * it, and the sync holds the clock still until the system's catches up.
 * A helper starved past the lease is caught the same way, and syncs that
 * keep failing (retried 10 ms on, then 20, 40, 80: within the quarter
 * second) too.  The helper wakes once a second, readers or none.
 */

/* How long to poll: until due. */
static int poll_ms(int64_t due)
{
	int64_t left = due - tsc__ns_now(CLOCK_MONOTONIC);

	if (left <= 0)
		return 0;
	return left >= INT32_MAX * 1000000LL ? INT32_MAX : (int)((left + 999999) / 1000000);
}

/* When the sync just made says the next is due. */
static int64_t next_due(struct tsc__discipline *d)
{
	int64_t next;

	pthread_mutex_lock(&d->lock);
	next = d->next_ns;
	pthread_mutex_unlock(&d->lock);
	return next;
}

static void *helper(void *arg)
{
	struct tsc__discipline *d = arg;
	int64_t due = tsc__ns_now(CLOCK_MONOTONIC) + SYNC_PERIOD_NS;	/* the next sync */
	unsigned int failed = 0;	/* syncs in a row whose sample was too noisy */

	/* Named (create_helper() tries first), where /proc is not mounted too. */
	(void)pthread_setname_np(pthread_self(), TSC__HELPER_NAME);
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
			pthread_mutex_lock(&d->lock);
			d->clock_set = true;
			pthread_mutex_unlock(&d->lock);
			due = tsc__ns_now(CLOCK_MONOTONIC);
		}
		if (tsc__ns_now(CLOCK_MONOTONIC) < due)
			continue;
#ifdef TSC__TEST_HOOKS
		__atomic_fetch_add(&d->wakeups, 1, __ATOMIC_RELAXED);
#endif
		/* A sync that failed is tried again soon (retry_ns()). */
		if (tsc__discipline_sync(d) == -EAGAIN) {
			due = tsc__ns_now(CLOCK_MONOTONIC) + retry_ns(++failed);
			continue;
		}
		failed = 0;
		due = next_due(d);
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
	if (err)
		return tsc__fail(-err, "pthread_create: %s", strerror(err));
	/*
	 * Named before the caller goes on, for ps -L and top -H and whoever
	 * places threads by name (through /proc: the helper names itself too).
	 */
	(void)pthread_setname_np(d->thread, TSC__HELPER_NAME);
	return 0;
}

static int start_helper(struct tsc__discipline *d, bool inherit, char *where, size_t size)
{
	pthread_attr_t attr;
	bool pinned = false;
	int err;

	d->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (d->stop_fd < 0)
		return tsc__fail(-errno, "eventfd: %s", strerror(errno));
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
	close(d->stop_fd);
	d->stop_fd = -1;
	return err;
}

/*
 * Retire a block: no sync publishes from it again, the readers are sent
 * to clock_gettime() and its pages left (leave()); kept, never freed.  A
 * readers' sync under way is not waited for (a reader may be of any
 * priority, or stopped): its publication fails, the slot being the
 * retirer's (swap()).
 */
static void retire(struct tsc__discipline *d)
{
	/* A fork's child may find the lock held by the parent's helper. */
	bool ours = d->pid == getpid();

	if (ours)
		pthread_mutex_lock(&d->lock);
	__atomic_store_n(&d->unusable, true, __ATOMIC_SEQ_CST);
	/*
	 * The slot to clock_gettime()'s page while it holds one of ours: a
	 * readers' sync under way may swap it meanwhile, a few times at most
	 * (new_segment()'s tries), and no sync starts once unusable is set.
	 */
	for (;;) {
		const volatile struct tsc_timepage *p = __atomic_load_n(d->page_slot,
									__ATOMIC_SEQ_CST);

		if (p != (const volatile void *)&d->pages[0].p &&
		    p != (const volatile void *)&d->pages[1].p)
			break;
		if (__atomic_compare_exchange_n(d->page_slot, &p, &tsc__syscall_page, false,
						__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
			break;
	}
	for (int i = 0; i < 2; i++)
		leave(&d->pages[i].p);
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

/*
 * The clock's timer, closed once no sync can read it: a retired block's
 * syncs stop at its lock, or, synced by its readers, at busy, which a
 * reader's sync under way holds for microseconds: a millisecond's tries
 * (never a wait without bound), and where a reader is stopped in one,
 * the descriptor is left open rather than closed under it.
 */
static void close_set_fd(struct tsc__discipline *d)
{
	bool idle = d->mode != TSC_DISCIPLINE_READERS || d->pid != getpid();

	for (int tries = 0; !idle && tries < 10000; tries++) {
		idle = take_busy(d);
		if (!idle)
			__builtin_ia32_pause();
	}
	if (idle && d->set_fd >= 0 && d->pid == getpid()) {
		close(d->set_fd);
		d->set_fd = -1;
	}
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
 * Does the clock, a fork's child's copy, tell the child's MONOTONIC?  Its
 * page within a step of clock_gettime()'s, or a hold no further ahead
 * than a hold can be: not where the parent moved its children into a
 * time namespace with other offsets.
 */
static bool tells_our_clock(const struct tsc__discipline *d)
{
	int64_t sys = tsc__ns_now(CLOCK_MONOTONIC);
	int64_t page = (int64_t)seg_at(&d->seg, tsc_rdtsc_ordered());

	if (d->hold)
		return page >= sys - STEP_NS && page - sys <= 3 * SYNC_PERIOD_NS;
	return llabs(page - sys) <= STEP_NS;
}

/*
 * In a fork's child, the only thread: a clock its readers sync goes on
 * there, unless a sync was under way in the parent at the fork (the
 * child's copy of it is not whole) or the child's clocks are not the
 * parent's; every other clock's pages are left, so that its readers take
 * clock_gettime() (page_begin() waits only for a page that says TSC),
 * until it is initialised again, since the child has no helper and may
 * not sync the parent's.  Written plainly: nothing else runs here, and
 * no lock is taken that the parent's helper may have held.
 */
void tsc__discipline_forked(void)
{
	for (struct tsc__discipline *d = live; d; d = d->next) {
		if (d->mode == TSC_DISCIPLINE_READERS && !d->unusable && !d->busy &&
		    tells_our_clock(d)) {
			d->pid = getpid();
			pthread_mutex_init(&d->lock, NULL);
			/* A timer of its own: the parent's, shared, tells one of the two. */
			if (d->set_fd >= 0)
				close(d->set_fd);
			d->set_fd = open_set_fd();
			continue;
		}
		d->unusable = true;
		for (int i = 0; i < 2; i++)
			leave(&d->pages[i].p);
	}
	pthread_mutex_unlock(&blocks_lock);
}

bool tsc__discipline_usable(const struct tsc__discipline *d)
{
	return d && !__atomic_load_n(&d->unusable, __ATOMIC_ACQUIRE);
}

int tsc__discipline_start(const struct tsc__discipline_slots *at, const char *root,
			  enum tsc_sysclock_discipline mode, bool inherit,
			  const struct tsc_freq *freq, char *why, size_t why_size,
			  struct tsc__discipline **out)
{
	const bool with_helper = mode == TSC_DISCIPLINE_HELPER;
	char where[256] = "";
	TSC_OPTS(fo, .sysfs_root = root, .calibrate_max_ms = 20);
	struct tsc__discipline *d;
	struct offsets o;
	struct tsc_freq f;
	struct sample s;
	int err;

	if (tsc__tsc_available(root) == 0)
		return tsc__fail(-ENODEV, "the kernel does not offer tsc as a clocksource (it marked the TSC unstable, or never trusted it): no TSC clock is kept in step across CPUs");
	if (strlen(root) >= sizeof(d->root))
		return tsc__fail(-ENAMETOOLONG, "sysfs root %s: too long", root);
	/*
	 * A rate to start from: the syncs measure the system's, so a short
	 * calibration (where no source states one) does, and keeps the
	 * first read of a front door from waiting a second for a precise
	 * one; a longer one where that finds too few good samples.
	 */
	if (freq) {
		f = *freq;
	} else {
		err = tsc_freq_get(&f, &fo);
		if (err == -EAGAIN) {
			fo.calibrate_max_ms = 0;
			err = tsc_freq_get(&f, &fo);
		}
		if (err)
			return err;
	}
	d = aligned_alloc(64, (sizeof(*d) + 63) / 64 * 64);
	if (!d)
		return tsc__fail(-ENOMEM, "out of memory");
	memset(d, 0, sizeof(*d));
	d->page_slot = at->page;
	d->bound_slot = at->bound;
	d->mode = mode;
	d->pid = getpid();
	d->stop_fd = -1;
	d->set_fd = open_set_fd();
	snprintf(d->root, sizeof(d->root), "%s", root);
	snprintf(d->avail, sizeof(d->avail),
		 "%s/devices/system/clocksource/clocksource0/available_clocksource", root);
	pthread_mutex_init(&d->lock, NULL);
	/* Both pages odd until written: a stale pointer never reads zeros. */
	d->pages[0].p.seq = d->pages[1].p.seq = 1;
	d->ns_per_tick = 1e9 / f.hz;
	d->skew_ticks = (uint64_t)(TSC__SKEW_NS / d->ns_per_tick);
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
	/* The page starts from a sample of now, not the best of the last few. */
	{
		struct sample now;

		take_sample(&now, d->ns_per_tick);
		if (now.width <= d->max_width)
			s = now;
	}
	d->real_d = s.real_d;
	d->boot_d = s.boot_d;
	d->last_t = s.t;
	d->last_mono = s.mono;
	d->raw.last_t = d->raw.t[0] = d->raw.t[1] = s.raw_t;
	d->raw.last_ns = d->raw.ns[0] = d->raw.ns[1] = s.raw;
	d->user_hz = sysconf(_SC_CLK_TCK);
	d->kernel_last = kernel_rate(d);
	d->sync_mono = s.mono;
	d->next_ns = (int64_t)s.mono + SYNC_PERIOD_NS;
	/* The first page on a lease already: the helper syncs within it. */
	d->leased = with_helper;
	/* No reader syncs before the first page's due time is set. */
	d->due_t = UINT64_MAX;
	/* Live before its page is given: a fork's child finds it, and leaves it. */
	pthread_mutex_lock(&blocks_lock);
	d->next = live;
	live = d;
	pthread_mutex_unlock(&blocks_lock);
	/* Above any clock_gettime() before the sample: readers may have had one. */
	o = (struct offsets){ .real = s.real_d, .boot = s.boot_d, .real_had = s.real_d,
			      .boot_had = s.boot_d, .real_step = true, .boot_step = true };
	if (!new_segment(d, d->ns_per_tick, true, s.t, s.mono + s.width + FLOOR_SLACK_NS, 0,
			 false, &o)) {
		err = tsc__fail(-EAGAIN, "preempted eight times while publishing the first page: try again");
		goto fail;
	}
	__atomic_store_n(&d->due_t, d->seg.t0 + ticks_of(d, (double)SYNC_PERIOD_NS),
			 __ATOMIC_RELEASE);
	if (with_helper) {
		err = start_helper(d, inherit, where, sizeof(where));
		if (err)
			goto fail;
	}
	snprintf(why, why_size,
		 "disciplined: the library's own mapping from the TSC (%.6f MHz from %s), slewed onto clock_gettime() %s%s",
		 f.hz / 1e6, tsc_source_name(f.source),
		 with_helper ? "about once a second by a thread of the library's, " :
		 mode == TSC_DISCIPLINE_READERS ? "about once a second by its readers, no thread" :
		 "at each tsc_sysclock_sync()", where);
	*out = d;
	return 0;
fail:
	retire(d);
	__atomic_store_n(at->page, &tsc__syscall_page, __ATOMIC_RELEASE);
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
		close(d->stop_fd);
		d->helper = false;
	}
	retire(d);
	close_set_fd(d);
}

int tsc__discipline_thread(const struct tsc__discipline *d, pthread_t *thread)
{
	if (!d || !d->helper)
		return -ENOENT;
	*thread = d->thread;
	return 0;
}

#ifdef TSC__TEST_HOOKS
/* How many times the helper woke to sync, for the unit tests. */
unsigned int tsc__test_wakeups(const struct tsc__discipline *d)
{
	return __atomic_load_n(&d->wakeups, __ATOMIC_RELAXED);
}

/* The system's clock set, as the helper's timer would say, for the unit tests. */
void tsc__test_clock_set(struct tsc__discipline *d)
{
	pthread_mutex_lock(&d->lock);
	d->clock_set = true;
	pthread_mutex_unlock(&d->lock);
}

/*
 * What a resume shows the clock, for the unit tests, which cannot
 * suspend: its page and state republished as if the TSC now read ticks
 * less than it does (a TSC reset), and as if MONOTONIC had missed
 * asleep_ns that the TSC counted (BOOTTIME and REALTIME counted them).
 * The values readers get are the same as before, at the TSC shifted.
 */
void tsc__test_resume(struct tsc__discipline *d, uint64_t ticks, uint64_t asleep_ns)
{
	pthread_mutex_lock(&d->lock);
	while (d->mode == TSC_DISCIPLINE_READERS && !take_busy(d))
		sched_yield();
	d->seg.t0 += ticks;
	d->seg.v0 += asleep_ns;
	d->real_d -= (int64_t)asleep_ns;
	d->boot_d -= (int64_t)asleep_ns;
	d->bound_t += ticks;
	d->last_t += ticks;
	d->due_t += ticks;
	fill(d);
	swap(d);
	if (d->mode == TSC_DISCIPLINE_READERS)
		drop_busy(d);
	pthread_mutex_unlock(&d->lock);
}
#endif
