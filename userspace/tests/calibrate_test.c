// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Calibration against simulated clocks whose truth is known: a TSC at an
 * exact rate, a reference clock with a given resolution, reads that take
 * time, and now and then a preemption between two reads.  The result must
 * be within its own stated precision of the truth, reach the precision
 * asked for when given time, and fail cleanly when the clocks are broken.
 */
#include <errno.h>
#include <math.h>

#include "kselftest_harness.h"
#include "internal.h"

typedef unsigned __int128 u128;

struct sim {
	uint64_t ps;		/* true time, picoseconds */
	uint64_t hz_milli;	/* TSC rate, mHz */
	uint64_t res_ns;	/* reference clock resolution */
	uint64_t rng, calls;
	bool stuck;		/* the reference clock never advances */
};

static uint64_t rnd(struct sim *s)
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return s->rng;
}

/* Every read takes 5-15 ns; one in 2000 is preempted for 50 us. */
static void pass_time(struct sim *s)
{
	s->ps += 5000 + rnd(s) % 10000;
	if (++s->calls % 2000 == 0)
		s->ps += 50000000;
}

static uint64_t sim_ticks(void *ctx)
{
	struct sim *s = ctx;

	pass_time(s);
	return (uint64_t)((u128)s->ps * s->hz_milli / 1000000000000000ull) + 123456789;
}

static uint64_t sim_ns(void *ctx)
{
	struct sim *s = ctx;

	pass_time(s);
	if (s->stuck)
		return 42;
	return s->ps / 1000 / s->res_ns * s->res_ns + 1000000000;
}

static double error_ppm(const struct tsc_freq *f, uint64_t hz_milli)
{
	double hz = (double)hz_milli / 1e3;

	return ((double)f->num / (double)f->den - hz) / hz * 1e6;
}

static void calibrate(struct __test_metadata *_metadata, uint64_t hz_milli,
		      uint64_t res_ns, double target_ppm, uint64_t max_ms,
		      struct tsc_freq *f)
{
	struct sim s = { .hz_milli = hz_milli, .res_ns = res_ns, .rng = 77 };
	struct tsc__calib_clock c = { sim_ticks, sim_ns, res_ns, &s };

	ASSERT_EQ(0, tsc__calibrate(f, &c, target_ppm, max_ms * 1000000))
		TH_LOG("%s", tsc_last_error());
	TH_LOG("%.3f Hz: %+.4f ppm off, claims +-%.4f; %s", hz_milli / 1e3,
	       error_ppm(f, hz_milli), f->precision_ppm, f->detail);
	EXPECT_EQ(TSC_SOURCE_CALIBRATION, f->source);
	/* Honest: the truth is within the precision it states. */
	EXPECT_GE(f->precision_ppm, fabs(error_ppm(f, hz_milli)));
}

TEST(reaches_the_precision_asked_for)
{
	struct tsc_freq f;

	calibrate(_metadata, 2600002345678ull, 1, 0.1, 1000, &f);
	EXPECT_GE(0.1, f.precision_ppm);
	/* And stops there: about 20 ms of simulated time for 0.1 ppm at 1 ns. */
	EXPECT_NE(NULL, strstr(f.detail, "ms,"));

	calibrate(_metadata, 1000000123456ull, 1, 0.05, 1000, &f);
	EXPECT_GE(0.05, f.precision_ppm);
}

/* A coarse clock (an HPET's 70 ns) needs longer, and says so. */
TEST(coarse_reference_clock)
{
	struct tsc_freq f;

	calibrate(_metadata, 3400000000000ull, 70, 1.0, 1000, &f);
	EXPECT_GE(1.0, f.precision_ppm);
}

/* Too little time for the target: a worse precision, stated honestly. */
TEST(time_limit_comes_first)
{
	struct tsc_freq f;

	calibrate(_metadata, 2600002345678ull, 1, 0.001, 5, &f);
	EXPECT_LT(0.001, f.precision_ppm);
}

TEST(broken_clocks_fail_cleanly)
{
	struct sim s = { .hz_milli = 2600000000000ull, .res_ns = 1, .rng = 5,
			 .stuck = true };
	struct tsc__calib_clock c = { sim_ticks, sim_ns, 1, &s };
	struct tsc_freq f = { .source = TSC_SOURCE_NONE };

	/* The reference never moves: the sample cap ends it, no result. */
	EXPECT_EQ(-EAGAIN, tsc__calibrate(&f, &c, 0.1, 1000000));
	EXPECT_NE(0, strlen(tsc_last_error()));
	EXPECT_EQ(TSC_SOURCE_NONE, f.source);
}

TEST(bad_arguments)
{
	struct tsc_freq f;

	EXPECT_EQ(-EINVAL, tsc_freq_calibrate(&f, -1, 10));
	EXPECT_EQ(-EINVAL, tsc_freq_calibrate(&f, NAN, 10));
	EXPECT_EQ(-EINVAL, tsc_freq_calibrate(&f, 0.1, 60001));
}

/* The real thing, on this machine: plausible and self-consistent. */
TEST(real_calibration)
{
	struct tsc_freq a, b;

	ASSERT_EQ(0, tsc_freq_calibrate(&a, 0.1, 1000)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(0, tsc_freq_calibrate(&b, 0.1, 1000)) TH_LOG("%s", tsc_last_error());
	TH_LOG("%.3f Hz +-%.3f ppm, then %.3f Hz +-%.3f ppm (%s)", a.hz,
	       a.precision_ppm, b.hz, b.precision_ppm, a.detail);
	EXPECT_GE(a.precision_ppm + b.precision_ppm, fabs(tsc_freq_diff_ppm(&a, &b)));
}

TEST_HARNESS_MAIN
