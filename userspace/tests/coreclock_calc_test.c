// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc-coreclock's arithmetic on synthetic timings: a model core whose
 * clock, ALU count and front end are known, timed in the tool's order,
 * gives back what it was built with, through a clock that drifts or steps.
 * Real silicon cannot be set to a known width, and under TCG the timings
 * are QEMU's; tsc_coreclock_test.sh checks the real figures where it can.
 */
#include <math.h>

#include "../../testlib/harness.h"
#include "../tools/coreclock_calc.h"

static const struct cc_variant vars[] = {
	{ "1 chain", CC_CHAIN, 1, 1024 },
	{ "1 chain, half length", CC_HALF, 1, 512 },
	{ "2 chains", CC_CHAINS, 2, 1024 },
	{ "4 chains", CC_CHAINS, 4, 1024 },
	{ "8 chains", CC_CHAINS, 8, 1024 },
	{ "10 chains", CC_CHAINS, 10, 1020 },
	{ "12 chains", CC_CHAINS, 12, 1020 },
	{ "imul chain", CC_IMUL, 1, 1024 },
	{ "nops", CC_NOPS, 1, 1024 },
	{ "12 chains, cold", CC_COLD, 12, 16380 },
	{ "compares", CC_COMPARES, 12, 1020 },
};
#define NV (sizeof(vars) / sizeof(vars[0]))
#define REPS 9

/* A core: its ALUs, front end and clock, and how the clock moves. */
struct model {
	double ghz;		/* the clock at the first timing */
	double alus;		/* independent ops per cycle: the ALU count */
	double chained;		/* adds per cycle of chains at most, or 0: alus */
	double nops;		/* nops per cycle */
	double cold;		/* adds per cycle from past the L1i */
	double drift;		/* relative change of the cycle per timing */
	int step_rep;		/* the repetition whose clock is halved, or -1 */
	int rep, calls;		/* where the run is */
};

/* ns per op of variant v, at the model's clock of this moment. */
static double model_time(size_t v, void *ctx)
{
	struct model *m = ctx;
	double cycle = 1 / m->ghz * (1 + m->drift * m->calls++);

	if (m->rep == m->step_rep)
		cycle *= 2;
	switch (vars[v].kind) {
	case CC_CHAIN:
	case CC_HALF:
		return cycle;
	case CC_CHAINS:
		return cycle / fmin(vars[v].chains, m->chained ? m->chained : m->alus);
	case CC_COMPARES:
		return cycle / m->alus;
	case CC_IMUL:
		return 3 * cycle;
	case CC_NOPS:
		return cycle / m->nops;
	case CC_COLD:
		return cycle / m->cold;
	}
	return 0;
}

/* The tool's run: REPS repetitions, the median of each variant's ratios. */
static void run(struct model *m, struct cc_result *r)
{
	double t[NV][REPS], ratio[NV][REPS], ipc[NV], chain_ns;

	for (m->rep = 0; m->rep < REPS; m->rep++)
		cc_repetition(NV, model_time, m, &t[0][m->rep], &ratio[0][m->rep], REPS);
	for (size_t v = 0; v < NV; v++)
		ipc[v] = cc_median(ratio[v], REPS);
	chain_ns = cc_median(t[0], REPS);
	cc_conclude(vars, NV, ipc, chain_ns, r);
}

#define NEAR(a, b, rel) (fabs((a) / (b) - 1) <= (rel))

/* Five ALUs at 3 GHz, as this project's Intel hosts. */
TEST(five_alus_at_3_ghz)
{
	struct model m = { .ghz = 3, .alus = 5, .nops = 6, .cold = 4.2, .step_rep = -1 };
	struct cc_result r;

	run(&m, &r);
	EXPECT_TRUE(NEAR(r.core_hz, 3e9, 1e-12));
	EXPECT_TRUE(NEAR(r.imul_hz, 3e9, 1e-12));
	EXPECT_TRUE(fabs(r.overhead) < 1e-12);
	EXPECT_TRUE(NEAR(r.alu_width, 5, 1e-12));
	EXPECT_TRUE(NEAR(r.width, 5, 1e-12));
	/* 8 chains already give 5: the fewest that do. */
	EXPECT_EQ(8, r.width_chains);
	EXPECT_TRUE(r.plateau);
	EXPECT_TRUE(NEAR(r.nops_per_cycle, 6, 1e-12));
	EXPECT_TRUE(NEAR(r.cold_width, 4.2, 1e-12));
}

/*
 * A clock slowing 1% per timing, 160% over the run: each variant is
 * compared with the chain timed just before and after it, so the widths
 * come out exact.  The clock itself is the chain's median: moved.
 */
TEST(a_linear_drift_cancels)
{
	struct model m = { .ghz = 3.7, .alus = 6, .nops = 8, .cold = 5, .drift = 0.01,
			   .step_rep = -1 };
	struct cc_result r;

	run(&m, &r);
	EXPECT_TRUE(NEAR(r.alu_width, 6, 1e-9));
	EXPECT_TRUE(NEAR(r.width, 6, 1e-9));
	EXPECT_EQ(8, r.width_chains);
	EXPECT_TRUE(r.plateau);
	EXPECT_TRUE(NEAR(r.nops_per_cycle, 8, 1e-9));
	EXPECT_TRUE(NEAR(r.imul_hz / r.core_hz, 1, 1e-9));
	EXPECT_TRUE(fabs(r.overhead) < 1e-9);
	EXPECT_FALSE(NEAR(r.core_hz, 3.7e9, 0.01));
}

/*
 * Six ALUs whose scheduler issues dependent adds at 5.33 per cycle, as
 * this project's AMD EPYC (Zen 5) host: the compares give the ALU count,
 * the chains their own pace, and neither is taken for the other.
 */
TEST(chains_slower_than_the_alus)
{
	struct model m = { .ghz = 4.1, .alus = 6, .chained = 16.0 / 3, .nops = 8, .cold = 3.4,
			   .drift = 0.005, .step_rep = -1 };
	struct cc_result r;

	run(&m, &r);
	EXPECT_TRUE(NEAR(r.alu_width, 6, 1e-9));
	EXPECT_TRUE(NEAR(r.width, 16.0 / 3, 1e-9));
	EXPECT_EQ(8, r.width_chains);
	EXPECT_TRUE(r.plateau);
	EXPECT_TRUE(NEAR(r.nops_per_cycle, 8, 1e-9));
	EXPECT_TRUE(NEAR(r.cold_width, 3.4, 1e-9));
}

/* The clock halved for one repetition: the median of nine outvotes it. */
TEST(a_step_is_outvoted)
{
	struct model m = { .ghz = 3, .alus = 5, .nops = 6, .cold = 4, .step_rep = 4 };
	struct cc_result r;

	run(&m, &r);
	EXPECT_TRUE(NEAR(r.core_hz, 3e9, 1e-12));
	EXPECT_TRUE(NEAR(r.alu_width, 5, 1e-12));
	EXPECT_TRUE(NEAR(r.width, 5, 1e-12));
	EXPECT_TRUE(NEAR(r.imul_hz, 3e9, 1e-12));
}

/* More ALUs than chains: the width still rises at 12, and says so. */
TEST(a_width_still_rising_is_no_plateau)
{
	struct model m = { .ghz = 2, .alus = 16, .nops = 16, .cold = 10, .step_rep = -1 };
	struct cc_result r;

	run(&m, &r);
	EXPECT_TRUE(NEAR(r.width, 12, 1e-12));
	EXPECT_EQ(12, r.width_chains);
	EXPECT_FALSE(r.plateau);
}

/* Within 5% is a plateau (4% here), 6% is not. */
TEST(the_plateau_is_within_5_percent)
{
	double ipc[NV] = { 1, 1, 2, 4, 4.5, 5 / 1.04, 5, 1.0 / 3, 6, 4, 5 };
	struct cc_result r;

	cc_conclude(vars, NV, ipc, 1, &r);
	EXPECT_TRUE(r.plateau);
	EXPECT_EQ(12, r.width_chains);
	ipc[5] = 5 / 1.06;
	cc_conclude(vars, NV, ipc, 1, &r);
	EXPECT_FALSE(r.plateau);
	/* The order of the two does not matter. */
	ipc[5] = 5;
	ipc[6] = 5 / 1.06;
	cc_conclude(vars, NV, ipc, 1, &r);
	EXPECT_FALSE(r.plateau);
	EXPECT_EQ(10, r.width_chains);
}

TEST(median)
{
	double odd[] = { 3, 1, 2 }, even[] = { 4, 1, 3, 2 };

	EXPECT_EQ(2, cc_median(odd, 3));
	EXPECT_EQ(3, cc_median(even, 4));
}

TEST_HARNESS_MAIN
