// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The clock: tsc_clock_now() follows CLOCK_MONOTONIC, tsc_clock_realtime()
 * CLOCK_REALTIME, every flavour never goes backwards in a thread, a
 * reading before the anchor does not wrap, many threads read it at once,
 * and the fast path for 1 GHz and up says what the general one does.  A
 * clock whose init failed reads clock_gettime().  The names of 1.0 that
 * 1.3 deprecates still read the same (hence no deprecation warnings
 * here).
 */
#define TSC_NO_DEPRECATION_WARNINGS
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "fake_sysfs.h"
#include "../../testlib/harness.h"
#include "internal.h"
#include "libtsc.h"

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int64_t diff(uint64_t a, uint64_t b)
{
	return (int64_t)(a - b);
}

static TSC_CLOCK(clk);

/*
 * The clock and CLOCK_MONOTONIC_RAW at one instant: the narrowest of a
 * few brackets, as a preemption inside one (42 us seen on a busy VM)
 * would count as a rate error.
 */
static void raw_pair(uint64_t *raw, uint64_t *t)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 32; i++) {
		uint64_t a = clock_ns(CLOCK_MONOTONIC_RAW);
		uint64_t x = tsc_now_ordered(&clk);
		uint64_t b = clock_ns(CLOCK_MONOTONIC_RAW);

		if (b - a < best) {
			best = b - a;
			*raw = a + (b - a) / 2;
			*t = x;
		}
	}
}

FIXTURE(clock) {};
FIXTURE_SETUP(clock)
{
	/* A calibration: the test must not depend on the module. */
	TSC_OPTS(o, .source = TSC_SOURCE_CALIBRATION, .calibrate_ppm = 0.1);

	ASSERT_EQ(0, tsc_clock_init(&clk, &o)) TH_LOG("%s", tsc_last_error());
}
FIXTURE_TEARDOWN(clock) {}

/*
 * Right after the anchor, within 20 us of CLOCK_MONOTONIC and REALTIME.
 * Later the clock advances at the TSC's hardware rate, that of
 * CLOCK_MONOTONIC_RAW, which NTP does not slew: compare rates with that.
 */
TEST_F(clock, follows_the_system_clocks)
{
	uint64_t before = clock_ns(CLOCK_MONOTONIC);
	uint64_t now = tsc_now_ordered(&clk);
	uint64_t after = clock_ns(CLOCK_MONOTONIC);
	uint64_t real = clock_ns(CLOCK_REALTIME);
	uint64_t tsc_real = tsc_clock_realtime_unordered(&clk);
	uint64_t raw0, raw1, t0, t1;

	TH_LOG("monotonic: %lld ns before, %lld after; realtime %+lld ns",
	       (long long)diff(now, before), (long long)diff(after, now),
	       (long long)diff(tsc_real, real));
	EXPECT_GT(20000, diff(before, now));
	EXPECT_GT(20000, diff(now, after));
	EXPECT_GT(20000, llabs(diff(tsc_real, real)));

	raw_pair(&raw0, &t0);
	usleep(200000);
	raw_pair(&raw1, &t1);
	TH_LOG("over %.0f ms: %+lld ns against CLOCK_MONOTONIC_RAW",
	       (raw1 - raw0) / 1e6, (long long)(diff(t1, t0) - diff(raw1, raw0)));
	/* 0.1 ppm of 200 ms is 20 ns; the reads themselves, microseconds. */
	EXPECT_GT(5000, llabs(diff(t1, t0) - diff(raw1, raw0)));

	/*
	 * And still with CLOCK_MONOTONIC, BOOTTIME (no suspend here) and
	 * REALTIME (no step), 200 ms on: within what NTP may slew them by,
	 * 500 ppm of the time since the anchor, and the 20 us of the anchor.
	 */
	{
		uint64_t since = diff(clock_ns(CLOCK_MONOTONIC), clk.base_mono_ns);
		int64_t allowed = (int64_t)(since / 2000) + 20000;
		uint64_t mono = clock_ns(CLOCK_MONOTONIC), ours = tsc_now_ordered(&clk);
		uint64_t boot = clock_ns(CLOCK_BOOTTIME) - (clk.base_boot_ns - clk.base_mono_ns);
		uint64_t ours_real = tsc_clock_realtime_unordered(&clk), sys_real = clock_ns(CLOCK_REALTIME);

		TH_LOG("%.0f ms after the anchor: %+lld ns from MONOTONIC, %+lld from BOOTTIME, realtime %+lld (allowed %lld)",
		       since / 1e6, (long long)diff(ours, mono), (long long)diff(ours, boot),
		       (long long)diff(ours_real, sys_real), (long long)allowed);
		EXPECT_GT(allowed, llabs(diff(ours, mono)));
		EXPECT_GT(allowed, llabs(diff(ours, boot)));
		EXPECT_GT(allowed, llabs(diff(ours_real, sys_real)));
	}
}

TEST_F(clock, never_backwards_in_a_thread)
{
	uint64_t last = tsc_clock_now_unordered(&clk), last_o = tsc_now_ordered(&clk);
	uint64_t last_s = tsc_now_start(&clk);

	for (int i = 0; i < 1000000; i++) {
		uint64_t now = tsc_clock_now_unordered(&clk), now_o = tsc_now_ordered(&clk);
		uint64_t now_s = tsc_now_start(&clk);

		ASSERT_LE(last, now);
		ASSERT_LE(last_o, now_o);
		ASSERT_LE(last_s, now_s);
		ASSERT_LE(now_o, now_s);
		last = now;
		last_o = now_o;
		last_s = now_s;
	}
}

/*
 * Readings around the anchor, before it too (another CPU's TSC may be a
 * little behind): within a ns of the exact difference, and no wrap.
 */
TEST_F(clock, readings_around_the_anchor)
{
	uint64_t base = clk.base_mono_ns, back = tsc_ns_to_ticks(&clk.conv, 1000);

	EXPECT_EQ(base, tsc_clock_at(&clk, clk.base_ticks));
	EXPECT_GE(2, llabs(diff(base - 1000, tsc_clock_at(&clk, clk.base_ticks - back))));
	EXPECT_GE(2, llabs(diff(base + 1000, tsc_clock_at(&clk, clk.base_ticks + back))));
	EXPECT_GE(1, llabs(diff(base, tsc_clock_at(&clk, clk.base_ticks - 1))));
	EXPECT_GE(1, llabs(diff(base, tsc_clock_at(&clk, clk.base_ticks + 1))));
	/* One second on, one second more, to the ppm of the frequency. */
	EXPECT_GE(1, llabs(diff(base + 1000000000,
				tsc_clock_at(&clk, clk.base_ticks +
					     tsc_ns_to_ticks(&clk.conv, 1000000000)))));
}

/*
 * The latest reading any thread published.  A thread reads the clock
 * after it loads this (tsc_clock_now() fences the load first) and
 * publishes its reading after taking it (the store needs the value): a
 * reading smaller than what it loaded went back in time across threads.
 */
static _Atomic uint64_t published;

struct reader_result {
	uint64_t back_in_thread, back_across;
};

static void *reader(void *arg)
{
	struct reader_result *r = arg;
	uint64_t last = 0;

	for (int i = 0; i < 200000; i++) {
		uint64_t seen = atomic_load_explicit(&published, memory_order_acquire);
		uint64_t now = tsc_now_ordered(&clk);

		r->back_in_thread += now < last;
		r->back_across += now < seen;
		atomic_store_explicit(&published, now, memory_order_release);
		last = now;
	}
	return NULL;
}

/*
 * 16 threads on the CPUs there are: each one's readings never go back,
 * and none reads a time earlier than one another thread had already
 * published (the CPUs' TSCs in step, the clock shared and read-only).
 */
TEST_F(clock, many_threads_at_once)
{
	struct reader_result r[16] = { 0 };
	pthread_t t[16];

	atomic_store(&published, 0);
	for (int i = 0; i < 16; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, reader, &r[i]));
	for (int i = 0; i < 16; i++) {
		pthread_join(t[i], NULL);
		EXPECT_EQ(0u, r[i].back_in_thread);
		EXPECT_EQ(0u, r[i].back_across) TH_LOG("thread %d", i);
	}
}

/*
 * The clocks take one path when a tick is under a ns and another when it
 * is a whole ns or more: 600 MHz is an embedded AMD G-T16R's TSC, 999.999
 * MHz the slowest with ns_int 1.  On either path every reading must lie
 * between the conversions, by their definition, of ordered reads around
 * it.  tsc_clock_now_unordered()'s own read may pass the ordered one before it by a few
 * cycles: 1 us of slack.  Taking the wrong path is off by whole seconds.
 */
static void readings_match_the_definition(struct __test_metadata *_metadata,
					  uint64_t khz)
{
	TSC_CLOCK(c);
	char dir[64];
	TSC_OPTS(o, .source = TSC_SOURCE_SYSFS, .sysfs_root = dir);

	fake_root(_metadata, dir, sizeof(dir), khz);
	ASSERT_EQ(0, tsc_clock_init(&c, &o)) TH_LOG("%s", tsc_last_error());
	remove_root(dir);
	EXPECT_EQ(khz < 1000000 ? 1u : 0u, c.conv.ns_int);
	for (int i = 0; i < 1000; i++) {
		uint64_t t0 = tsc_rdtsc_ordered();
		uint64_t start = tsc_now_start(&c);
		uint64_t now = tsc_clock_now_unordered(&c), ordered = tsc_now_ordered(&c);
		uint64_t real = tsc_clock_realtime_unordered(&c), real_o = tsc_clock_realtime(&c);
		uint64_t t1 = tsc_rdtsc_ordered();

		ASSERT_LE(tsc_clock_at(&c, t0), start);
		ASSERT_GE(ordered, start);
		ASSERT_LE(tsc_clock_at(&c, t0), ordered);
		ASSERT_GE(tsc_clock_at(&c, t1), ordered);
		ASSERT_LE(tsc_clock_at(&c, t0) - 1000, now);
		ASSERT_GE(tsc_clock_at(&c, t1), now);
		ASSERT_LE(tsc_ticks_to_ns(&c.conv, t0) - c.real_off - 1000, real);
		ASSERT_GE(tsc_ticks_to_ns(&c.conv, t1) - c.real_off, real);
		ASSERT_LE(tsc_ticks_to_ns(&c.conv, t0) - c.real_off, real_o);
		ASSERT_GE(tsc_ticks_to_ns(&c.conv, t1) - c.real_off, real_o);
	}
}

/* A clock whose init failed reads clock_gettime(), through each of its readers. */
static void reads_clock_gettime(struct __test_metadata *_metadata, const struct tsc_clock *c)
{
	static const clockid_t ids[] = { CLOCK_MONOTONIC, CLOCK_MONOTONIC, CLOCK_REALTIME,
					 CLOCK_REALTIME, CLOCK_MONOTONIC };

	for (int k = 0; k < 5; k++) {
		uint64_t a = clock_ns(ids[k]);
		uint64_t v = k == 0 ? tsc_clock_now(c) : k == 1 ? tsc_clock_now_unordered(c) :
			     k == 2 ? tsc_clock_realtime(c) : k == 3 ?
			     tsc_clock_realtime_unordered(c) : tsc_now_start(c);
		uint64_t b = clock_ns(ids[k]);

		EXPECT_TRUE(a <= v && v <= b) TH_LOG("reader %d: %llu, not within %llu..%llu", k,
						     (unsigned long long)v, (unsigned long long)a,
						     (unsigned long long)b);
	}
}

/* Its frequency source failed (the sysfs source asked for, and no file); 1.2's read 0. */
TEST(a_failed_clock_reads_clock_gettime)
{
	TSC_CLOCK(c);
	char dir[64];
	TSC_OPTS(o, .source = TSC_SOURCE_SYSFS, .sysfs_root = dir);

	fake_root(_metadata, dir, sizeof(dir), 0);
	EXPECT_EQ(-ENOENT, tsc_clock_init(&c, &o));
	remove_root(dir);
	reads_clock_gettime(_metadata, &c);
}

/*
 * Or an anchor failed, after the frequency was known (a sysfs file, at
 * once): the clock reads clock_gettime() too, not the TSC's count offset
 * by anchors never taken, and tsc_last_error() says which.  (Each of the
 * first two failing leaves readers with no offset at all.)
 */
TEST(a_clock_missing_an_anchor_reads_clock_gettime)
{
	static const clockid_t ids[] = { CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_MONOTONIC_RAW,
					 CLOCK_BOOTTIME };
	char dir[64];
	TSC_OPTS(o, .source = TSC_SOURCE_SYSFS, .sysfs_root = dir);

	fake_root(_metadata, dir, sizeof(dir), 2600002);
	for (int i = 0; i < 4; i++) {
		TSC_CLOCK(c);

		tsc__test_anchor_fails = (int)ids[i];
		EXPECT_EQ(-EAGAIN, tsc_clock_init(&c, &o)) TH_LOG("clock %d", (int)ids[i]);
		tsc__test_anchor_fails = -1;
		EXPECT_NE(NULL, strstr(tsc_last_error(), "went backwards")) TH_LOG("%s", tsc_last_error());
		reads_clock_gettime(_metadata, &c);
	}
	remove_root(dir);
}

/* 1.0's names, which 1.3 deprecates: the same as their 1.3 ones. */
TEST_F(clock, the_old_names_read_the_same)
{
	for (int i = 0; i < 1000; i++) {
		uint64_t a = tsc_clock_now(&clk), now = tsc_now(&clk), o = tsc_now_ordered(&clk);
		uint64_t b = tsc_clock_now(&clk);
		uint64_t ra = tsc_clock_realtime(&clk), r = tsc_now_realtime(&clk);
		uint64_t rb = tsc_clock_realtime(&clk), t = tsc_ticks();

		ASSERT_TRUE(a - 1000 <= now && now <= b) TH_LOG("tsc_now()");
		ASSERT_TRUE(a <= o && o <= b) TH_LOG("tsc_now_ordered()");
		ASSERT_TRUE(ra - 1000 <= r && r <= rb) TH_LOG("tsc_now_realtime()");
		ASSERT_EQ(tsc_clock_at(&clk, t), tsc_clock_ns(&clk, t));
		ASSERT_LE(t - 1000000, tsc_rdtsc());
	}
}

TEST(fast_path_at_2600_mhz)
{
	readings_match_the_definition(_metadata, 2600002);
}

TEST(whole_ns_path_at_600_mhz)
{
	readings_match_the_definition(_metadata, 600000);
}

TEST(whole_ns_path_just_below_1_ghz)
{
	readings_match_the_definition(_metadata, 999999);
}

TEST(init_errors)
{
	TSC_CLOCK(c);
	TSC_OPTS(o, .source = TSC_SOURCE_SYSFS, .sysfs_root = "/nonexistent");

	EXPECT_EQ(-ENOENT, tsc_clock_init(&c, &o));
	EXPECT_NE(0, strlen(tsc_last_error()));
}

/*
 * The library writes no further than the size the caller's header gave:
 * a clock of a later, larger header keeps its own fields, and a clock
 * declared without TSC_CLOCK() is refused rather than overrun.
 */
TEST(size_says_what_the_library_may_write)
{
	struct {
		struct tsc_clock clk;
		uint64_t later[4];	/* a later header's fields */
	} big = { .clk.sz = sizeof(big), .later = { 1, 2, 3, 4 } };
	struct tsc_clock none = { 0 };
	char dir[64];
	TSC_OPTS(o, .source = TSC_SOURCE_SYSFS, .sysfs_root = dir);

	fake_root(_metadata, dir, sizeof(dir), 2600002);
	EXPECT_EQ(-EINVAL, tsc_clock_init(&none, &o));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "TSC_CLOCK()")) TH_LOG("%s", tsc_last_error());
	none.sz = offsetof(struct tsc_clock, freq);
	EXPECT_EQ(-EINVAL, tsc_clock_init(&none, &o));
	ASSERT_EQ(0, tsc_clock_init(&big.clk, &o)) TH_LOG("%s", tsc_last_error());
	remove_root(dir);
	EXPECT_EQ(sizeof(big), big.clk.sz);
	EXPECT_EQ(2600002000u, big.clk.freq.num / big.clk.freq.den);
	for (unsigned int i = 0; i < 4; i++)
		EXPECT_EQ(i + 1, big.later[i]);
	/* What a read touches starts a cache line and fits in it. */
	EXPECT_EQ(0u, (uintptr_t)&big.clk % 64);
	EXPECT_GE(64u, offsetof(struct tsc_clock, seq) + sizeof(big.clk.seq));
}

TEST_HARNESS_MAIN
