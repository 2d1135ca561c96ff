// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A clock on the TSC, anchored to CLOCK_MONOTONIC and CLOCK_REALTIME.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/*
 * The TSC at the moment 'id' read *ns: the middle of the tightest of
 * several brackets of ordered TSC reads around clock_gettime().
 */
static int anchor(clockid_t id, uint64_t *ticks, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 32; i++) {
		struct timespec ts;
		uint64_t a = tsc_rdtsc_ordered(), b;

		if (clock_gettime(id, &ts))
			return tsc__fail(-errno, "clock_gettime(%d): %s", (int)id,
					 strerror(errno));
		b = tsc_rdtsc_ordered();
		if (b >= a && b - a < best) {
			best = b - a;
			*ticks = a + (b - a) / 2;
			*ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		}
	}
	if (best == UINT64_MAX)
		return tsc__fail(-EAGAIN, "clock %d: the TSC went backwards around each of 32 reads",
				 (int)id);
	return 0;
}

int tsc_clock_init(struct tsc_clock *clk, const struct tsc_opts *opts)
{
	uint64_t real_ticks, real_ns;
	int err;

	memset(clk, 0, sizeof(*clk));
	err = tsc_freq_get(&clk->freq, opts);
	if (err)
		return err;
	err = tsc_conv_init(&clk->conv, clk->freq.num, clk->freq.den);
	if (err)
		return err;
	err = anchor(CLOCK_MONOTONIC, &clk->base_ticks, &clk->base_mono_ns);
	if (!err)
		err = anchor(CLOCK_REALTIME, &real_ticks, &real_ns);
	if (err)
		return err;
	/* Unsigned wrap-around keeps these right whatever the magnitudes. */
	clk->mono_off = tsc_ticks_to_ns(&clk->conv, clk->base_ticks) - clk->base_mono_ns;
	/*
	 * anchor() set both or failed; the analyzer, not seeing into
	 * error.c, does not know that tsc__fail() never returns 0.
	 */
	/* NOLINTNEXTLINE(clang-analyzer-core.CallAndMessage) */
	clk->real_off = tsc_ticks_to_ns(&clk->conv, real_ticks) - real_ns;
	/* Realtime as it was at the monotonic anchor's TSC reading. */
	clk->base_real_ns = tsc_ticks_to_ns(&clk->conv, clk->base_ticks) - clk->real_off;
	return 0;
}
