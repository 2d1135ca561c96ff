// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A clock on the TSC, anchored to CLOCK_MONOTONIC and CLOCK_REALTIME.
 */
#include <errno.h>
#include <stddef.h>
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

/* The clock's ABI (1.0): what tsc_now() reads in the first cache line. */
_Static_assert(offsetof(struct tsc_clock, conv) == 0 &&
	       offsetof(struct tsc_clock, mono_off) == 32 &&
	       offsetof(struct tsc_clock, real_off) == 40 &&
	       offsetof(struct tsc_clock, seq) == 48 &&
	       offsetof(struct tsc_clock, sz) == 64, "struct tsc_clock's 1.0 layout");
_Static_assert(_Alignof(struct tsc_clock) == 64, "struct tsc_clock starts a cache line");
/* The smallest clock a caller may pass: 1.0's, which ends with freq. */
#define CLOCK_SIZE_1_0 (offsetof(struct tsc_clock, freq) + sizeof(struct tsc_freq))

/*
 * Each clock's offset from the TSC's ns count, and its reading at the
 * monotonic anchor's TSC reading.  Unsigned wrap-around keeps these right
 * whatever the magnitudes.
 */
static int anchor_at(struct tsc_clock *clk, clockid_t id, uint64_t *off, uint64_t *base)
{
	uint64_t ticks = 0, ns = 0;	/* set unless it fails */
	int err = anchor(id, &ticks, &ns);

	if (err)
		return err;
	*off = tsc_ticks_to_ns(&clk->conv, ticks) - ns;
	if (base)
		*base = tsc_ticks_to_ns(&clk->conv, clk->base_ticks) - *off;
	return 0;
}

int tsc_clock_init(struct tsc_clock *clk, const struct tsc_opts *opts)
{
	size_t sz = clk->sz;
	uint64_t off;
	int err;

	tsc__clear_error();
	if (sz < CLOCK_SIZE_1_0)
		return tsc__fail(-EINVAL, "clk->sz is %zu, less than libtsc 1.0's %zu: declare the clock with TSC_CLOCK()",
				 sz, CLOCK_SIZE_1_0);
	/* A later header's clock keeps its own fields past ours. */
	memset(clk, 0, sz < sizeof(*clk) ? sz : sizeof(*clk));
	clk->sz = sz;
	err = tsc_freq_get(&clk->freq, opts);
	if (err)
		return err;
	err = tsc_conv_init(&clk->conv, clk->freq.num, clk->freq.den);
	if (err)
		return err;
	err = anchor(CLOCK_MONOTONIC, &clk->base_ticks, &clk->base_mono_ns);
	if (err)
		return err;
	clk->mono_off = tsc_ticks_to_ns(&clk->conv, clk->base_ticks) - clk->base_mono_ns;
	err = anchor_at(clk, CLOCK_REALTIME, &clk->real_off, &clk->base_real_ns);
	if (!err)
		err = anchor_at(clk, CLOCK_MONOTONIC_RAW, &off, &clk->base_raw_ns);
	if (!err)
		err = anchor_at(clk, CLOCK_BOOTTIME, &off, &clk->base_boot_ns);
	return err;
}
