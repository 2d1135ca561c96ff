// SPDX-License-Identifier: GPL-2.0
/*
 * Load time against the number of online CPUs.  A load measures every CPU
 * once against the reference, one after the other, and creates each CPU's
 * files once: the cost must grow linearly with the CPU count, not faster.
 * Takes the hot-pluggable CPUs offline, then brings them back one at a
 * time, timing seven loads at each count; every CPU it took offline comes
 * back, whatever happens.  Needs root, $TSCFK_KO, and three CPUs for the
 * shape to mean anything.
 *
 * With more vCPUs than the host has CPUs ($TSCFK_OVERCOMMITTED), what is
 * timed is the host's scheduling of the vCPUs, not the module: in an
 * 8-vCPU guest on 2 host CPUs the cost per added CPU ran 3.0 and 4.5 ms
 * in one run and 0.7 and 6.0 ms in the next (a load at 7 CPUs took 71
 * ms, at 8 42 ms: the fastest of seven).  There the figures are logged,
 * not held to the bound (the test says it skipped, and why), as the
 * IRQ-off bound is not.
 */
#include "../testlib/harness.h"
#include "tscfk_test.h"
#include "module_fixture.h"

#define LOADS 7

/*
 * The fastest of LOADS loads, in ns; each load is unloaded again.  The
 * fastest, not the median: in a guest, the host's scheduling only ever
 * adds time, in bursts that a median of a few loads still catches.
 */
static uint64_t fastest_load_ns(struct __test_metadata *_metadata)
{
	uint64_t fastest = UINT64_MAX;

	for (int i = 0; i < LOADS; i++) {
		uint64_t start = now_ns(CLOCK_MONOTONIC), t;

		ASSERT_EQ(0, module_load("")) TH_LOG("load %d", i);
		t = now_ns(CLOCK_MONOTONIC) - start;
		fastest = t < fastest ? t : fastest;
		ASSERT_EQ(0, module_unload());
	}
	return fastest;
}

/*
 * Linear means each added CPU costs the same.  The cost per CPU over the
 * upper half of the counts is held to 2.5x the cost over the lower half,
 * plus 1 ms: a cost quadratic in the CPUs measured gives 3.3x from 1 to 8
 * CPUs and 4x from 1 to 4.  The margin is for guests with more vCPUs than
 * host CPUs, where each vCPU online costs the others host time even idle
 * (measured: 4.6 ms per CPU up to 4 CPUs, 8.1 ms from 4 to 8, on 2 host
 * CPUs).
 */
TEST_F(module, load_time_grows_linearly)
{
	int cpus[MAX_CPUS], n = list_cpus(cpus, MAX_CPUS), online = 0;
	int hot[MAX_CPUS], nhot = 0, first, mid;
	uint64_t t[MAX_CPUS + 1] = { 0 };
	double lo, hi;

	for (int i = 0; i < n; i++) {
		if (!cpu_is_online(cpus[i]))
			continue;
		if (cpu_can_go_offline(cpus[i]) && online > 0)
			hot[nhot++] = cpus[i];
		online++;
	}
	if (nhot == 0)
		SKIP(return, "%d CPU(s) online, none of them can go offline", online);
	for (int i = nhot - 1; i >= 0; i--) {
		ASSERT_EQ(0, take_offline(hot[i])) TH_LOG("cpu%d", hot[i]);
	}

	/* The CPUs that stayed online, then one more at a time. */
	first = online - nhot;
	for (int k = first; k <= online; k++) {
		if (k > first)
			ASSERT_EQ(0, set_online(hot[k - first - 1], true));
		ASSERT_EQ(k, sysconf(_SC_NPROCESSORS_ONLN));
		t[k] = fastest_load_ns(_metadata);
		TH_LOG("%3d CPUs online: load %6.1f ms (fastest of %d)", k,
		       t[k] / 1e6, LOADS);
	}
	/* Every CPU is back online: nothing is left for the teardown. */
	noffline = 0;

	if (online - first < 2)
		SKIP(return, "one step only, no shape to judge: %.1f ms for the extra CPU",
		     ((double)t[online] - (double)t[first]) / 1e6);
	mid = (first + online) / 2;
	lo = ((double)t[mid] - (double)t[first]) / (mid - first);
	hi = ((double)t[online] - (double)t[mid]) / (online - mid);
	TH_LOG("cost per extra CPU: %.1f ms from %d to %d CPUs, %.1f ms from %d to %d",
	       lo / 1e6, first, mid, hi / 1e6, mid, online);
	if (getenv("TSCFK_OVERCOMMITTED"))
		SKIP(return, "bound not asserted: %s", getenv("TSCFK_OVERCOMMITTED"));
	EXPECT_GE(2.5 * lo + 1e6, hi);
}

TEST_HARNESS_MAIN
