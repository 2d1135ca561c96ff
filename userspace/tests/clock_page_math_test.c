// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The clock page's arithmetic (common/tsc_clock_page.c) against the
 * kernel's own: for random timekeeper states and TSC readings, the page's
 * one multiplication gives each clock exactly as the kernel's vDSO does it,
 * with its normalised seconds and shifted nanoseconds; and the timekeeper's
 * rate in mHz is cycle_interval over ntp_tick.
 */
#include <math.h>
#include <string.h>

#include "../../testlib/harness.h"
#include "tsc_clock_page.h"

#define NSEC_PER_SEC 1000000000ull

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A clock as the vDSO holds it: seconds, and ns in 2^-shift units. */
struct vdso_ts {
	uint64_t sec, nsec;
};

/* kernel/time/vsyscall.c: add whole ns, carry into the seconds. */
static struct vdso_ts vdso_add(struct vdso_ts ts, int64_t ns, uint32_t shift)
{
	int64_t sec = ns / (int64_t)NSEC_PER_SEC, rem = ns % (int64_t)NSEC_PER_SEC;

	if (rem < 0) {
		rem += NSEC_PER_SEC;
		sec--;
	}
	ts.sec += (uint64_t)sec;
	ts.nsec += (uint64_t)rem << shift;
	while (ts.nsec >= NSEC_PER_SEC << shift) {
		ts.nsec -= NSEC_PER_SEC << shift;
		ts.sec++;
	}
	return ts;
}

/* lib/vdso/gettimeofday.c with x86's vdso_calc_delta(): no delta before cycle_last. */
static uint64_t vdso_read(struct vdso_ts ts, uint64_t t, uint64_t last, uint32_t mult,
			  uint32_t shift)
{
	uint64_t ns = ts.nsec;

	if (t > last)
		ns += (t - last) * mult;
	return ts.sec * NSEC_PER_SEC + (ns >> shift);
}

/* A state of the kind the kernel has: any TSC rate from 0.5 to 20 GHz. */
static struct tscfk_clock_state random_state(void)
{
	struct tscfk_clock_state s = { 0 };
	uint32_t shift = 10 + (uint32_t)(next() % 23);
	/* ns per tick from 0.05 to 2, as mult / 2^shift. */
	double ns_per_tick = 0.05 + (double)(next() % 1950) / 1000.0;
	uint64_t mult = (uint64_t)(ns_per_tick * (double)(1ull << shift));

	if (mult > UINT32_MAX)
		mult = UINT32_MAX;
	s.shift = shift;
	s.raw_shift = shift;
	s.mult = (uint32_t)mult;
	s.raw_mult = (uint32_t)(mult - mult / 1000 * (next() % 2));
	/* Below 2^63: a few seconds after it stay below 2^64. */
	s.cycle_last = next() >> (1 + next() % 8);
	s.raw_cycle_last = s.cycle_last;
	s.xtime_sec = next() % (1ull << 33);
	s.xtime_nsec = next() % (NSEC_PER_SEC << shift);
	s.wall_to_mono_ns = -(int64_t)(next() % (s.xtime_sec * NSEC_PER_SEC + 1));
	s.mono_to_boot_ns = (int64_t)(next() % (1000000ull * NSEC_PER_SEC));
	s.tai_offset_s = 37;
	s.raw_sec = next() % (1ull << 32);
	s.raw_nsec = next() % (NSEC_PER_SEC << shift);
	s.cycle_interval = next() >> 20;
	s.ntp_tick = next();
	s.max_cycles = next();
	return s;
}

TEST(every_clock_as_the_kernel_computes_it)
{
	for (int i = 0; i < 20000; i++) {
		struct tscfk_clock_state s = random_state();
		struct tscfk_clock_page p = { 0 };
		struct vdso_ts real = { s.xtime_sec, s.xtime_nsec }, mono, boot, tai, raw;
		struct tscfk_clock_map mreal, mmono, mboot, mtai;
		/* What the kernel's 64-bit product allows: a few seconds of ticks. */
		uint64_t range = (UINT64_MAX / s.mult) >> 4;

		mono = vdso_add(real, s.wall_to_mono_ns, s.shift);
		boot = vdso_add(mono, s.mono_to_boot_ns, s.shift);
		tai = vdso_add(real, s.tai_offset_s * (int64_t)NSEC_PER_SEC, s.shift);
		raw = (struct vdso_ts){ s.raw_sec, s.raw_nsec };
		ASSERT_EQ(0, tscfk_clock_page_fill(&p, &s));
		mreal = (struct tscfk_clock_map){ p.mult_ns, p.mult, p.frac, p.real_off };
		mmono = (struct tscfk_clock_map){ p.mult_ns, p.mult, p.frac, p.mono_off };
		mboot = (struct tscfk_clock_map){ p.mult_ns, p.mult, p.frac, p.boot_off };
		mtai = (struct tscfk_clock_map){ p.mult_ns, p.mult, p.frac, p.tai_off };
		for (int j = 0; j < 8; j++) {
			/* Some before cycle_last, most after, the last at the range's end. */
			uint64_t t = j == 0 ? s.cycle_last - (next() % 1000) :
				     j == 7 ? s.cycle_last + range :
				     s.cycle_last + next() % range;

			if (j == 0 && t > s.cycle_last)
				t = s.cycle_last;	/* wrapped below 0 */
			ASSERT_EQ(vdso_read(real, t, s.cycle_last, s.mult, s.shift),
				  tscfk_clock_ns(&mreal, p.cycle_last, t)) {
				TH_LOG("REALTIME, state %d, shift %u mult %u, t - last %lld",
				       i, s.shift, s.mult, (long long)(t - s.cycle_last));
			}
			ASSERT_EQ(vdso_read(mono, t, s.cycle_last, s.mult, s.shift),
				  tscfk_clock_ns(&mmono, p.cycle_last, t));
			ASSERT_EQ(vdso_read(boot, t, s.cycle_last, s.mult, s.shift),
				  tscfk_clock_ns(&mboot, p.cycle_last, t));
			ASSERT_EQ(vdso_read(tai, t, s.cycle_last, s.mult, s.shift),
				  tscfk_clock_ns(&mtai, p.cycle_last, t));
			ASSERT_EQ(vdso_read(raw, t, s.raw_cycle_last, s.raw_mult, s.raw_shift),
				  tscfk_clock_ns(&p.raw, s.raw_cycle_last, t)) {
				TH_LOG("MONOTONIC_RAW, state %d", i);
			}
		}
		EXPECT_EQ(s.mult, p.kernel_mult);
		EXPECT_EQ(s.shift, p.kernel_shift);
		/* Carried as they are: the rate's terms and the staleness bound. */
		EXPECT_EQ(s.cycle_interval, p.cycle_interval);
		EXPECT_EQ(s.ntp_tick, p.ntp_tick);
		EXPECT_EQ(s.max_cycles, p.max_cycles);
	}
}

/* The formula has no room for a shift of 0 or over 32: refused, nothing written. */
TEST(shifts_it_cannot_expand)
{
	struct tscfk_clock_state s = random_state();
	struct tscfk_clock_page p, before;

	memset(&p, 0xa5, sizeof(p));
	before = p;
	s.shift = 0;
	EXPECT_EQ(-1, tscfk_clock_page_fill(&p, &s));
	s.shift = 33;
	EXPECT_EQ(-1, tscfk_clock_page_fill(&p, &s));
	EXPECT_EQ(0, memcmp(&p, &before, sizeof(p)));
}

/*
 * cycle_interval ticks last ntp_tick / 2^32 ns: at 2.6 GHz with HZ=250,
 * exactly 2.6e12 mHz without NTP; when NTP makes those ticks count for
 * 500 ppm more ns, the rate the clocks apply is 500 ppm lower.
 */
TEST(rate_in_millihertz)
{
	struct tscfk_clock_page p = { .cycle_interval = 10400000,
				      .ntp_tick = 4000000ull << 32 };
	long double want;

	EXPECT_EQ(2600000000000ull, tscfk_clock_rate_millihz(&p));
	p.ntp_tick = (uint64_t)(4000000.0L * 1.0005L * 4294967296.0L);
	want = 10400000.0L * 1e12L * 4294967296.0L / (long double)p.ntp_tick;
	EXPECT_GE(1.0L, fabsl((long double)tscfk_clock_rate_millihz(&p) - want));
	p.ntp_tick = 0;
	EXPECT_EQ(0, tscfk_clock_rate_millihz(&p));
	/* A quotient past 64 bits is no rate. */
	p.ntp_tick = 1;
	EXPECT_EQ(0, tscfk_clock_rate_millihz(&p));
	/* So is one whose ticks * 1000 would wrap to a small number first. */
	p.cycle_interval = UINT64_MAX / 1000 + 1;
	p.ntp_tick = 4000000ull << 32;
	EXPECT_EQ(0, tscfk_clock_rate_millihz(&p));
}

TEST_HARNESS_MAIN
