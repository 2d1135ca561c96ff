// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The disciplined clock's loop is stable however rarely it is synced.
 *
 * Simulated: a system clock at a rate the TSC does not know, samples of it
 * with a microsecond of noise, and the sync's law (tsc__discipline_corr(),
 * the rate measured over the last interval as discipline.c measures it),
 * synced every 1, 2, 4, 8 and 16 s from 500 us off: from the third sync on
 * the error at every sync, where it is largest, stays within a bound
 * that the noise sets, whatever the period; each period's worst is
 * printed.  Then uneven intervals: alternating 1 s and 3 s, 2 s and 8 s,
 * drawn from 1 to 8 s, and one interval in ten eight times the others,
 * which the law overshoots once, by seven times the error it had.
 *
 * For real: a clock started 500 ppm off, the caller syncing every 1, 2, 4,
 * 8 and 16 s (five clocks at once), against clock_gettime() just before
 * each sync.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#include "fake_sysfs.h"
#include "internal.h"

#define NOISE_NS	1000.0
#define SIM_BOUND_NS	10000.0		/* 10 us: ten times the noise */
/*
 * Uneven intervals: the rate measured over a short interval carries the
 * samples' noise over the longer one after it, up to eight times as long.
 */
#define UNEVEN_BOUND_NS	30000.0
#define REAL_BOUND_NS	50000		/* 50 us on a machine's real clocks */

/* A deterministic noise in [-NOISE_NS, NOISE_NS]. */
static double noise(unsigned int *state)
{
	*state = *state * 1103515245u + 12345u;
	return ((double)(*state >> 8 & 0xffff) / 32767.5 - 1.0) * NOISE_NS;
}

/*
 * The loop over n syncs at the intervals period[k % np] (s): the largest
 * error seen at a sync from sync 'from' on, in ns.  The system's clock
 * runs 37 ppm fast of the TSC's nominal rate (NTP's correction, say).
 */
static double simulate(const double *period, int np, int n, int from)
{
	const double sys_rate = 1.0 + 37e-6;	/* system ns per TSC ns */
	double t = 0, clock0 = 500000, clock_rate = 1.0;	/* the clock's segment */
	double seg_t = 0, last_t = 0, last_sys = 0, worst = 0;
	uint64_t intervals[TSC__DISCIPLINE_INTERVALS] = { 0 };
	unsigned int state = 1;

	for (int k = 0; k < n; k++) {
		double p = period[k % np] * 1e9, sys, measured, err, rate;

		t += p;
		sys = t * sys_rate;
		measured = sys + noise(&state);
		err = clock0 + (t - seg_t) * clock_rate - measured;
		if (k >= from && fabs(clock0 + (t - seg_t) * clock_rate - sys) > worst)
			worst = fabs(clock0 + (t - seg_t) * clock_rate - sys);
		/* The system's rate over the last interval, as sync_locked() takes it. */
		rate = (measured - last_sys) / (t - last_t);
		last_t = t;
		last_sys = measured;
		clock0 += (t - seg_t) * clock_rate;
		seg_t = t;
		clock_rate = rate * (1 + tsc__discipline_corr((int64_t)err,
				tsc__discipline_horizon(intervals, (uint64_t)p)));
	}
	return worst;
}

TEST(stable_at_any_sync_period)
{
	static const double periods[] = { 1, 2, 4, 8, 16 };

	for (size_t i = 0; i < sizeof(periods) / sizeof(periods[0]); i++) {
		double worst = simulate(&periods[i], 1, 100, 2);

		TH_LOG("simulated, synced every %2.0f s: worst error from the third sync on %.0f ns (bound %.0f)",
		       periods[i], worst, SIM_BOUND_NS);
		EXPECT_GE(SIM_BOUND_NS, worst);
	}
}

/*
 * Intervals that alternate or vary: once the horizon has seen a few of
 * them (from the eighth sync), the error stays within the noise's bound.
 * Before, the first error is slewed over the first interval, and a longer
 * one after it overshoots.
 */
TEST(stable_at_uneven_intervals)
{
	static const double alternating[][2] = { { 1, 3 }, { 2, 8 } };
	double drawn[16], worst;
	unsigned int state = 7;

	for (size_t i = 0; i < 2; i++) {
		worst = simulate(alternating[i], 2, 100, 8);
		TH_LOG("simulated, alternating %.0f s and %.0f s: worst error %.0f ns (bound %.0f)",
		       alternating[i][0], alternating[i][1], worst, UNEVEN_BOUND_NS);
		EXPECT_GE(UNEVEN_BOUND_NS, worst);
	}
	for (size_t i = 0; i < 16; i++)
		drawn[i] = 1 + (noise(&state) / NOISE_NS + 1) * 3.5;	/* 1 to 8 s */
	worst = simulate(drawn, 16, 160, 8);
	TH_LOG("simulated, intervals drawn from 1 to 8 s: worst error %.0f ns (bound %.0f)", worst,
	       UNEVEN_BOUND_NS);
	EXPECT_GE(UNEVEN_BOUND_NS, worst);
}

/* Nine syncs a second apart, then one 8 s later: the overshoot is bounded. */
TEST(one_long_interval_overshoots_once)
{
	static const double periods[] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 8 };
	double worst = simulate(periods, 10, 100, 2);

	TH_LOG("simulated, every tenth interval 8 s: worst error %.0f ns (bound %.0f)", worst,
	       8 * SIM_BOUND_NS);
	EXPECT_GE(8 * SIM_BOUND_NS, worst);
}

/* The horizon: the longest of the last four intervals. */
TEST(horizon)
{
	uint64_t iv[TSC__DISCIPLINE_INTERVALS] = { 0 };

	EXPECT_EQ(1u, tsc__discipline_horizon(iv, 1));
	EXPECT_EQ(8u, tsc__discipline_horizon(iv, 8));
	EXPECT_EQ(8u, tsc__discipline_horizon(iv, 1));
	EXPECT_EQ(8u, tsc__discipline_horizon(iv, 1));
	EXPECT_EQ(8u, tsc__discipline_horizon(iv, 1));
	EXPECT_EQ(1u, tsc__discipline_horizon(iv, 1));	/* out of the window */
}

/*
 * The staleness bound: three sync periods, the period the longest of the
 * last intervals and a second at least, in ticks (here 0.5 ns each); an
 * interval counted at most twice the longest before it (intervals[0] is
 * the newest), so that one long gap, however long, widens the bound by
 * that factor at most, while a caller that keeps the longer period has
 * it in full from its second interval.
 */
TEST(staleness_bound)
{
	uint64_t iv[TSC__DISCIPLINE_INTERVALS] = { 0 };

	EXPECT_EQ(6000000000u, tsc__discipline_max_delta(iv, 0.5));	/* 3 s */
	iv[2] = 2000000000;
	EXPECT_EQ(12000000000u, tsc__discipline_max_delta(iv, 0.5));	/* 3 x 2 s */
	iv[0] = 16000000000u;
	EXPECT_EQ(24000000000u, tsc__discipline_max_delta(iv, 0.5));	/* 3 x (2 x 2 s) */
	/* An hour's pause among 1 s syncs: 3 x 2 s, not 3 h. */
	for (int i = 0; i < TSC__DISCIPLINE_INTERVALS; i++)
		iv[i] = 1000000000;
	iv[1] = 3600000000000u;
	EXPECT_EQ(12000000000u, tsc__discipline_max_delta(iv, 0.5));
	/* The longer period kept: in full from its second interval. */
	iv[0] = 3600000000000u;
	EXPECT_EQ(21600000000000u, tsc__discipline_max_delta(iv, 0.5));
	iv[0] = iv[1] = UINT64_MAX;
	EXPECT_EQ(1ull << 62, tsc__discipline_max_delta(iv, 0.5));	/* below 2^63 */
}

/* The law itself: the horizon, and the limit. */
TEST(correction)
{
	EXPECT_EQ(-1e-5, tsc__discipline_corr(10000, 0));		/* 10 us over 1 s */
	EXPECT_EQ(-1e-5, tsc__discipline_corr(10000, 500000000));	/* at least 1 s */
	EXPECT_EQ(-2.5e-6, tsc__discipline_corr(10000, 4000000000ull));	/* over 4 s */
	EXPECT_EQ(1e-3, tsc__discipline_corr(-100000000, 1000000000));	/* MAX_SLEW */
	EXPECT_EQ(-1e-3, tsc__discipline_corr(100000000, 0));
}

/*
 * The kernel's rate from its NTP state, as kernel/time/ntp.c makes it:
 * ns a second of MONOTONIC per second of MONOTONIC_RAW.
 */
#define EXPECT_RATE(want, got, tol) do {					\
	double got_ = (got);							\
	EXPECT_GT((tol), fabs((want) - got_)) TH_LOG("%.12f, not %.12f", got_, (double)(want)); \
} while (0)

TEST(kernel_rate)
{
	struct timex tx = { .tick = 10000, .status = STA_NANO, .constant = 2 };

	EXPECT_EQ(1.0, tsc__discipline_kernel_rate(&tx, 0, 100));
	tx.freq = 500L * 65536;					/* +500 ppm */
	EXPECT_RATE(1.0005, tsc__discipline_kernel_rate(&tx, 0, 100), 1e-12);
	tx.freq = -250L * 65536;
	tx.tick = 10010;					/* +1000 ppm, -250 */
	EXPECT_RATE(1.00075, tsc__discipline_kernel_rate(&tx, 0, 100), 1e-12);
	tx.freq = 0;
	tx.tick = 10000;
	/* The PLL: 1.5 ms left after this second's 1/16: 0.1 ms this second. */
	tx.offset = 1500000;
	EXPECT_RATE(1.0001, tsc__discipline_kernel_rate(&tx, 0, 100), 1e-12);
	tx.constant = 6;					/* 1/256: 1.5 ms / 255 */
	EXPECT_RATE(1 + 1500000 / 255e9, tsc__discipline_kernel_rate(&tx, 0, 100), 1e-12);
	tx.offset = -1500000;
	EXPECT_RATE(1 - 1500000 / 255e9, tsc__discipline_kernel_rate(&tx, 0, 100), 1e-12);
	/* In microseconds, as fixed kernels report it, and as (u32)ns / 1000 (remainder lost). */
	tx.status = 0;
	tx.offset = -1500;
	EXPECT_RATE(1 - 1500000 / 255e9, tsc__discipline_kernel_rate(&tx, 0, 100), 1e-12);
	tx.offset = (long)((uint32_t)-1500000 / 1000);
	EXPECT_RATE(1 - 1500000 / 255e9, tsc__discipline_kernel_rate(&tx, 0, 100), 1e3 / 255e9);
	tx.offset = 1500;
	EXPECT_RATE(1 + 1500000 / 255e9, tsc__discipline_kernel_rate(&tx, 0, 100), 1e-12);
	/* adjtime(): 500 us a second while any is left, either way. */
	tx.offset = 0;
	EXPECT_RATE(1.0005, tsc__discipline_kernel_rate(&tx, 3000000, 100), 1e-12);
	EXPECT_RATE(0.9995, tsc__discipline_kernel_rate(&tx, -3000000, 100), 1e-12);
	EXPECT_RATE(1.0005, tsc__discipline_kernel_rate(&tx, 200, 100), 1e-12);
	/* Not told: a PPS discipline's whole-offset steps, a constant no kernel has. */
	tx.status = STA_PPSTIME | STA_PPSSIGNAL;
	EXPECT_EQ(0.0, tsc__discipline_kernel_rate(&tx, 0, 100));
	tx.status = STA_NANO;
	tx.constant = 11;
	EXPECT_EQ(0.0, tsc__discipline_kernel_rate(&tx, 0, 100));
	tx.constant = 2;
	EXPECT_EQ(0.0, tsc__discipline_kernel_rate(&tx, 0, 0));
}

/*
 * A sample of MONOTONIC_RAW sec seconds after the first, RAW having run
 * at ns_per_tick since the last sample (0.4: 2.5 GHz); the rate
 * tsc__discipline_raw_rate() gives, told the interval's rate if asked.
 */
struct raw_sim {
	struct tsc__raw_base b;
	uint64_t t, ns;
};

static double raw_at(struct raw_sim *r, double sec, double ns_per_tick, bool gap,
		     bool tell_interval)
{
	uint64_t ns = 400 + (uint64_t)(sec * 1e9);
	uint64_t t = r->t + (uint64_t)((double)(ns - r->ns) / ns_per_tick);
	double interval = tell_interval ? (double)(ns - r->ns) / (double)(t - r->t) : 0;
	double rate = tsc__discipline_raw_rate(&r->b, t, ns, gap, interval, 1e-6);

	r->t = r->b.last_t = t;
	r->ns = r->b.last_ns = ns;
	return rate;
}

/*
 * MONOTONIC_RAW's rate against the TSC: none before half a second; then
 * over a base that moves on every 32 s, so 32 to 64 s long; where the
 * last interval's rate differs beyond the noise (another clocksource),
 * that one at once, the bases then from the last sample; none again after
 * a gap, or a RAW that went back.
 */
TEST(raw_rate)
{
	struct raw_sim r = { { { 1000, 1000 }, { 400, 400 }, 1000, 400 }, 1000, 400 };
	uint64_t t70, ns70;

	EXPECT_EQ(0.0, raw_at(&r, 0.4, 0.4, false, true));
	EXPECT_RATE(0.4, raw_at(&r, 1, 0.4, false, true), 1e-12);
	EXPECT_RATE(0.4, raw_at(&r, 33, 0.4, false, true), 1e-12);
	EXPECT_EQ(400u, r.b.ns[0]);			/* 33 s: the second base taken */
	EXPECT_EQ(r.ns, r.b.ns[1]);
	EXPECT_RATE(0.4, raw_at(&r, 66, 0.4, false, true), 1e-12);
	EXPECT_EQ(400 + 33000000000u, r.b.ns[0]);	/* 66 s: the older dropped */
	/* Within the noise the long base stands: 0.1 ppm over 4 s. */
	EXPECT_RATE(0.4, raw_at(&r, 70, 0.40000004, false, true), 1e-8);
	EXPECT_EQ(400 + 33000000000u, r.b.ns[0]);
	/* 1% over the next 4 s: that interval's rate, its start the base. */
	t70 = r.t;
	ns70 = r.ns;
	EXPECT_RATE(0.404, raw_at(&r, 74, 0.404, false, true), 1e-9);
	EXPECT_EQ(ns70, r.b.ns[0]);
	EXPECT_EQ(t70, r.b.t[1]);
	EXPECT_RATE(0.404, raw_at(&r, 80, 0.404, false, true), 1e-9);
	/* A gap: nothing until half a second is seen again. */
	EXPECT_EQ(0.0, raw_at(&r, 90, 0.404, true, false));
	EXPECT_EQ(r.ns, r.b.ns[0]);
	EXPECT_RATE(0.404, raw_at(&r, 91, 0.404, false, false), 1e-9);
	/* RAW back: no rate from a base ahead of it, which starts again there. */
	EXPECT_EQ(0.0, tsc__discipline_raw_rate(&r.b, r.t + 2500000000u, r.b.ns[1] - 1, false, 0,
						1e-6));
	EXPECT_EQ(r.t + 2500000000u, r.b.t[0]);
}

static int64_t now(clockid_t id)
{
	return tsc__ns_now(id);
}

FIXTURE(real) {
	int unused;
};

FIXTURE_SETUP(real)
{
}

FIXTURE_TEARDOWN(real)
{
}

/* One clock synced by its caller every period s, in a thread of its own. */
struct real_run {
	struct tsc_sysclock c;
	unsigned int period;
	int64_t worst;		/* ns, from the third sync on */
	int64_t widest;		/* the widest clock_gettime() bracket then, ns */
	int stale;		/* readings past max_delta then: clock_gettime()'s */
	int err;		/* a sync's that failed twice, or 0 */
	char why[256];
};

static void *run_real(void *arg)
{
	struct real_run *r = arg;

	for (int k = 0; k < 5; k++) {
		int64_t a, v, b, e;
		int err;

		bool stale;

		sleep(r->period);
		/* A reading past the bound would be clock_gettime()'s: no test. */
		stale = tsc_ticks_unordered() - r->c.page->cycle_last > r->c.max_delta;
		a = now(CLOCK_MONOTONIC);
		v = (int64_t)tsc_sysclock_monotonic(&r->c);
		b = now(CLOCK_MONOTONIC);
		e = v < a ? a - v : v > b ? v - b : 0;
		/* The first two syncs find the 500 ppm; from the third, the loop. */
		if (k >= 2) {
			r->worst = e > r->worst ? e : r->worst;
			r->widest = b - a > r->widest ? b - a : r->widest;
			r->stale += stale;
		}
		err = tsc_sysclock_sync(&r->c);
		if (err == -EAGAIN) {	/* a sample too wide: once more */
			usleep(1000);
			err = tsc_sysclock_sync(&r->c);
		}
		if (err) {
			r->err = err;
			snprintf(r->why, sizeof(r->why), "%s", tsc_last_error());
			break;
		}
	}
	return NULL;
}

/*
 * Every period at once, each clock in its own thread: 5 syncs of 16 s are
 * the 80 s this takes, past the harness's default 30 s.
 */
TEST_F_TIMEOUT(real, clock_every_1_2_4_8_16_s, 150)
{
	static const unsigned int periods[] = { 1, 2, 4, 8, 16 };
	enum { NP = sizeof(periods) / sizeof(periods[0]) };
	struct tsc_clock clk = { .sz = sizeof(clk) };
	TSC_OPTS(co, .source = TSC_SOURCE_CALIBRATION, .calibrate_max_ms = 50);
	struct real_run runs[NP];
	pthread_t threads[NP];

	ASSERT_EQ(0, tsc_clock_init(&clk, &co)) TH_LOG("%s", tsc_last_error());
	memset(runs, 0, sizeof(runs));
	for (size_t i = 0; i < NP; i++) {
		TSC_SYSCLOCK_OPTS(o, .discipline = TSC_DISCIPLINE_CALLER);
		char dir[64];

		runs[i].c.sz = sizeof(runs[i].c);
		runs[i].period = periods[i];
		/* 500 ppm off: the first sync finds 500 us per second of error. */
		fake_root(_metadata, dir, sizeof(dir), (uint64_t)(clk.freq.hz / 1e3 * (1 + 500e-6)));
		o.sysfs_root = dir;
		ASSERT_EQ(0, tsc_sysclock_init(&runs[i].c, &o)) TH_LOG("%s", tsc_last_error());
		remove_root(dir);
		ASSERT_EQ(TSC_SYSCLOCK_DISCIPLINED, runs[i].c.path) TH_LOG("%s", runs[i].c.why);
	}
	for (size_t i = 0; i < NP; i++)
		ASSERT_EQ(0, pthread_create(&threads[i], NULL, run_real, &runs[i]));
	for (size_t i = 0; i < NP; i++)
		pthread_join(threads[i], NULL);
	for (size_t i = 0; i < NP; i++) {
		EXPECT_EQ(0, runs[i].err) TH_LOG("every %u s: %s", periods[i], runs[i].why);
		TH_LOG("for real, synced every %2u s: worst error before a sync from the third on %lld ns (bound %d), outside a bracket of %lld ns at most",
		       periods[i], (long long)runs[i].worst, REAL_BOUND_NS, (long long)runs[i].widest);
		EXPECT_GE(REAL_BOUND_NS, runs[i].worst);
		EXPECT_EQ(0, runs[i].stale);
		tsc_sysclock_fini(&runs[i].c);
	}
}

TEST_HARNESS_MAIN
