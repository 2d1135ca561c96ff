// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Calibrate the TSC against CLOCK_MONOTONIC_RAW.
 *
 * Each sample is a clock read bracketed by two ordered TSC reads; the best
 * of a few tries is kept, and a sample whose bracket is much wider than the
 * narrowest seen (an interrupt, a preemption) is thrown away.  The clock's
 * time is fitted against the brackets' middles by least squares, updated
 * sample by sample (Welford, in long double: the residuals are 1e-15 of the
 * spread), so the fit uses every good sample and memory stays constant.
 * The error estimate decides when to stop: at the precision asked for, or
 * at the time limit, whichever comes first.  It is twice the slope's
 * standard error plus twice the clock's resolution over the time spanned:
 * the reference clock is quantised, and on a TSC clocksource computed from
 * the TSC itself, so its errors are not independent over short spans and
 * the standard error alone promises too much (0.09 ppm claimed, 0.4 ppm
 * seen between two 0.6 ms runs).  At 1 ns resolution, 0.1 ppm takes 20 ms.
 *
 * CLOCK_MONOTONIC_RAW, not CLOCK_MONOTONIC: the latter is slewed by NTP (up
 * to 500 ppm), the former is the hardware rate, as is the kernel's tsc_khz.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "internal.h"

#define TRIES		4	/* per sample: keep the tightest bracket */
#define MIN_SAMPLES	64
#define CHECK_EVERY	256	/* samples between two looks at the error */
#define MAX_SAMPLES	(1u << 26)	/* a last resort: a TSC that stands still */

struct fit {
	long double n, mx, my, cxx, cxy, cyy;
};

static void fit_add(struct fit *s, long double x, long double y)
{
	long double dx = x - s->mx, dy;

	s->n += 1;
	s->mx += dx / s->n;
	dy = y - s->my;
	s->my += dy / s->n;
	s->cxx += dx * (x - s->mx);
	s->cxy += dx * (y - s->my);
	s->cyy += dy * (y - s->my);
}

/*
 * ns per tick, and its estimated relative error: two standard errors, plus
 * the reference clock's resolution at both ends of the span.
 */
static long double fit_slope(const struct fit *s, uint64_t res_ns,
			     uint64_t span_ns, long double *rel_err)
{
	long double b = s->cxy / s->cxx;
	long double res = s->cyy - b * s->cxy;

	if (res < 0)
		res = 0;
	*rel_err = 2 * sqrtl(res / (s->n - 2) / s->cxx) / b +
		   2.0L * (long double)res_ns / (long double)span_ns;
	return b;
}

struct sample {
	uint64_t mid, ns, width;
};

static struct sample take_sample(const struct tsc__calib_clock *c)
{
	struct sample best = { .width = UINT64_MAX };

	for (int i = 0; i < TRIES; i++) {
		uint64_t a = c->ticks(c->ctx);
		uint64_t ns = c->ns(c->ctx);
		uint64_t b = c->ticks(c->ctx);

		if (b >= a && b - a < best.width)
			best = (struct sample){ a + (b - a) / 2, ns, b - a };
	}
	return best;
}

int tsc__calibrate(struct tsc_freq *f, const struct tsc__calib_clock *c,
		   double target_ppm, uint64_t max_ns)
{
	struct sample first = take_sample(c), s = first;
	uint64_t min_width = first.width, rejected = 0;
	uint64_t res = c->res_ns ? c->res_ns : 1;
	long double slope, rel_err = INFINITY;
	struct fit fit = { 0 };
	uint32_t i;
	int err;

	/*
	 * Until the reference clock says max_ns passed, or the TSC says more
	 * than that passed even at 20 GHz: then the reference is stuck.
	 */
	for (i = 0; i < MAX_SAMPLES && s.ns - first.ns < max_ns &&
	     s.mid - first.mid <= max_ns / 1000000000 * TSC_MAX_HZ +
				  max_ns % 1000000000 * (TSC_MAX_HZ / 1000000000); i++) {
		s = take_sample(c);
		if (s.width == UINT64_MAX)
			continue;
		if (s.width < min_width)
			min_width = s.width;
		/* Twice the narrowest, and some slack for a coarse TSC. */
		if (s.width > 2 * min_width + 16) {
			rejected++;
			continue;
		}
		fit_add(&fit, (long double)(s.mid - first.mid),
			(long double)(s.ns - first.ns));
		if (fit.n >= MIN_SAMPLES && (uint64_t)fit.n % CHECK_EVERY == 0) {
			/* Only the error, to decide whether to stop. */
			fit_slope(&fit, res, s.ns - first.ns, &rel_err);
			if (1e6 * rel_err <= target_ppm)
				break;
		}
	}
	if (fit.n < MIN_SAMPLES || fit.cxx <= 0)
		return tsc__fail(-EAGAIN, "calibration: only %.0Lf good samples of %u in %.1f ms",
				 fit.n, i, (double)(s.ns - first.ns) / 1e6);
	slope = fit_slope(&fit, res, s.ns - first.ns, &rel_err);
	if (!(slope > 0))
		return tsc__fail(-EAGAIN, "calibration: the clocks do not advance together");

	/* Hz = 1e9 / (ns per tick), kept to the mHz. */
	err = tsc__freq_set(f, TSC_SOURCE_CALIBRATION,
			    (uint64_t)llroundl(1e12L / slope), 1000, (double)(1e6 * rel_err));
	if (err)
		return err;
	snprintf(f->detail, sizeof(f->detail),
		 "calibration against CLOCK_MONOTONIC_RAW: %.1f ms, %.0Lf samples (%llu rejected), brackets >= %llu ticks",
		 (double)(s.ns - first.ns) / 1e6, fit.n,
		 (unsigned long long)rejected, (unsigned long long)min_width);
	return 0;
}

static uint64_t ordered_ticks(void *ctx)
{
	(void)ctx;
	return tsc_rdtsc_ordered();
}

static uint64_t raw_ns(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int tsc_freq_calibrate(struct tsc_freq *f, double target_ppm,
		       unsigned int max_ms)
{
	struct tsc__calib_clock real = { .ticks = ordered_ticks, .ns = raw_ns };
	struct timespec res;

	tsc__clear_error();
	if (!clock_getres(CLOCK_MONOTONIC_RAW, &res))
		real.res_ns = (uint64_t)res.tv_sec * 1000000000u + (uint64_t)res.tv_nsec;
	if (!(target_ppm >= 0) || max_ms > 60000)
		return tsc__fail(-EINVAL, "calibration: target %g ppm or %u ms out of range",
				 target_ppm, max_ms);
	return tsc__calibrate(f, &real, target_ppm ? target_ppm : 0.1,
			      (uint64_t)(max_ms ? max_ms : 1000) * 1000000);
}
