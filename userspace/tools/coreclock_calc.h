/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * What tsc-coreclock concludes from its timings, apart from the timing:
 * the order in which variants are timed, and the arithmetic on the times.
 * A unit test (tests/coreclock_calc_test.c) drives it with synthetic
 * timings, which real silicon cannot give on demand and TCG gives wrong.
 */
#ifndef TSC_CORECLOCK_CALC_H
#define TSC_CORECLOCK_CALC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

/* What a variant's loop body is, and so what its time per op says. */
enum cc_kind {
	CC_CHAIN,	/* one chain of dependent adds: one add per core cycle */
	CC_HALF,	/* the same chain at half the length per iteration */
	CC_CHAINS,	/* independent chains of dependent adds: adds per cycle */
	CC_COMPARES,	/* compares that write no register: no op waits for another */
	CC_IMUL,	/* a chain of imul: three cycles each */
	CC_NOPS,	/* nops: no ALU, only the front end's allocation width */
	CC_COLD,	/* independent chains in a body larger than the L1i */
};

struct cc_variant {
	const char *name;
	enum cc_kind kind;
	unsigned int chains;
	unsigned int ops;	/* ops per loop iteration */
};

/* Variant 0 is the CC_CHAIN the others are compared with. */
struct cc_result {
	double core_hz;		/* 1 / (the chain's median ns per add) */
	double imul_hz;		/* the imul chain's clock at 3 cycles per imul */
	double overhead;	/* change of the chain's time per add at half length */
	double alu_width;	/* the CC_COMPARES variant's ops per cycle, or 0 */
	double width;		/* most adds per cycle of any CC_CHAINS variant */
	unsigned int width_chains; /* the fewest chains that gave it */
	bool plateau;		/* the last two CC_CHAINS (most chains) within 5% */
	double nops_per_cycle;	/* the CC_NOPS variant's ops per cycle, or 0 */
	double cold_width;	/* the CC_COLD variant's adds per cycle, or 0 */
};

static int cc_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n), which it sorts; the upper one of an even n. */
static inline double cc_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cc_cmp);
	return v[n / 2];
}

/*
 * One repetition: the chain, then each other variant followed by the
 * chain again (A v1 A v2 ... A).  time(v) gives ns per op of variant v;
 * t[v * stride] receives it, ratio[v * stride] the variant's ops per
 * cycle: the mean of the chain timings just before and after it (one
 * cycle each) over its own.  (With rows of repetitions, stride is a row's
 * length and t the repetition's column.)  A core clock that drifts during
 * the run (turbo, a busy host: 4% within 60 ms on an AMD EPYC VM) cancels
 * when the drift is linear.
 */
static inline void cc_repetition(size_t nv, double (*time)(size_t v, void *ctx),
				 void *ctx, double *t, double *ratio, size_t stride)
{
	double before = time(0, ctx);

	t[0] = before;
	ratio[0] = 1;
	for (size_t v = 1; v < nv; v++) {
		double after;

		t[v * stride] = time(v, ctx);
		after = time(0, ctx);
		ratio[v * stride] = (before + after) / 2 / t[v * stride];
		before = after;
	}
}

/*
 * From each variant's median ratio (ipc[v]) and the chain's median time
 * per add: the clock, the cross-check, the loop's cost, and the widths.
 */
static inline void cc_conclude(const struct cc_variant *vars, size_t nv,
			       const double *ipc, double chain_ns,
			       struct cc_result *r)
{
	double widest = 0, second = 0;

	*r = (struct cc_result){ .core_hz = 1e9 / chain_ns };
	for (size_t v = 1; v < nv; v++) {
		switch (vars[v].kind) {
		case CC_HALF:
			r->overhead = 1 / ipc[v] - 1;
			break;
		case CC_IMUL:
			/* An imul per 3 cycles: 3 x its rate against the chain's. */
			r->imul_hz = r->core_hz * 3 * ipc[v];
			break;
		case CC_NOPS:
			r->nops_per_cycle = ipc[v];
			break;
		case CC_COLD:
			r->cold_width = ipc[v];
			break;
		case CC_COMPARES:
			r->alu_width = ipc[v];
			break;
		case CC_CHAINS:
			if (ipc[v] > r->width) {
				r->width = ipc[v];
				r->width_chains = vars[v].chains;
			}
			/* The last two in the table: the most chains. */
			second = widest;
			widest = ipc[v];
			break;
		case CC_CHAIN:
			break;
		}
	}
	r->plateau = second > 0 && widest > 0 &&
		     (widest > second ? widest / second : second / widest) <= 1.05;
}

#endif
