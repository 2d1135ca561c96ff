// SPDX-License-Identifier: GPL-2.0
/*
 * Unit test of common/tsc_offset.c, the estimator the module runs, fed with
 * synthetic probes whose true offsets and latencies are known.
 *
 * The simulation: real time advances in ticks; the reference CPU's TSC reads
 * real time plus 'base', the target's reads that plus its offset at the
 * moment.  A probe is: the reference reads t1, after a latency d1 the target
 * reads t, after a latency d2 the reference reads t2.  The bracket is then
 * exactly [offset - d2, offset + d1], so the expected intersection is known
 * to the tick and the test can demand it, not just plausibility.
 */
#include <stdint.h>
#include <stdlib.h>

#include "../testlib/harness.h"
#include "tsc_offset.h"

struct sim {
	uint64_t rng;		/* xorshift64 state */
	uint64_t now;		/* real time, in ticks */
	uint64_t base;		/* reference TSC = now + base */
	uint64_t min_d1, min_d2;	/* smallest latencies drawn */
};

static uint64_t rnd(struct sim *s)
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return s->rng;
}

/*
 * A latency in [lo, lo + spread), and now and then (1 in 16) a long one,
 * as an NMI or SMI would cause.
 */
static uint64_t latency(struct sim *s, uint64_t lo, uint64_t spread)
{
	uint64_t d = lo + rnd(s) % spread;

	if (rnd(s) % 16 == 0)
		d += 100 * spread;
	return d;
}

static void sim_init(struct sim *s, uint64_t seed, uint64_t base)
{
	*s = (struct sim){ .rng = seed | 1, .now = 1000, .base = base,
			   .min_d1 = UINT64_MAX, .min_d2 = UINT64_MAX };
}

/* One probe of a target whose offset is 'off', added to 'e'. */
static void probe(struct sim *s, struct tscfk_offset_est *e, int64_t off,
		  uint64_t lat_lo, uint64_t lat_spread)
{
	uint64_t d1 = latency(s, lat_lo, lat_spread);
	uint64_t d2 = latency(s, lat_lo, lat_spread);
	uint64_t t1 = s->now + s->base;
	uint64_t t = s->now + d1 + s->base + (uint64_t)off;
	uint64_t t2 = s->now + d1 + d2 + s->base;

	s->min_d1 = d1 < s->min_d1 ? d1 : s->min_d1;
	s->min_d2 = d2 < s->min_d2 ? d2 : s->min_d2;
	s->now += d1 + d2 + rnd(s) % 50;
	tscfk_offset_add(e, t1, t, t2);
}

static const int64_t offsets[] = {
	0, 1, -1, 37, -37, 5000, -5000, 123456789, -123456789,
	INT64_C(1) << 40, -(INT64_C(1) << 40),
};

/* Constant offsets: the exact intersection, and a verdict on warps. */
TEST(constant_offsets)
{
	for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
		for (uint64_t seed = 1; seed <= 20; seed++) {
			int64_t off = offsets[i];
			struct tscfk_offset_result r;
			struct tscfk_offset_est e;
			struct sim s;

			sim_init(&s, seed * 7919, seed * 1000003);
			tscfk_offset_init(&e);
			for (int k = 0; k < 500; k++)
				probe(&s, &e, off, 20, 200);
			ASSERT_TRUE(tscfk_offset_result(&e, &r));
			EXPECT_TRUE(r.consistent);
			EXPECT_EQ(500u, r.rounds);
			EXPECT_EQ(off - (int64_t)s.min_d2, r.min);
			EXPECT_EQ(off + (int64_t)s.min_d1, r.max);
			EXPECT_LE(r.min, off);
			EXPECT_GE(r.max, off);
			EXPECT_LE(r.min, r.offset);
			EXPECT_GE(r.max, r.offset);
			/* Every latency is >= 20: |offset| < 20 never shows a warp. */
			if (off > -20 && off < 20)
				EXPECT_TRUE(r.monotonic);
			/* Beyond the widest bracket, every probe shows one. */
			if (off > 30000 || off < -30000)
				EXPECT_FALSE(r.monotonic);
		}
	}
}

/* Counters near the 64-bit wrap still give the right small offsets. */
TEST(counter_wraps)
{
	struct tscfk_offset_result r;
	struct tscfk_offset_est e;
	struct sim s;

	sim_init(&s, 42, UINT64_MAX - 20000);
	tscfk_offset_init(&e);
	for (int k = 0; k < 200; k++)
		probe(&s, &e, -700, 10, 100);
	ASSERT_TRUE(tscfk_offset_result(&e, &r));
	EXPECT_TRUE(r.consistent);
	EXPECT_EQ(-700 - (int64_t)s.min_d2, r.min);
	EXPECT_EQ(-700 + (int64_t)s.min_d1, r.max);
}

/* A jump mid-run: flagged, and every offset the target had is reported. */
TEST(jump_mid_run)
{
	static const int64_t jumps[][2] = {
		{ 0, 10000 }, { 10000, 0 }, { -300, 300 }, { 500, -50000 },
	};

	for (size_t i = 0; i < sizeof(jumps) / sizeof(jumps[0]); i++) {
		int64_t before = jumps[i][0], after = jumps[i][1];
		struct tscfk_offset_result r;
		struct tscfk_offset_est e;
		struct sim s;

		sim_init(&s, 1234 + i, 77);
		tscfk_offset_init(&e);
		for (int k = 0; k < 1000; k++)
			probe(&s, &e, k < 500 ? before : after, 20, 200);
		ASSERT_TRUE(tscfk_offset_result(&e, &r));
		EXPECT_FALSE(r.consistent);
		EXPECT_LE(r.min, before);
		EXPECT_GE(r.max, before);
		EXPECT_LE(r.min, after);
		EXPECT_GE(r.max, after);
		/* The estimate follows the latest offset. */
		EXPECT_LE(r.offset, after + 220);
		EXPECT_GE(r.offset, after - 220);
		TH_LOG("jump %lld -> %lld: [%lld, %lld] estimate %lld",
		       (long long)before, (long long)after, (long long)r.min,
		       (long long)r.max, (long long)r.offset);
	}
}

/* A TSC that drifts by a tick per probe cannot be one constant offset. */
TEST(drift)
{
	struct tscfk_offset_result r;
	struct tscfk_offset_est e;
	struct sim s;

	sim_init(&s, 99, 5);
	tscfk_offset_init(&e);
	for (int k = 0; k < 2000; k++)
		probe(&s, &e, k, 5, 20);
	ASSERT_TRUE(tscfk_offset_result(&e, &r));
	EXPECT_FALSE(r.consistent);
	EXPECT_LE(r.min, 0);
	EXPECT_GE(r.max, 1999);
}

/* Too few probes give no result at all. */
TEST(too_few_rounds)
{
	struct tscfk_offset_result r = { .rounds = 12345 };
	struct tscfk_offset_est e;
	struct sim s;

	sim_init(&s, 3, 0);
	tscfk_offset_init(&e);
	EXPECT_FALSE(tscfk_offset_result(&e, &r));
	for (int k = 1; k < TSCFK_OFFSET_MIN_ROUNDS; k++) {
		probe(&s, &e, 10, 20, 20);
		EXPECT_FALSE(tscfk_offset_result(&e, &r));
	}
	EXPECT_EQ(12345u, r.rounds);	/* untouched when refused */
	probe(&s, &e, 10, 20, 20);
	EXPECT_TRUE(tscfk_offset_result(&e, &r));
	EXPECT_EQ((uint32_t)TSCFK_OFFSET_MIN_ROUNDS, r.rounds);
}

/* The reference's own TSC going backwards spoils the pair. */
TEST(reference_goes_backwards)
{
	struct tscfk_offset_result r;
	struct tscfk_offset_est e;
	struct sim s;

	sim_init(&s, 8, 1000000);
	tscfk_offset_init(&e);
	for (int k = 0; k < 50; k++)
		probe(&s, &e, 0, 20, 20);
	tscfk_offset_add(&e, 5000, 4990, 4000);	/* t2 < t1 */
	ASSERT_TRUE(tscfk_offset_result(&e, &r));
	EXPECT_FALSE(r.consistent);
	EXPECT_FALSE(r.monotonic);
	EXPECT_EQ(50u, r.rounds);

	/*
	 * Also when the target's reading is 2^63 away, where the bracket
	 * [t - t2, t - t1] wraps into one that looks well ordered.
	 */
	tscfk_offset_add(&e, 1000, (UINT64_C(1) << 63) + 950, 900);
	ASSERT_TRUE(tscfk_offset_result(&e, &r));
	EXPECT_EQ(50u, r.rounds);
}

/*
 * A bracket with zero on its edge is no warp: the target read the same
 * tick as the reference at one end, which is no time going back.
 */
TEST(zero_on_the_bracket_edge)
{
	static const struct {
		uint64_t t1, t, t2;
		bool monotonic;
	} probes[] = {
		{ 100, 110, 110, true },	/* [0, 10] */
		{ 110, 110, 120, true },	/* [-10, 0] */
		{ 100, 111, 110, false },	/* [1, 11] */
		{ 111, 110, 120, false },	/* [-10, -1] */
	};

	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		struct tscfk_offset_result r;
		struct tscfk_offset_est e;

		tscfk_offset_init(&e);
		for (int k = 0; k < TSCFK_OFFSET_MIN_ROUNDS; k++)
			tscfk_offset_add(&e, probes[i].t1 + 1000 * k,
					 probes[i].t + 1000 * k, probes[i].t2 + 1000 * k);
		ASSERT_TRUE(tscfk_offset_result(&e, &r));
		EXPECT_TRUE(r.consistent);
		EXPECT_EQ(probes[i].monotonic, r.monotonic)
			TH_LOG("bracket [%lld, %lld]", (long long)r.min, (long long)r.max);
	}
}

/* Extreme readings must not overflow (UBSan watches) and stay ordered. */
TEST(extreme_readings)
{
	struct tscfk_offset_result r;
	struct tscfk_offset_est e;

	/* The widest bracket there is: [t - t2, t - t1] = [0, INT64_MAX]. */
	tscfk_offset_init(&e);
	for (int k = 0; k < 10; k++)
		tscfk_offset_add(&e, 0, (uint64_t)INT64_MAX, (uint64_t)INT64_MAX);
	ASSERT_TRUE(tscfk_offset_result(&e, &r));
	EXPECT_TRUE(r.consistent);
	EXPECT_EQ(0, r.min);
	EXPECT_EQ(INT64_MAX, r.max);
	EXPECT_EQ(INT64_MAX / 2, r.offset);

	/* Disjoint brackets at both ends of the range. */
	tscfk_offset_init(&e);
	for (int k = 0; k < 10; k++) {
		tscfk_offset_add(&e, 0, (uint64_t)INT64_MIN + 2, 1);
		tscfk_offset_add(&e, 1, (uint64_t)INT64_MAX, 2);
	}
	ASSERT_TRUE(tscfk_offset_result(&e, &r));
	EXPECT_FALSE(r.consistent);
	EXPECT_FALSE(r.monotonic);
	EXPECT_EQ(INT64_MIN + 1, r.min);
	EXPECT_EQ(INT64_MAX - 1, r.max);
	EXPECT_LE(r.min, r.offset);
	EXPECT_GE(r.max, r.offset);

	/*
	 * A bracket straddling +-2^63 has no signed representation: it is
	 * refused like a reference going backwards, never turned around.
	 */
	tscfk_offset_add(&e, 0, (uint64_t)INT64_MIN, 1);
	ASSERT_TRUE(tscfk_offset_result(&e, &r));
	EXPECT_EQ(20u, r.rounds);
}

/* Skew over several CPUs: envelope with the reference at 0. */
TEST(skew)
{
	static const int64_t offs[] = { -100, 250, 40 };
	struct tscfk_skew skew;
	int64_t lo = 0, hi = 0;
	struct sim s;

	tscfk_skew_init(&skew);
	EXPECT_EQ(0u, tscfk_skew_max(&skew));
	EXPECT_TRUE(skew.monotonic);
	sim_init(&s, 5, 0);
	for (size_t i = 0; i < 3; i++) {
		struct tscfk_offset_result r;
		struct tscfk_offset_est e;

		tscfk_offset_init(&e);
		for (int k = 0; k < 300; k++)
			probe(&s, &e, offs[i], 10, 30);
		ASSERT_TRUE(tscfk_offset_result(&e, &r));
		tscfk_skew_add(&skew, &r);
		lo = r.min < lo ? r.min : lo;
		hi = r.max > hi ? r.max : hi;
	}
	/* The true skew (350) is within the bound, which is the envelope. */
	EXPECT_GE(tscfk_skew_max(&skew), 350u);
	EXPECT_EQ((uint64_t)(hi - lo), tscfk_skew_max(&skew));
	/* Offsets of 100 and 250 ticks exceed every 10..40 tick latency. */
	EXPECT_FALSE(skew.monotonic);
}

/* A pair whose offset moved is no promise of order, warp or none. */
TEST(skew_of_an_inconsistent_pair)
{
	struct tscfk_offset_result steady = { .min = -3, .max = 3,
					      .consistent = true, .monotonic = true };
	struct tscfk_offset_result moved = steady;
	struct tscfk_skew skew;

	tscfk_skew_init(&skew);
	tscfk_skew_add(&skew, &steady);
	EXPECT_TRUE(skew.monotonic);
	moved.consistent = false;
	tscfk_skew_add(&skew, &moved);
	EXPECT_FALSE(skew.monotonic);
	EXPECT_EQ(6u, tscfk_skew_max(&skew));
}

/*
 * TSC_ADJUST: CPUs of one package count one counter plus their own
 * TSC_ADJUST, so the offset the probes bound is the difference of the two
 * MSRs, wherever the counter and the MSRs stand (near the wrap included).
 * A TSC set apart from its TSC_ADJUST (another package reset later, a
 * hypervisor's offset) is caught as soon as that part exceeds the
 * interval's width.
 */
TEST(tsc_adjust_relation)
{
	static const int64_t adjusts[][2] = {
		{ 0, 0 }, { 1000, 0 }, { 0, 1000 }, { -123456789, 987654321 },
		{ INT64_MAX, INT64_MIN }, { -1, 1 },
	};

	for (size_t i = 0; i < sizeof(adjusts) / sizeof(adjusts[0]); i++) {
		int64_t adj_t = adjusts[i][0], adj_r = adjusts[i][1];
		/* The offset the two MSRs make: target minus reference. */
		int64_t off = (int64_t)((uint64_t)adj_t - (uint64_t)adj_r);

		for (int64_t apart = 0; apart <= 1000; apart += 1000) {
			struct tscfk_offset_result r;
			struct tscfk_offset_est e;
			struct sim s;

			/* The reference reads the counter plus its TSC_ADJUST. */
			sim_init(&s, 31 + (uint64_t)i, (uint64_t)adj_r - 4096);
			tscfk_offset_init(&e);
			for (int k = 0; k < 200; k++)
				probe(&s, &e, (int64_t)((uint64_t)off + (uint64_t)apart), 20, 100);
			ASSERT_TRUE(tscfk_offset_result(&e, &r));
			/* Latencies of at least 20 make an interval under 400 wide. */
			ASSERT_GT(400, r.max - r.min);
			EXPECT_EQ(apart == 0, tscfk_offset_adjust_agrees(&r, adj_t, adj_r))
				TH_LOG("TSC_ADJUST %lld and %lld, %lld ticks apart beside them",
				       (long long)adj_t, (long long)adj_r, (long long)apart);
		}
	}
}

/* The interval is closed: a TSC_ADJUST difference on either end agrees. */
TEST(tsc_adjust_interval_ends)
{
	const struct tscfk_offset_result r = { .min = -5, .max = 7 };

	EXPECT_TRUE(tscfk_offset_adjust_agrees(&r, 10, 15));
	EXPECT_FALSE(tscfk_offset_adjust_agrees(&r, 10, 16));
	EXPECT_TRUE(tscfk_offset_adjust_agrees(&r, 17, 10));
	EXPECT_FALSE(tscfk_offset_adjust_agrees(&r, 18, 10));
}

TEST_HARNESS_MAIN
