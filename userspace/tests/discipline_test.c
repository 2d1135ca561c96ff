// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The disciplined system clock, here, without the module: asked for, it
 * is the path taken and says why; it follows the system's three clocks;
 * started from a frequency 500 ppm wrong it converges on them; and under
 * a writer re-syncing every 200 us, readers on other threads never see
 * it go back, each on its own or against each other.  Its sync and its
 * failures: a clock that is not disciplined refuses tsc_sysclock_sync(),
 * and one re-initialised or finished stops its helper (the sanitizers
 * see a leaked thread or page), in a forked child too, which has none.
 * A clock nobody synced past its bound never goes back, whether it was
 * ahead of the system's or behind.  In a sandbox that kills for
 * adjtimex() it syncs without it.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_sysfs.h"
#include "seccomp_filter.h"
#include "internal.h"
#include "tsc_clock_page.h"

static int64_t now(clockid_t id)
{
	return tsc__ns_now(id);
}

static int init(struct tsc_sysclock *c, const char *dir,
		enum tsc_sysclock_discipline disc)
{
	TSC_SYSCLOCK_OPTS(o, .sysfs_root = dir, .discipline = disc);

	return tsc_sysclock_init(c, &o);
}

/*
 * The largest distance, over n reads, of each clock from clock_gettime()'s
 * around it (0 if within); the reads a ms apart.
 */
static int64_t worst_error(const struct tsc_sysclock *c, int n)
{
	static const clockid_t ids[] = { CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME };
	int64_t worst = 0;

	for (int i = 0; i < n; i++) {
		for (int k = 0; k < 3; k++) {
			int64_t a = now(ids[k]);
			int64_t v = (int64_t)(k == 0 ? tsc_sysclock_realtime(c) :
					      k == 1 ? tsc_sysclock_monotonic(c) :
					      tsc_sysclock_boottime(c));
			int64_t b = now(ids[k]);
			int64_t e = v < a ? a - v : v > b ? v - b : 0;

			if (e > worst)
				worst = e;
		}
		usleep(1000);
	}
	return worst;
}

FIXTURE(disc) {
	char dir[64];
};

FIXTURE_SETUP(disc)
{
	fake_root(_metadata, self->dir, sizeof(self->dir), 0);
}

FIXTURE_TEARDOWN(disc)
{
	remove_root(self->dir);
}

/* Asked for: the path, why, and the system's clocks, with a helper. */
TEST_F(disc, follows_the_system_clocks)
{
	TSC_SYSCLOCK(c);
	int64_t err;

	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_HELPER)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_DISCIPLINED, c.path) TH_LOG("%s", c.why);
	EXPECT_NE(NULL, strstr(c.why, "not exact: no ")) TH_LOG("%s", c.why);
	EXPECT_NE(NULL, strstr(c.why, "by a thread of the library's")) TH_LOG("%s", c.why);
	err = worst_error(&c, 2500);
	TH_LOG("worst error over 2.5 s: %lld ns", (long long)err);
	/* The anchoring sample's width (5 us at most) and a few ppm. */
	EXPECT_GT(100000, err);
	tsc_sysclock_fini(&c);
	EXPECT_EQ(NULL, c.disc);
	/* Released: no more syncs, and the reason says so. */
	EXPECT_EQ(-EINVAL, tsc_sysclock_sync(&c));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "tsc_sysclock_fini() was called"))
		TH_LOG("%s", tsc_last_error());
}

/* Not asked for: clock_gettime(), and no sync. */
TEST_F(disc, only_when_asked_for)
{
	TSC_SYSCLOCK(c);

	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_NONE));
	EXPECT_EQ(TSC_SYSCLOCK_SYSCALL, c.path);
	EXPECT_EQ(-EINVAL, tsc_sysclock_sync(&c));
	EXPECT_EQ(-EINVAL, init(&c, self->dir, (enum tsc_sysclock_discipline)7));
}

struct race {
	struct tsc_sysclock *c;
	volatile bool stop;
	uint64_t latest[3];	/* the largest value any reader has returned, by clock */
	uint64_t back;		/* reads below one seen before them */
	uint64_t back_by[3];	/* of those, by clock: REALTIME, MONOTONIC, BOOTTIME */
	uint64_t most_back[3];	/* and the most each went back by */
	bool realtime_tolerated;	/* REALTIME's, up to 100 us, not counted in back */
	uint64_t reads, syncs;
};

/*
 * One read of each clock, each after seeing the latest any thread had
 * of it: below it, or below this thread's previous one (mine[]), counts
 * as back.  No test here steps REALTIME, which may go back only then.
 */
static void read_on(struct race *r, uint64_t mine[3])
{
	for (int k = 0; k < 3; k++) {
		uint64_t seen = __atomic_load_n(&r->latest[k], __ATOMIC_ACQUIRE);
		uint64_t v;

		__builtin_ia32_lfence();	/* read after seen, not before */
		v = k == 0 ? tsc_sysclock_realtime(r->c) : k == 1 ? tsc_sysclock_monotonic(r->c) :
		    tsc_sysclock_boottime(r->c);
		if (v < seen || v < mine[k]) {
			uint64_t by = (seen > mine[k] ? seen : mine[k]) - v;
			uint64_t most = __atomic_load_n(&r->most_back[k], __ATOMIC_RELAXED);

			if (!(k == 0 && r->realtime_tolerated && by < 100000))
				__atomic_fetch_add(&r->back, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&r->back_by[k], 1, __ATOMIC_RELAXED);
			while (by > most && !__atomic_compare_exchange_n(&r->most_back[k], &most, by,
									  false, __ATOMIC_RELAXED,
									  __ATOMIC_RELAXED))
				;
		}
		while (seen < v && !__atomic_compare_exchange_n(&r->latest[k], &seen, v, false,
								__ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
			;
		mine[k] = v;
	}
}

static void *reader(void *arg)
{
	struct race *r = arg;
	uint64_t mine[3] = { 0 }, n = 0;

	for (; !r->stop; n++)
		read_on(r, mine);
	__atomic_fetch_add(&r->reads, n, __ATOMIC_RELAXED);
	return NULL;
}

/*
 * Started 500 ppm off (a fake tsc_freq_khz), synced by the caller every
 * 200 us for 3 s while two threads read: never back, and at the end
 * close to the system's clocks.
 */
TEST(converges_and_never_goes_back)
{
	struct tsc_clock clk = { .sz = sizeof(clk) };
	TSC_OPTS(co, .source = TSC_SOURCE_CALIBRATION, .calibrate_max_ms = 50);
	struct race r = { 0 };
	pthread_t readers[2];
	TSC_SYSCLOCK(c);
	char dir[64];
	int64_t t0, err;

	ASSERT_EQ(0, tsc_clock_init(&clk, &co)) TH_LOG("%s", tsc_last_error());
	fake_root(_metadata, dir, sizeof(dir), (uint64_t)(clk.freq.hz / 1e3 * (1 + 500e-6)));
	ASSERT_EQ(0, init(&c, dir, TSC_DISCIPLINE_CALLER)) TH_LOG("%s", tsc_last_error());
	remove_root(dir);
	ASSERT_EQ(TSC_SYSCLOCK_DISCIPLINED, c.path) TH_LOG("%s", c.why);
	r.c = &c;
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&readers[i], NULL, reader, &r));
	t0 = now(CLOCK_MONOTONIC);
	while (now(CLOCK_MONOTONIC) - t0 < 3000000000) {
		int e = tsc_sysclock_sync(&c);

		EXPECT_TRUE(e == 0 || e == -EAGAIN) TH_LOG("%d: %s", e, tsc_last_error());
		r.syncs++;
		usleep(200);
	}
	r.stop = true;
	for (int i = 0; i < 2; i++)
		pthread_join(readers[i], NULL);
	TH_LOG("%llu syncs, %llu reads", (unsigned long long)r.syncs,
	       (unsigned long long)r.reads);
	EXPECT_EQ(0, r.back);
	EXPECT_LT(100000, r.reads);
	err = worst_error(&c, 200);
	TH_LOG("after 3 s: worst error %lld ns", (long long)err);
	EXPECT_GT(100000, err);
	tsc_sysclock_fini(&c);
}

/*
 * A frequency far off: MONOTONIC falls behind or runs ahead by more than
 * 10 ms within 200 ms.  Behind, the sync steps it forward to the system's
 * and says so in the generation; ahead, it never steps back (no suspend
 * was seen): it is slewed down instead, and the generation stays.
 */
TEST(far_off_steps_forward_never_back)
{
	struct tsc_clock clk = { .sz = sizeof(clk) };
	TSC_OPTS(co, .source = TSC_SOURCE_CALIBRATION, .calibrate_max_ms = 50);
	static const double factor[] = { 2.0, 0.5 };	/* slow, then fast */

	ASSERT_EQ(0, tsc_clock_init(&clk, &co)) TH_LOG("%s", tsc_last_error());
	for (int i = 0; i < 2; i++) {
		uint64_t rate0, rate1;
		int64_t before, after, a, b, synced, sys;
		TSC_SYSCLOCK(c);
		char dir[64];
		uint32_t gen;

		fake_root(_metadata, dir, sizeof(dir), (uint64_t)(clk.freq.hz / 1e3 * factor[i]));
		ASSERT_EQ(0, init(&c, dir, TSC_DISCIPLINE_CALLER)) TH_LOG("%s", tsc_last_error());
		remove_root(dir);
		ASSERT_EQ(TSC_SYSCLOCK_DISCIPLINED, c.path) TH_LOG("%s", c.why);
		usleep(200000);
		gen = c.page->generation;
		ASSERT_EQ(0, tsc_sysclock_rate(&c, &rate0));
		before = (int64_t)tsc_sysclock_monotonic(&c);
		sys = now(CLOCK_MONOTONIC);
		EXPECT_LT(10000000, factor[i] > 1 ? sys - before : before - sys);
		ASSERT_EQ(0, tsc_sysclock_sync(&c)) TH_LOG("%s", tsc_last_error());
		synced = now(CLOCK_MONOTONIC);
		a = now(CLOCK_MONOTONIC);
		after = (int64_t)tsc_sysclock_monotonic(&c);
		b = now(CLOCK_MONOTONIC);
		ASSERT_EQ(0, tsc_sysclock_rate(&c, &rate1));
		if (factor[i] > 1) {
			/* At half the rate until the next estimate: off by half the time since. */
			EXPECT_NE(gen, c.page->generation);
			EXPECT_GT(1000000 + (b - synced) / 2, after < a ? a - after : after - b)
				TH_LOG("%lld ns off, %lld ns after the step", (long long)(after - a),
				       (long long)(b - synced));
		} else {
			EXPECT_EQ(gen, c.page->generation);
			EXPECT_LE(before, after);
			/* Fewer ns per tick: more ticks per second of it. */
			EXPECT_GT(rate1, rate0) TH_LOG("rate %llu mHz before, %llu after",
						       (unsigned long long)rate0,
						       (unsigned long long)rate1);
		}
		tsc_sysclock_fini(&c);
	}
}

/* The fake root's available_clocksource, as the kernel lists them. */
static void available(struct __test_metadata *_metadata, const char *dir, const char *list)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "mkdir -p %s/devices/system/clocksource/clocksource0", dir);
	ASSERT_EQ(0, system(path));
	snprintf(path, sizeof(path),
		 "%s/devices/system/clocksource/clocksource0/available_clocksource", dir);
	f = fopen(path, "w");
	ASSERT_NE(NULL, f);
	fprintf(f, "%s \n", list);
	ASSERT_EQ(0, fclose(f));
}

/* Where the kernel withdrew tsc as a clocksource: clock_gettime(), and why. */
TEST_F(disc, not_where_the_tsc_is_unstable)
{
	TSC_SYSCLOCK(c);

	available(_metadata, self->dir, "hpet acpi_pm");
	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_HELPER));
	EXPECT_EQ(TSC_SYSCLOCK_SYSCALL, c.path);
	EXPECT_NE(NULL, strstr(c.why, "no disciplined clock: the kernel does not offer tsc"))
		TH_LOG("%s", c.why);
	EXPECT_EQ(NULL, c.disc);
}

struct reinit {
	struct tsc_sysclock *c;
	volatile bool stop;
	int64_t worst;
	uint64_t reads;
};

static void *reinit_reader(void *arg)
{
	struct reinit *r = arg;

	while (!r->stop) {
		int64_t a = now(CLOCK_MONOTONIC), v = (int64_t)tsc_sysclock_monotonic(r->c);
		int64_t b = now(CLOCK_MONOTONIC), e = v < a ? a - v : v > b ? v - b : 0;

		if (e > r->worst)
			r->worst = e;
		r->reads++;
	}
	return NULL;
}

/*
 * Initialised again and finished while another thread reads it, the
 * helper syncing: the reader sees the old clock, clock_gettime() or the
 * new one, each close to the system's, and never freed memory (the
 * sanitizers would say so).
 */
TEST_F(disc, read_through_reinit_and_fini)
{
	struct reinit r = { 0 };
	TSC_SYSCLOCK(c);
	pthread_t t;

	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_HELPER));
	r.c = &c;
	ASSERT_EQ(0, pthread_create(&t, NULL, reinit_reader, &r));
	for (int i = 0; i < 20; i++) {
		usleep(1000 * (unsigned int)(i % 4));
		if (i % 5 == 4)
			tsc_sysclock_fini(&c);
		else
			EXPECT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_HELPER));
	}
	r.stop = true;
	pthread_join(t, NULL);
	tsc_sysclock_fini(&c);
	TH_LOG("%llu reads, worst %lld ns", (unsigned long long)r.reads, (long long)r.worst);
	EXPECT_LT(1000, r.reads);
	EXPECT_GT(1000000, r.worst);
}

/*
 * The kernel withdraws tsc later (its watchdog marked the TSC unstable):
 * the next sync sends the readers to clock_gettime(), for good.
 */
TEST_F(disc, until_the_kernel_withdraws_tsc)
{
	TSC_SYSCLOCK(c);

	available(_metadata, self->dir, "tsc hpet acpi_pm");
	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_CALLER));
	ASSERT_EQ(TSC_SYSCLOCK_DISCIPLINED, c.path) TH_LOG("%s", c.why);
	EXPECT_EQ(0, tsc_sysclock_sync(&c)) TH_LOG("%s", tsc_last_error());
	available(_metadata, self->dir, "hpet acpi_pm");
	EXPECT_EQ(-ENODEV, tsc_sysclock_sync(&c));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "no longer offers tsc")) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(0, c.page->flags & TSC_TIMEPAGE_TSC);	/* the syscall page */
	EXPECT_EQ(-ENODEV, tsc_sysclock_sync(&c));
	EXPECT_GT(100000, worst_error(&c, 10));
	tsc_sysclock_fini(&c);
}

/*
 * Under a filter that kills for adjtimex() (the rate from the kernel's
 * NTP state needs it), the clock still syncs, at the rate it measures:
 * the library looks for a filter before each call.
 */
TEST_F(disc, a_sandbox_that_forbids_adjtimex)
{
	int status;
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (pid == 0) {
		TSC_SYSCLOCK(c);
		int synced = 0;

		if (seccomp_filter_adjtimex(SECCOMP_RET_KILL_PROCESS))
			_exit(2);
		if (init(&c, self->dir, TSC_DISCIPLINE_CALLER) ||
		    c.path != TSC_SYSCLOCK_DISCIPLINED)
			_exit(3);
		for (int i = 0; i < 30 && synced < 3; i++) {
			usleep(200000);
			synced += tsc_sysclock_sync(&c) == 0;
		}
		_exit(synced == 3 && worst_error(&c, 10) < 100000 ? 0 : 4);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("status %#x (signal %d: killed for a system call; exit 2: no filter, 3: no clock, 4: no syncs or far off)",
		       status, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/*
 * Move the page the readers hold some seconds ahead (or back), as a
 * segment nobody moved on would drift away: which readings still take it
 * shows.
 */
static void page_off(const struct tsc_sysclock *c, int64_t seconds)
{
	struct tscfk_clock_page *p = (struct tscfk_clock_page *)c->page;
	uint32_t seq = p->seq;

	__atomic_store_n(&p->seq, seq | 1, __ATOMIC_RELEASE);
	p->mono_off += (uint64_t)(seconds * 1000000000);
	__atomic_store_n(&p->seq, (seq | 1) + 1, __ATOMIC_RELEASE);
}

static void page_an_hour_ahead(const struct tsc_sysclock *c)
{
	page_off(c, 3600);
}

/*
 * Syncs stop (a caller that stopped, a helper starved): the page is read
 * for three sync periods, here 3 s, past its segment's start, then
 * clock_gettime() is; the next sync gives the readers a page again.  The
 * page is made a second behind, to tell its readings from the system's
 * (one ahead would hold its readers at its value at the bound).
 */
TEST_F(disc, syncs_stop)
{
	TSC_SYSCLOCK(c);
	struct tsc_clock clk = { .sz = sizeof(clk) };
	double want;
	int64_t t0, v;

	ASSERT_EQ(0, tsc_clock_init(&clk, NULL)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_CALLER)) TH_LOG("%s", tsc_last_error());
	t0 = now(CLOCK_MONOTONIC);
	want = 3 * clk.freq.hz;
	EXPECT_LT(fabs((double)c.max_delta - want), want * 1e-3)
		TH_LOG("max_delta %llu, three seconds of ticks %.0f",
		       (unsigned long long)c.max_delta, want);
	page_off(&c, -1);
	v = (int64_t)tsc_sysclock_monotonic(&c);
	EXPECT_GT(now(CLOCK_MONOTONIC) - 990000000, v);	/* the page, a second back */
	usleep((useconds_t)((t0 + 3300000000 - now(CLOCK_MONOTONIC)) / 1000));
	EXPECT_EQ(0, worst_error(&c, 1)) TH_LOG("the page was read 3.3 s past its start");
	ASSERT_EQ(0, tsc_sysclock_sync(&c)) TH_LOG("%s", tsc_last_error());
	EXPECT_GT(100000, worst_error(&c, 10));
	page_off(&c, -1);
	EXPECT_GT(now(CLOCK_MONOTONIC) - 990000000, (int64_t)tsc_sysclock_monotonic(&c))
		TH_LOG("the new page is not read");
	tsc_sysclock_fini(&c);
}

/*
 * A caller's clock 1000 ppm off (a fake tsc_freq_khz), never synced: at
 * its bound, 3 s past its start, it is 3 ms off the system's.  Three
 * threads read it from 50 ms before the bound to 20 ms past it (or
 * just before it), when the caller syncs, and 20 ms more: none sees it
 * go back,
 * though its readers leave the page for clock_gettime() at the bound.
 * Ahead (fast), they are held at the page's value there until the
 * system's catches up; behind (slow), they jump forward, and the sync
 * that gives them a page again starts it no lower than they read.
 */
static void across_the_bound(struct __test_metadata *_metadata, double off_ppm, int64_t sync_us)
{
	struct tsc_clock clk = { .sz = sizeof(clk) };
	TSC_OPTS(co, .source = TSC_SOURCE_CALIBRATION, .calibrate_max_ms = 50);
	struct race r = { 0 };
	pthread_t readers[2];
	TSC_SYSCLOCK(c);
	uint64_t bound, tick_ms, sync_t, mine[3] = { 0 };
	int64_t ahead, held;
	uint32_t gen;
	char dir[64];

	ASSERT_EQ(0, tsc_clock_init(&clk, &co)) TH_LOG("%s", tsc_last_error());
	fake_root(_metadata, dir, sizeof(dir), (uint64_t)(clk.freq.hz / 1e3 * (1 + off_ppm * 1e-6)));
	ASSERT_EQ(0, init(&c, dir, TSC_DISCIPLINE_CALLER)) TH_LOG("%s", tsc_last_error());
	remove_root(dir);
	ASSERT_EQ(TSC_SYSCLOCK_DISCIPLINED, c.path) TH_LOG("%s", c.why);
	gen = c.page->generation;
	bound = c.page->cycle_last + c.max_delta;
	tick_ms = (uint64_t)(clk.freq.hz / 1e3);
	while (tsc_rdtsc_ordered() < bound - 50 * tick_ms)
		usleep(10000);
	ahead = (int64_t)tsc_sysclock_monotonic(&c) - now(CLOCK_MONOTONIC);
	TH_LOG("%+.0f ppm: the page %+lld ns off the system's 50 ms before its bound", off_ppm,
	       (long long)ahead);
	/* What the test is about: the page is off by more than a read's noise. */
	ASSERT_LT(1000000, off_ppm < 0 ? ahead : -ahead);
	r.c = &c;
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&readers[i], NULL, reader, &r));
	/* This thread reads too: whichever threads run across the bound. */
	sync_t = bound + (uint64_t)(sync_us * (int64_t)tick_ms / 1000);
	while (tsc_rdtsc_ordered() < sync_t)
		read_on(&r, mine);
	held = (int64_t)tsc_sysclock_monotonic(&c) - now(CLOCK_MONOTONIC);
	ASSERT_EQ(0, tsc_sysclock_sync(&c)) TH_LOG("%s", tsc_last_error());
	while (tsc_rdtsc_ordered() < bound + 40 * tick_ms)
		read_on(&r, mine);
	r.stop = true;
	for (int i = 0; i < 2; i++)
		pthread_join(readers[i], NULL);
	TH_LOG("synced %+lld us from the bound, %+lld ns off the system's then; %llu reads, %llu back (%llu, %llu, %llu); generation %u, %u",
	       (long long)sync_us, (long long)held, (unsigned long long)r.reads,
	       (unsigned long long)r.back, (unsigned long long)r.back_by[0],
	       (unsigned long long)r.back_by[1], (unsigned long long)r.back_by[2], gen,
	       c.page->generation);
	EXPECT_EQ(0, r.back);
	EXPECT_LT(10000, r.reads);
	/* Past the bound: held (ahead, by what is left of its lead) or the system's. */
	if (sync_us > 0) {
		EXPECT_LE(-100000, held);
		EXPECT_GT(off_ppm < 0 ? ahead : 100000, held);
	}
	/* Behind: stepped forward at the sync, which the generation says. */
	if (off_ppm > 0)
		EXPECT_NE(gen, c.page->generation);
	tsc_sysclock_fini(&c);
}

TEST(ahead_at_the_bound_holds)
{
	across_the_bound(_metadata, -1000, 20000);
}

TEST(behind_at_the_bound_resyncs_forward)
{
	across_the_bound(_metadata, 1000, 20000);
}

/*
 * Behind, a sync begun 2 us before the bound: readers pass the bound
 * while it samples and builds the new page, and read clock_gettime(),
 * above the old segment; the new page must start above them too.
 */
TEST(behind_a_sync_across_the_bound_steps_forward)
{
	across_the_bound(_metadata, 1000, -2);
}

/*
 * Readers on two threads and this one from start to stop, each read after
 * seeing the latest any had (read_on()); what this one read last.
 */
struct readers {
	struct race r;
	pthread_t t[2];
	uint64_t mine[3];
};

static void readers_start(struct __test_metadata *_metadata, struct readers *rs,
			  struct tsc_sysclock *c)
{
	memset(rs, 0, sizeof(*rs));
	rs->r.c = c;
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&rs->t[i], NULL, reader, &rs->r));
}

/* This thread reads for ms. */
static void readers_for(struct readers *rs, int64_t ms)
{
	int64_t end = now(CLOCK_MONOTONIC) + ms * 1000000;

	while (now(CLOCK_MONOTONIC) < end)
		read_on(&rs->r, rs->mine);
}

static void readers_stop(struct readers *rs)
{
	rs->r.stop = true;
	for (int i = 0; i < 2; i++)
		pthread_join(rs->t[i], NULL);
}

/*
 * Once the system's MONOTONIC has caught up with the clock's (a hold
 * ends), at most max_ms from now: how long that took, in ms; then the
 * clock synced, and close to the system's again.
 */
static int64_t after_the_hold(struct __test_metadata *_metadata, struct tsc_sysclock *c,
			      int64_t max_ms)
{
	int64_t t0 = now(CLOCK_MONOTONIC), held_ms;

	while ((int64_t)tsc_sysclock_monotonic(c) > now(CLOCK_MONOTONIC) &&
	       now(CLOCK_MONOTONIC) - t0 < max_ms * 1000000)
		usleep(1000);
	held_ms = (now(CLOCK_MONOTONIC) - t0) / 1000000;
	/* Ahead by a new page's own error at most, where a reader synced it. */
	EXPECT_GT(100000, (int64_t)tsc_sysclock_monotonic(c) - now(CLOCK_MONOTONIC));
	for (int tries = 0; tries < 10 && tsc_sysclock_sync(c) == -EAGAIN; tries++)
		usleep(10000);
	EXPECT_GT(100000, worst_error(c, 10));
	return held_ms;
}

/* The page's bound, in ns: where a reset holds the clock. */
static int64_t bound_ns(const struct tsc_sysclock *c, enum tsc_sysclock_discipline how)
{
	const volatile struct tscfk_clock_page *p = (const volatile void *)c->page;
	uint64_t ticks = how == TSC_DISCIPLINE_READERS ? p->max_cycles : c->max_delta;
	struct tscfk_clock_map m = { .mult_ns = p->mult_ns, .mult = p->mult };

	return (int64_t)tscfk_clock_ns(&m, 0, ticks);
}

/*
 * A resume that reset the TSC (S3 on bare metal), as the clock sees it
 * (tsc__test_resume()): every reading is then far below the page's
 * start.  Three threads read from before it to after the sync: none sees
 * MONOTONIC or BOOTTIME go back, nor REALTIME by more than the clock's
 * own error (here no time passes in the "suspend", so the system's
 * REALTIME, which readers take past the page, has not moved on past
 * what the page read a moment before).  Until the sync they are held at the
 * page's value at its bound, the most any reader may have had (3 s past
 * its start for a caller's clock, 1.5 s for one its readers sync, whose
 * first reader past it syncs); the sync holds the clock still there (a
 * hold page, bound 0) until the system's MONOTONIC catches up, in a new
 * generation; then it follows the system's again.
 */
static void reset_never_back(struct __test_metadata *_metadata, const char *dir,
			     enum tsc_sysclock_discipline how)
{
	TSC_SYSCLOCK(c);
	struct readers rs;
	int64_t lead, bound, held_ms;
	uint32_t gen;

	ASSERT_EQ(0, init(&c, dir, how)) TH_LOG("%s", tsc_last_error());
	readers_start(_metadata, &rs, &c);
	rs.r.realtime_tolerated = true;
	readers_for(&rs, 100);
	gen = c.page->generation;
	bound = bound_ns(&c, how);
	tsc__test_resume(c.disc, 1ull << 40, 0);
	readers_for(&rs, 20);
	lead = (int64_t)tsc_sysclock_monotonic(&c) - now(CLOCK_MONOTONIC);
	if (how == TSC_DISCIPLINE_CALLER)
		ASSERT_EQ(0, tsc_sysclock_sync(&c)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(0, c.max_delta) TH_LOG("not a hold page");
	EXPECT_NE(gen, c.page->generation);
	readers_for(&rs, 20);
	readers_stop(&rs);
	TH_LOG("%llu reads, %llu back (%llu, %llu, %llu; REALTIME by %llu ns at most); held %.3f s ahead of the system's, the bound %.3f s",
	       (unsigned long long)rs.r.reads, (unsigned long long)rs.r.back,
	       (unsigned long long)rs.r.back_by[0], (unsigned long long)rs.r.back_by[1],
	       (unsigned long long)rs.r.back_by[2], (unsigned long long)rs.r.most_back[0],
	       (double)lead / 1e9, (double)bound / 1e9);
	EXPECT_EQ(0, rs.r.back);
	/* Held at the bound, less the 120 ms or so since the page's start. */
	EXPECT_LT(bound - 500000000, lead);
	EXPECT_GE(bound, lead);
	held_ms = after_the_hold(_metadata, &c, 3500);
	TH_LOG("the hold ended %lld ms later", (long long)held_ms);
	tsc_sysclock_fini(&c);
}

TEST_F(disc, a_reset_tsc_never_goes_back)
{
	reset_never_back(_metadata, self->dir, TSC_DISCIPLINE_CALLER);
}

TEST_F(disc, a_reset_tsc_never_goes_back_synced_by_readers)
{
	reset_never_back(_metadata, self->dir, TSC_DISCIPLINE_READERS);
}

/*
 * A suspend of 300 ms that the TSC counted and MONOTONIC did not, shorter
 * than the page's bound (tsc__test_resume()): readers read MONOTONIC 300
 * ms ahead of the system's until the sync, which holds it still there
 * until the system's catches up, rather than stepping back; REALTIME and
 * BOOTTIME, which counted the suspend, stay the system's throughout.
 * Synced by the caller, or by the first reader past the page's bound.
 */
static void short_suspend_holds(struct __test_metadata *_metadata, const char *dir,
				enum tsc_sysclock_discipline how)
{
	TSC_SYSCLOCK(c);
	struct readers rs;
	int64_t lead, held_ms;
	uint32_t gen;

	ASSERT_EQ(0, init(&c, dir, how)) TH_LOG("%s", tsc_last_error());
	readers_start(_metadata, &rs, &c);
	readers_for(&rs, 100);
	gen = c.page->generation;
	tsc__test_resume(c.disc, 0, 300000000);
	if (how == TSC_DISCIPLINE_CALLER) {
		readers_for(&rs, 20);
		ASSERT_EQ(0, tsc_sysclock_sync(&c)) TH_LOG("%s", tsc_last_error());
	} else {
		/* Its readers sync it a period past its start. */
		for (int i = 0; i < 2000 && c.max_delta; i++)
			readers_for(&rs, 1);
	}
	lead = (int64_t)tsc_sysclock_monotonic(&c) - now(CLOCK_MONOTONIC);
	EXPECT_EQ(0, c.max_delta) TH_LOG("not a hold page");
	EXPECT_NE(gen, c.page->generation);
	readers_for(&rs, 20);
	readers_stop(&rs);
	TH_LOG("%llu reads, %llu back (%llu, %llu, %llu); held %.3f ms ahead of the system's",
	       (unsigned long long)rs.r.reads, (unsigned long long)rs.r.back,
	       (unsigned long long)rs.r.back_by[0], (unsigned long long)rs.r.back_by[1],
	       (unsigned long long)rs.r.back_by[2], (double)lead / 1e6);
	EXPECT_EQ(0, rs.r.back);
	/* What it read before the sync, and the sync's own 50 us horizon. */
	EXPECT_LT(200000000, lead);
	EXPECT_GE(300100000, lead);
	for (int k = 0; k < 2; k++) {
		clockid_t id = k ? CLOCK_BOOTTIME : CLOCK_REALTIME;
		int64_t a = now(id);
		int64_t v = (int64_t)(k ? tsc_sysclock_boottime(&c) : tsc_sysclock_realtime(&c));
		int64_t b = now(id);

		EXPECT_TRUE(a <= v && v <= b) TH_LOG("%s during the hold: %lld ns off",
						     k ? "BOOTTIME" : "REALTIME",
						     (long long)(v < a ? v - a : v - b));
	}
	held_ms = after_the_hold(_metadata, &c, 1000);
	TH_LOG("the hold ended %lld ms later", (long long)held_ms);
	EXPECT_GT(350, held_ms);
	tsc_sysclock_fini(&c);
}

TEST_F(disc, a_short_suspend_holds_still)
{
	short_suspend_holds(_metadata, self->dir, TSC_DISCIPLINE_CALLER);
}

TEST_F(disc, a_short_suspend_holds_still_synced_by_readers)
{
	short_suspend_holds(_metadata, self->dir, TSC_DISCIPLINE_READERS);
}

/*
 * During a hold every reader takes the slow path; the caller syncs over
 * and over (each a new hold page, the old one left as the readers read
 * it): a reader that finds the page it holds left takes the new one, and
 * never clock_gettime()'s bare value, 300 ms below the hold.
 */
TEST_F(disc, holds_through_syncs)
{
	TSC_SYSCLOCK(c);
	struct readers rs;
	int64_t end;
	int syncs = 0;

	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_CALLER)) TH_LOG("%s", tsc_last_error());
	tsc__test_resume(c.disc, 0, 300000000);
	ASSERT_EQ(0, tsc_sysclock_sync(&c)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(0, c.max_delta) TH_LOG("not a hold page");
	/* Each slow read slowed between loading the page and its seq: swaps fall there. */
	__atomic_store_n(&tsc__test_slow_path_spin, 500, __ATOMIC_RELAXED);
	readers_start(_metadata, &rs, &c);
	end = now(CLOCK_MONOTONIC) + 200000000;
	while (now(CLOCK_MONOTONIC) < end)
		syncs += tsc_sysclock_sync(&c) == 0;
	readers_stop(&rs);
	__atomic_store_n(&tsc__test_slow_path_spin, 0, __ATOMIC_RELAXED);
	TH_LOG("%d syncs, %llu reads, %llu back (%llu, %llu, %llu)", syncs,
	       (unsigned long long)rs.r.reads, (unsigned long long)rs.r.back,
	       (unsigned long long)rs.r.back_by[0], (unsigned long long)rs.r.back_by[1],
	       (unsigned long long)rs.r.back_by[2]);
	EXPECT_EQ(0, rs.r.back);
	EXPECT_LT(100, syncs);
	EXPECT_LT(200, rs.r.reads);
	tsc_sysclock_fini(&c);
}

/* REALTIME minus MONOTONIC on the clock's page, and its generation. */
static int64_t real_minus_mono(const struct tsc_sysclock *c, uint32_t *gen)
{
	const volatile struct tsc_timepage *p = c->page;

	*gen = p->generation;
	return (int64_t)(p->real_off - p->mono_off);
}

/*
 * A step of REALTIME of 5 us, below a sample's noise threshold (10 us):
 * taken, in a new generation, where the system's clock was set (its
 * timer says so; here the test hook, and the step the samples' offset
 * read 5 us lower); left alone where it was not, as noise.
 */
TEST_F(disc, a_small_step_of_realtime_is_followed_when_the_clock_was_set)
{
	TSC_SYSCLOCK(c);
	uint32_t gen0, gen1;

	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_CALLER)) TH_LOG("%s", tsc_last_error());
	for (int set = 0; set < 2; set++) {
		int64_t before = real_minus_mono(&c, &gen0), after;

		__atomic_store_n(&tsc__test_sample_offset_ns, (int64_t)5000 * (set + 1),
				 __ATOMIC_RELAXED);
		if (set)
			tsc__test_clock_set(c.disc);
		ASSERT_EQ(0, tsc_sysclock_sync(&c)) TH_LOG("%s", tsc_last_error());
		after = real_minus_mono(&c, &gen1);
		TH_LOG("%s: REALTIME's offset moved %+lld ns; generation %u -> %u",
		       set ? "clock set" : "not set", (long long)(after - before), gen0, gen1);
		if (set) {
			EXPECT_GT(-9000, after - before);	/* 10 us low, noise aside */
			EXPECT_LT(-11000, after - before);
			EXPECT_NE(gen0, gen1);
		} else {
			EXPECT_GE(2, llabs(after - before));	/* the page's rounding */
			EXPECT_EQ(gen0, gen1);
		}
	}
	__atomic_store_n(&tsc__test_sample_offset_ns, 0, __ATOMIC_RELAXED);
	tsc_sysclock_fini(&c);
}

/*
 * A copy of a clock (which tsc_sysclock_init(3) says not to make) holds
 * a page the helper leaves at a sync, or its fini retires: it reads
 * clock_gettime() then, at its cost, never waiting on the page.  A copy
 * that waited would give up after 100000 pauses (3-7 ms, by the CPU) in
 * every read while its page is left: the reads' abandoned waits are
 * counted (a test hook), and none may be; a pause as short as some
 * CPUs' would hide the wait from a clock.  The CPU time of a read is
 * judged only where every read of a waiting copy would be slow, after
 * the fini, and loosely: a guest whose host holds its vCPU back, with
 * no steal time to tell it, counts the wait as the thread's.
 */
#define COPY_SLOW_NS 1000000

TEST_F(disc, a_copy_reads_clock_gettime_at_its_cost)
{
	TSC_SYSCLOCK(c);
	struct tsc_sysclock copy;
	int64_t slowest = 0, slowest_wall = 0;
	long reads[2] = { 0, 0 }, slow[2] = { 0, 0 };
	unsigned long abandoned[2];

	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_HELPER)) TH_LOG("%s", tsc_last_error());
	memcpy(&copy, &c, sizeof(c));
	/* Across the helper's syncs, then with the original finished. */
	for (int phase = 0; phase < 2; phase++) {
		int64_t end = now(CLOCK_MONOTONIC) + (phase ? 200000000 : 2200000000);
		unsigned long abandoned0 = __atomic_load_n(&tsc__test_page_waits_abandoned,
							   __ATOMIC_RELAXED);

		while (now(CLOCK_MONOTONIC) < end) {
			int64_t ca = now(CLOCK_THREAD_CPUTIME_ID), a = now(CLOCK_MONOTONIC);
			int64_t v = (int64_t)tsc_sysclock_monotonic(&copy);
			int64_t b = now(CLOCK_MONOTONIC), cb = now(CLOCK_THREAD_CPUTIME_ID);

			reads[phase]++;
			slow[phase] += cb - ca > COPY_SLOW_NS;
			if (cb - ca > slowest)
				slowest = cb - ca;
			if (b - a > slowest_wall)
				slowest_wall = b - a;
			EXPECT_TRUE(v >= a - 1000000 && v <= b + 1000000)
				TH_LOG("the copy read %lld ns off", (long long)(v < a ? v - a : v - b));
			usleep(100);
		}
		abandoned[phase] = __atomic_load_n(&tsc__test_page_waits_abandoned,
						   __ATOMIC_RELAXED) - abandoned0;
		if (!phase)
			tsc_sysclock_fini(&c);
	}
	TH_LOG("the copy's reads: %ld across syncs, %ld after the fini; waits abandoned: %lu, %lu; "
	       "over %d ns of CPU time: %ld, %ld; the slowest %lld ns of CPU time, %lld of MONOTONIC",
	       reads[0], reads[1], abandoned[0], abandoned[1], COPY_SLOW_NS, slow[0], slow[1],
	       (long long)slowest, (long long)slowest_wall);
	EXPECT_EQ(0, abandoned[0]);
	EXPECT_EQ(0, abandoned[1]);
	EXPECT_GT(reads[1], 2 * slow[1]);
}

/*
 * The helper holds the page on a lease: at every moment the readers may
 * extrapolate it at most 1.25 s further (so that a longer suspend, which
 * the helper sleeps through, sends them to clock_gettime()), and, the
 * helper syncing once a second, the lease never lapses while it runs.
 * Sampled every 2 ms for 3 s, three syncs; a sample is kept only if
 * neither the bound nor the page moved while it was taken.
 */
TEST_F(disc, the_helper_holds_a_lease)
{
	TSC_SYSCLOCK(c);
	struct tsc_clock clk = { .sz = sizeof(clk) };
	double most = 0, least = INFINITY;
	int64_t end;
	int kept = 0;

	ASSERT_EQ(0, tsc_clock_init(&clk, NULL)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_HELPER)) TH_LOG("%s", tsc_last_error());
	end = now(CLOCK_MONOTONIC) + 3000000000;
	while (now(CLOCK_MONOTONIC) < end) {
		uint64_t m1 = __atomic_load_n(&c.max_delta, __ATOMIC_ACQUIRE);
		const volatile struct tsc_timepage *p = __atomic_load_n(&c.page, __ATOMIC_ACQUIRE);
		uint64_t t = tsc_rdtsc_ordered();
		double ahead;

		if (m1 != __atomic_load_n(&c.max_delta, __ATOMIC_ACQUIRE) ||
		    p != __atomic_load_n(&c.page, __ATOMIC_ACQUIRE)) {
			usleep(2000);
			continue;
		}
		ahead = ((double)m1 - (double)(t - p->cycle_last)) / clk.freq.hz;
		most = ahead > most ? ahead : most;
		least = ahead < least ? ahead : least;
		kept++;
		usleep(2000);
	}
	TH_LOG("%d samples: the page could be read %.3f to %.3f s further", kept, least, most);
	EXPECT_LT(500, kept);
	EXPECT_GE(1.251, most);		/* the lease, and the rounding of a rate */
	EXPECT_LT(0.0, least);		/* never lapsed */
	tsc_sysclock_fini(&c);
}

/*
 * The kernel's count of the helper thread's sleeps (voluntary context
 * switches) and of its CPU time, in clock ticks: found by its name, as a
 * process's only helper.  False if there is none, or either is unread.
 */
static bool helper_usage(unsigned long *sleeps, unsigned long *ticks)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	bool found = false, got_sleeps = false, got_ticks = false;

	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		char path[sizeof("/proc/self/task//status") + sizeof(e->d_name)], line[256];
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		found = fgets(line, sizeof(line), f) && !strcmp(line, TSC__HELPER_NAME "\n");
		(void)fclose(f);
		if (!found)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, "voluntary_ctxt_switches:", 24)) {
				*sleeps = strtoul(line + 24, NULL, 10);
				got_sleeps = true;
			}
		if (f)
			(void)fclose(f);
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
		f = fopen(path, "r");
		if (f && fgets(line, sizeof(line), f)) {
			/* After "pid (comm) ": state, then fields 4 to 13, then utime and stime. */
			char *p = strrchr(line, ')'), *end;

			for (int field = 0; p && field < 12; field++)
				p = strchr(p + 1, ' ');
			if (p) {
				unsigned long ut = strtoul(p, &end, 10);

				*ticks = ut + strtoul(end, NULL, 10);
				got_ticks = true;
			}
		}
		if (f)
			(void)fclose(f);
	}
	(void)closedir(d);
	return found && got_sleeps && got_ticks;
}

/*
 * The helper wakes once a second to sync, and for nothing else, whether
 * the clock is read or not: 3 s without a reader, then 3 s with three,
 * counted by the helper itself (tsc__test_wakeups()).  Without a reader,
 * the kernel's counts of its thread say the same: it slept about as
 * often as it woke (a sleep a wakeup; a sync's own system calls do not
 * sleep), and spent a few milliseconds of CPU at most, not a spin's.
 */
TEST_F(disc, the_helper_wakes_once_a_second)
{
	TSC_SYSCLOCK(c);
	struct readers rs;
	unsigned int w0, idle, busy;
	unsigned long sleeps0 = 0, sleeps = 0, ticks0 = 0, ticks = 0;

	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_HELPER)) TH_LOG("%s", tsc_last_error());
	usleep(100000);
	w0 = tsc__test_wakeups(c.disc);
	ASSERT_TRUE(helper_usage(&sleeps0, &ticks0));
	usleep(3000000);
	idle = tsc__test_wakeups(c.disc) - w0;
	ASSERT_TRUE(helper_usage(&sleeps, &ticks));
	TH_LOG("the helper's thread in 3 s without a reader: %lu sleeps, %lu ticks of CPU",
	       sleeps - sleeps0, ticks - ticks0);
	EXPECT_GE(6ul, sleeps - sleeps0);
	EXPECT_GE((unsigned long)sysconf(_SC_CLK_TCK) / 10, ticks - ticks0) TH_LOG("over 100 ms");
	readers_start(_metadata, &rs, &c);
	w0 = tsc__test_wakeups(c.disc);
	readers_for(&rs, 3000);
	busy = tsc__test_wakeups(c.disc) - w0;
	readers_stop(&rs);
	TH_LOG("wakeups in 3 s: %u without a reader, %u with three (%llu reads)", idle, busy,
	       (unsigned long long)rs.r.reads);
	/* A sync a second; one retried or two where a sample was too noisy. */
	EXPECT_LE(2u, idle);
	EXPECT_GE(5u, idle);
	EXPECT_LE(2u, busy);
	EXPECT_GE(5u, busy);
	EXPECT_EQ(0, rs.r.back);
	tsc_sysclock_fini(&c);
}

/*
 * A fork's child has no helper, and may not sync the parent's clock: its
 * disciplined clocks read clock_gettime() from the fork on (the fork
 * handler), whatever their page held, and finish.  With a helper and
 * without.
 */
TEST_F(disc, a_forked_child)
{
	static const enum tsc_sysclock_discipline how[] = {
		TSC_DISCIPLINE_HELPER, TSC_DISCIPLINE_CALLER,
	};

	for (size_t i = 0; i < sizeof(how) / sizeof(how[0]); i++) {
		TSC_SYSCLOCK(c);
		int status;
		pid_t pid;

		ASSERT_EQ(0, init(&c, self->dir, how[i]));
		page_an_hour_ahead(&c);
		pid = fork();
		ASSERT_LE(0, pid);
		if (pid == 0) {
			bool exact = worst_error(&c, 1) == 0;
			int synced = tsc_sysclock_sync(&c);	/* the parent's: refused */

			tsc_sysclock_fini(&c);	/* no helper to join here */
			_exit(!exact ? 1 : synced != -EINVAL ? 2 : 0);
		}
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("discipline %d: the child %s", how[i],
			       WIFEXITED(status) && WEXITSTATUS(status) == 1 ?
			       "read the parent's page" : "failed");
		tsc_sysclock_fini(&c);
	}
}

/* Initialised again, and again disciplined: the old helper goes first. */
TEST_F(disc, initialised_again)
{
	TSC_SYSCLOCK(c);
	uint64_t mhz;

	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_HELPER));
	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_HELPER));
	EXPECT_EQ(TSC_SYSCLOCK_DISCIPLINED, c.path);
	ASSERT_EQ(0, tsc_sysclock_rate(&c, &mhz)) TH_LOG("%s", tsc_last_error());
	EXPECT_LT(1000000000000ull, mhz);
	ASSERT_EQ(0, init(&c, self->dir, TSC_DISCIPLINE_NONE));
	EXPECT_EQ(TSC_SYSCLOCK_SYSCALL, c.path);
	EXPECT_EQ(NULL, c.disc);
}

TEST_HARNESS_MAIN
