// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Conversion is exact: for every frequency tried and every 64-bit count,
 * tsc_ticks_to_ns() is the exact t * 1e9 * den / num rounded down, or one
 * more (modulo 2^64); tsc_ns_to_ticks() likewise.  The reference is
 * computed in 128 bits, which holds t * 1e9 * den for den < 2^32.
 */
#include <errno.h>

#include "../../testlib/harness.h"
#include "libtsc.h"

typedef unsigned __int128 u128;

static const struct { uint64_t num, den; } freqs[] = {
	{ 2600002000ull, 1 },		/* a kHz file */
	{ 2600002317434ull, 1000 },	/* a calibration, to the mHz */
	{ 24000000ull * 216, 2 },	/* CPUID 0x15: 24 MHz * 216 / 2 */
	{ 19200000ull * 157, 2 },	/* 19.2 MHz crystal */
	{ 1000000ull, 1 },		/* the slowest accepted: 1 MHz */
	{ 20000000000ull, 1 },		/* the fastest: 20 GHz */
	{ 999999999ull, 1 },		/* just below 1 GHz: ns_int 1 */
	{ 1000000000ull, 1 },		/* exactly 1 GHz: no fraction */
	{ 3000000001ull, 3 },		/* a ratio that never divides */
	{ 2600000007ull * 4294967291ull, 4294967291ull },	/* den near 2^32 */
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Edges: 0, 1, 2^k - 1, 2^k, 2^k + 1, and the top of the range. */
static uint64_t edge(int i)
{
	int k = i / 3;

	if (k >= 64)
		return UINT64_MAX - (uint64_t)(i % 3);
	return (1ull << k) + (uint64_t)(i % 3) - 1;
}

static void check(struct __test_metadata *_metadata, const struct tsc_conv *c,
		  uint64_t num, uint64_t den, uint64_t t)
{
	uint64_t exact_ns = (uint64_t)((u128)t * 1000000000u * den / num);
	uint64_t exact_tk = (uint64_t)((u128)t * num / ((u128)den * 1000000000u));
	uint64_t ns = tsc_ticks_to_ns(c, t), tk = tsc_ns_to_ticks(c, t);

	/* Wrapping differences: the exact value (mod 2^64) or one more. */
	ASSERT_GE(1u, ns - exact_ns) TH_LOG("%llu/%llu Hz, %llu ticks: %llu ns, exact %llu",
		(unsigned long long)num, (unsigned long long)den,
		(unsigned long long)t, (unsigned long long)ns,
		(unsigned long long)exact_ns);
	ASSERT_GE(1u, tk - exact_tk) TH_LOG("%llu/%llu Hz, %llu ns: %llu ticks, exact %llu",
		(unsigned long long)num, (unsigned long long)den,
		(unsigned long long)t, (unsigned long long)tk,
		(unsigned long long)exact_tk);
}

TEST(exact_over_the_whole_range)
{
	for (size_t f = 0; f < sizeof(freqs) / sizeof(freqs[0]); f++) {
		struct tsc_conv c;

		ASSERT_EQ(0, tsc_conv_init(&c, freqs[f].num, freqs[f].den));
		for (int i = 0; i < 3 * 64 + 3; i++)
			check(_metadata, &c, freqs[f].num, freqs[f].den, edge(i));
		for (int i = 0; i < 1000000; i++) {
			uint64_t t = rnd();

			/* All magnitudes, not only huge ones. */
			check(_metadata, &c, freqs[f].num, freqs[f].den, t >> (t % 64));
		}
	}
}

/* Exactly representable ratios convert without error. */
TEST(exact_ratios_have_no_error)
{
	struct tsc_conv c;

	ASSERT_EQ(0, tsc_conv_init(&c, 2000000000, 1));	/* 0.5 ns per tick */
	EXPECT_EQ(0u, c.ns_int);
	EXPECT_EQ(1ull << 63, c.ns_frac);
	EXPECT_EQ(500000000000ull, tsc_ticks_to_ns(&c, 1000000000000ull));
	EXPECT_EQ(2000000000000ull, tsc_ns_to_ticks(&c, 1000000000000ull));
	ASSERT_EQ(0, tsc_conv_init(&c, 1000000000, 1));
	EXPECT_EQ(1u, c.ns_int);
	EXPECT_EQ(0u, c.ns_frac);
	EXPECT_EQ(UINT64_MAX, tsc_ticks_to_ns(&c, UINT64_MAX));
}

TEST(bad_frequencies_are_refused)
{
	struct tsc_conv c;

	EXPECT_EQ(-ERANGE, tsc_conv_init(&c, 0, 1));
	EXPECT_EQ(-ERANGE, tsc_conv_init(&c, 1, 0));
	EXPECT_EQ(-ERANGE, tsc_conv_init(&c, 999999, 1));
	EXPECT_EQ(-ERANGE, tsc_conv_init(&c, 20000000001ull, 1));
	EXPECT_EQ(-EINVAL, tsc_conv_init(&c, UINT64_MAX, UINT64_MAX / 2));
	EXPECT_NE(0, strlen(tsc_last_error()));
}

TEST_HARNESS_MAIN
