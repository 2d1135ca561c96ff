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
 * standard error (the larger of the samples' and of their sixteenths'
 * means', which shows a wander over milliseconds that single samples
 * hide) plus twice the clock's resolution over the time spanned:
 * the reference clock is quantised, and on a TSC clocksource computed from
 * the TSC itself, so its errors are not independent over short spans and
 * the standard error alone promises too much (0.09 ppm claimed, 0.4 ppm
 * seen between two 0.6 ms runs).  At 1 ns resolution, 0.1 ppm takes 20 ms.
 *
 * CLOCK_MONOTONIC_RAW, not CLOCK_MONOTONIC: the latter is slewed by NTP (up
 * to 500 ppm), the former is the hardware rate, as is the kernel's tsc_khz.
 *
 * All the TSC readings must come from one CPU: two CPUs' TSCs may differ
 * by hundreds of ns, which a migration would put into the slope (400 ns in
 * 20 ms is 20 ppm).  The thread is pinned for the run where it may be, and
 * a sample taken on another CPU than the first is dropped all the same.
 */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define TRIES		4	/* per sample: keep the tightest bracket */
#define MIN_SAMPLES	64
#define CHECK_EVERY	256	/* samples between two looks at the error */
#define MAX_SAMPLES	(1u << 26)	/* a last resort: a TSC that stands still */
#define QUANTUM_READS	1000

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

/* The slope's standard error, relative, from the fit's residuals. */
static long double fit_rel_se(const struct fit *s)
{
	long double b = s->cxy / s->cxx;
	long double res = s->cyy - b * s->cxy;

	if (res < 0)
		res = 0;
	return sqrtl(res / (s->n - 2) / s->cxx) / b;
}

/*
 * The samples again, as the means of consecutive runs of them: SLOTS slots
 * of 'per' samples each, merged in pairs (and 'per' doubled) when full,
 * so that memory stays constant and the slots stay equal.
 */
#define SLOTS		64
#define GROUPS		16
struct blocks {
	long double sx[SLOTS], sy[SLOTS];
	uint32_t n[SLOTS], per, used;
};

static void blocks_add(struct blocks *b, long double x, long double y)
{
	if (!b->used || b->n[b->used - 1] == b->per) {
		if (b->used == SLOTS) {
			for (size_t i = 0, j = 0; i < SLOTS / 2; i++, j += 2) {
				b->sx[i] = b->sx[j] + b->sx[j + 1];
				b->sy[i] = b->sy[j] + b->sy[j + 1];
				b->n[i] = b->n[j] + b->n[j + 1];
			}
			b->used = SLOTS / 2;
			b->per *= 2;
		}
		b->used++;
		b->sx[b->used - 1] = b->sy[b->used - 1] = 0;
		b->n[b->used - 1] = 0;
	}
	b->sx[b->used - 1] += x;
	b->sy[b->used - 1] += y;
	b->n[b->used - 1]++;
}

/*
 * The slope's relative standard error from GROUPS means of a sixteenth of
 * the run each, 0 while there are too few full slots.  The residuals of
 * single samples are not independent: under emulation the clock's read
 * wanders within its bracket over milliseconds, and the samples' standard
 * error then claimed 0.11 ppm for calibrations spread by 0.2 (a 6.12
 * guest under TCG).  Means of sixteenths carry that wander into their own
 * scatter, which the error then shows.
 */
static long double blocks_rel_se(const struct blocks *b)
{
	uint32_t full, k;
	struct fit g = { 0 };

	if (!b->used)
		return 0;
	full = b->used - (b->n[b->used - 1] < b->per);
	k = full / GROUPS;
	if (k == 0)
		return 0;
	for (uint32_t i = 0; i < GROUPS; i++) {
		long double sx = 0, sy = 0, n = 0;

		for (size_t j = (size_t)i * k; j < (size_t)(i + 1) * k; j++) {
			sx += b->sx[j];
			sy += b->sy[j];
			n += b->n[j];
		}
		fit_add(&g, sx / n, sy / n);
	}
	return fit_rel_se(&g);
}

/*
 * ns per tick, and its estimated relative error: two standard errors (the
 * larger of the samples' and their sixteenths'), plus the reference
 * clock's resolution at both ends of the span.
 */
static long double fit_slope(const struct fit *s, const struct blocks *b, uint64_t res_ns,
			     uint64_t span_ns, long double *rel_err)
{
	long double se = fit_rel_se(s), se_groups = blocks_rel_se(b);

	*rel_err = 2 * (se_groups > se ? se_groups : se) +
		   2.0L * (long double)res_ns / (long double)span_ns;
	return s->cxy / s->cxx;
}

struct sample {
	uint64_t mid, ns, width;
};

/*
 * The reference clock's real quantum, which clock_getres() need not say:
 * it says 1 ns for an HPET that ticks in 70, an ACPI PM timer in 279.  The
 * smallest step between back-to-back reads is never below it, and where a
 * read costs more than a tick, it is the read's cost: an error bar too
 * wide, never too narrow.
 */
static uint64_t measure_quantum(const struct tsc__calib_clock *c)
{
	uint64_t prev = c->ns(c->ctx), q = 0;

	for (int i = 0; i < QUANTUM_READS; i++) {
		uint64_t now = c->ns(c->ctx);

		if (now > prev && (!q || now - prev < q))
			q = now - prev;
		prev = now;
	}
	return q;
}

/* With cpu >= 0: is the thread on another CPU than 'cpu'? */
static bool elsewhere(const struct tsc__calib_clock *c, int cpu)
{
	return cpu >= 0 && c->cpu && c->cpu(c->ctx) != cpu;
}

/*
 * The tightest of a few brackets; false if none was valid (the TSC did
 * not advance across the clock read) or, with cpu >= 0, if the thread was
 * elsewhere before or after them: a move there and back within a sample
 * would take two migrations in a microsecond.  *last_ns: the reference's
 * last reading, valid or not.
 */
static bool take_sample(const struct tsc__calib_clock *c, int cpu,
			struct sample *out, uint64_t *last_ns)
{
	struct sample best = { .width = UINT64_MAX };
	bool moved = elsewhere(c, cpu);

	for (int i = 0; i < TRIES; i++) {
		uint64_t a = c->ticks(c->ctx);
		uint64_t ns = c->ns(c->ctx);
		uint64_t b = c->ticks(c->ctx);

		*last_ns = ns;
		if (b >= a && b - a < best.width)
			best = (struct sample){ a + (b - a) / 2, ns, b - a };
	}
	if (best.width == UINT64_MAX || moved || elsewhere(c, cpu))
		return false;
	*out = best;
	return true;
}

int tsc__calibrate(struct tsc_freq *f, const struct tsc__calib_clock *c,
		   double target_ppm, uint64_t max_ns)
{
	struct sample first, s, t;
	uint64_t min_width, rejected = 0, invalid = 0, now_ns;
	uint64_t res = c->res_ns ? c->res_ns : 1;
	long double slope, rel_err = INFINITY;
	struct fit fit = { 0 };
	struct blocks blocks = { .per = 16 };
	int cpu = c->cpu ? c->cpu(c->ctx) : -1;
	uint32_t i;
	int err;

	if (!c->res_exact) {
		uint64_t quantum = measure_quantum(c);

		if (quantum > res)
			res = quantum;
	}
	for (i = 0; !take_sample(c, cpu, &first, &now_ns); i++)
		if (i == MIN_SAMPLES)
			return tsc__fail(-EAGAIN, "calibration: the TSC does not advance across a clock read");
	s = first;
	min_width = first.width;

	/*
	 * Until the reference clock says max_ns passed, or the TSC says more
	 * than that passed even at 20 GHz: then the reference is stuck.  s is
	 * the last sample taken into the fit: the span ends there.
	 */
	for (i = 0; i < MAX_SAMPLES && now_ns - first.ns < max_ns &&
	     s.mid - first.mid <= max_ns / 1000000000 * TSC_MAX_HZ +
				  max_ns % 1000000000 * (TSC_MAX_HZ / 1000000000); i++) {
		if (!take_sample(c, cpu, &t, &now_ns)) {
			invalid++;
			continue;
		}
		if (t.width < min_width)
			min_width = t.width;
		/* Twice the narrowest, and some slack for a coarse TSC. */
		if (t.width > 2 * min_width + 16) {
			rejected++;
			continue;
		}
		s = t;
		fit_add(&fit, (long double)(s.mid - first.mid),
			(long double)(s.ns - first.ns));
		blocks_add(&blocks, (long double)(s.mid - first.mid),
			   (long double)(s.ns - first.ns));
		if (fit.n >= MIN_SAMPLES && (uint64_t)fit.n % CHECK_EVERY == 0) {
			/* Only the error, to decide whether to stop. */
			fit_slope(&fit, &blocks, res, s.ns - first.ns, &rel_err);
			if (1e6 * rel_err <= target_ppm)
				break;
		}
	}
	if (fit.n < MIN_SAMPLES || fit.cxx <= 0)
		return tsc__fail(-EAGAIN, "calibration: only %.0Lf good samples of %u in %.1f ms",
				 fit.n, i, (double)(s.ns - first.ns) / 1e6);
	slope = fit_slope(&fit, &blocks, res, s.ns - first.ns, &rel_err);
	if (!(slope > 0))
		return tsc__fail(-EAGAIN, "calibration: the clocks do not advance together");

	/* Hz = 1e9 / (ns per tick), kept to the mHz. */
	err = tsc__freq_set(f, TSC_SOURCE_CALIBRATION,
			    (uint64_t)llroundl(1e12L / slope), 1000, (double)(1e6 * rel_err),
			    c->ref);
	if (err)
		return err;
	/* One account: detail has room for the skipped sources' too. */
	snprintf(f->detail, TSC__REASON_SIZE,
		 "CLOCK_MONOTONIC_RAW (clocksource %.32s%s) over %.1f ms, %.0Lf samples (%llu wide, %llu invalid), brackets >= %llu ticks, steps <= %llu ns",
		 c->name && c->name[0] ? c->name : "unknown",
		 c->ref == TSC_REFERENCE_KERNEL ? ": the TSC at its own rate, from tsc_khz" :
		 c->ref == TSC_REFERENCE_HYPERVISOR ? ": the TSC at the hypervisor's rate" : "",
		 (double)(s.ns - first.ns) / 1e6, fit.n,
		 (unsigned long long)rejected, (unsigned long long)invalid,
		 (unsigned long long)min_width, (unsigned long long)res);
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

static int this_cpu(void *ctx)
{
	(void)ctx;
	return sched_getcpu();
}

/*
 * What a calibration against CLOCK_MONOTONIC_RAW measures, by the kernel's
 * clocksource.  On tsc, the TSC at the kernel's own tsc_khz; on the
 * paravirtual clocks, the TSC at the rate the hypervisor states for it;
 * only on a clock of its own (hpet, acpi_pm) is it another oscillator.
 * Unknown, it may be the TSC: never claimed independent.
 */
static enum tsc_reference clocksource_reference(const char *cs)
{
	static const char *const hypervisor[] = {
		"kvm-clock", "xen", "hyperv_clocksource_tsc_page",
	};

	if (!cs[0] || !strcmp(cs, "tsc") || !strcmp(cs, "tsc-early"))
		return TSC_REFERENCE_KERNEL;
	for (size_t i = 0; i < sizeof(hypervisor) / sizeof(hypervisor[0]); i++)
		if (!strcmp(cs, hypervisor[i]))
			return TSC_REFERENCE_HYPERVISOR;
	return TSC_REFERENCE_CLOCKSOURCE;
}

int tsc_freq_calibrate(struct tsc_freq *f, double target_ppm,
		       unsigned int max_ms)
{
	struct tsc__calib_clock real = { .ticks = ordered_ticks, .ns = raw_ns,
					 .cpu = this_cpu };
	char cs[32];
	cpu_set_t old, one;
	struct timespec res;
	bool pinned = false;
	int cpu, err;

	tsc__clear_error();
	if (!clock_getres(CLOCK_MONOTONIC_RAW, &res))
		real.res_ns = (uint64_t)res.tv_sec * 1000000000u + (uint64_t)res.tv_nsec;
	/* On the TSC, the clock is the TSC scaled: it ticks in clock_getres(). */
	tsc__clocksource(NULL, cs, sizeof(cs));
	real.res_exact = !strcmp(cs, "tsc");
	real.ref = clocksource_reference(cs);
	real.name = cs;
	tsc__clear_error();
	if (!(target_ppm >= 0) || max_ms > 60000)
		return tsc__fail(-EINVAL, "calibration: target %g ppm or %u ms out of range",
				 target_ppm, max_ms);
	/* Best effort: where it fails, the samples from elsewhere are dropped. */
	cpu = sched_getcpu();
	if (cpu >= 0 && cpu < CPU_SETSIZE && !sched_getaffinity(0, sizeof(old), &old)) {
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		pinned = !sched_setaffinity(0, sizeof(one), &one);
	}
	err = tsc__calibrate(f, &real, target_ppm ? target_ppm : 0.1,
			     (uint64_t)(max_ms ? max_ms : 1000) * 1000000);
	if (pinned && sched_setaffinity(0, sizeof(old), &old) && !err)
		err = tsc__fail(-errno, "calibration: the thread stays pinned to cpu%d: %s",
				cpu, strerror(errno));
	return err;
}
