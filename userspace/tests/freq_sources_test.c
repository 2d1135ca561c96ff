// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc-report's check that the frequency's sources agree: two values agree
 * while they are no further apart than both precisions together, in
 * either order, and the first pair that does not is the one named.  The
 * values are made up: no machine disagrees with itself on demand.
 */
#include "../../testlib/harness.h"
#include "../tools/freq_sources.h"

/* hz (as num / den, which is what is compared) with a precision of ppm. */
static struct tsc_freq freq(enum tsc_source source, double hz, double ppm)
{
	struct tsc_freq f = { .source = source, .num = (uint64_t)hz, .den = 1, .hz = hz,
			      .precision_ppm = ppm, .precision_of = TSC_REFERENCE_KERNEL };

	return f;
}

TEST(within_both_precisions_is_agreement_either_way)
{
	/* 3 ppm apart; 1 + 2.5 ppm allowed. */
	struct freq_sources s = { .n = 2, .f = { freq(TSC_SOURCE_SYSFS, 2e9, 1),
						   freq(TSC_SOURCE_CALIBRATION, 2e9 + 6000, 2.5) } };

	EXPECT_TRUE(fs_compare(&s));
	EXPECT_EQ(-1, s.a);
	s.f[0] = freq(TSC_SOURCE_SYSFS, 2e9 + 12000, 1);	/* 3 ppm the other way */
	EXPECT_TRUE(fs_compare(&s));
}

TEST(beyond_both_precisions_is_disagreement_either_way)
{
	/* 3 ppm apart; 1 + 1.5 ppm allowed: neither precision alone, nor both. */
	struct freq_sources s = { .n = 2, .f = { freq(TSC_SOURCE_SYSFS, 2e9, 1),
						   freq(TSC_SOURCE_CALIBRATION, 2e9 + 6000, 1.5) } };

	EXPECT_FALSE(fs_compare(&s));
	EXPECT_EQ(0, s.a);
	EXPECT_EQ(1, s.b);
	EXPECT_GT(-2.9, s.apart_ppm);
	EXPECT_LT(-3.1, s.apart_ppm);
	s.f[0] = freq(TSC_SOURCE_SYSFS, 2e9 + 12000, 1);
	EXPECT_FALSE(fs_compare(&s));
	EXPECT_LT(2.9, s.apart_ppm);
}

TEST(every_pair_is_compared_and_the_first_bad_one_named)
{
	/*
	 * sysfs agrees with cpuid and cpuid with the calibration (the wide
	 * crystal's precision covers both), but sysfs and the calibration,
	 * both precise, are 20 ppm apart: agreement is not transitive.
	 */
	struct freq_sources s = { .n = 3, .f = { freq(TSC_SOURCE_SYSFS, 2e9, 0.2),
						   freq(TSC_SOURCE_CPUID, 2e9 + 20000, 50),
						   freq(TSC_SOURCE_CALIBRATION, 2e9 + 40000, 0.1) } };

	EXPECT_FALSE(fs_compare(&s));
	EXPECT_EQ(0, s.a);
	EXPECT_EQ(2, s.b);
}

TEST(one_source_or_none_agrees)
{
	struct freq_sources s = { .n = 1, .f = { freq(TSC_SOURCE_CALIBRATION, 2e9, 0.1) } };

	EXPECT_TRUE(fs_compare(&s));
	s.n = 0;
	EXPECT_TRUE(fs_compare(&s));
	EXPECT_EQ(-1, s.b);
}

TEST_HARNESS_MAIN
