// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A clock on the TSC, anchored to CLOCK_MONOTONIC and CLOCK_REALTIME.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#ifdef TSC__TEST_HOOKS
int tsc__test_anchor_fails = -1;
#endif

/*
 * The TSC at the moment 'id' read *ns: the middle of the tightest of
 * several brackets of ordered TSC reads around clock_gettime().
 */
static int anchor(clockid_t id, uint64_t *ticks, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

#ifdef TSC__TEST_HOOKS
	if ((int)id == __atomic_load_n(&tsc__test_anchor_fails, __ATOMIC_RELAXED))
		return tsc__fail(-EAGAIN, "clock %d: the TSC went backwards around each of 32 reads (a test's)",
				 (int)id);
#endif
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

/* The clock's ABI (1.0): what its readers read in the first cache line. */
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
	if (!err) {
		clk->mono_off = tsc_ticks_to_ns(&clk->conv, clk->base_ticks) - clk->base_mono_ns;
		err = anchor_at(clk, CLOCK_REALTIME, &clk->real_off, &clk->base_real_ns);
	}
	if (!err)
		err = anchor_at(clk, CLOCK_MONOTONIC_RAW, &off, &clk->base_raw_ns);
	if (!err)
		err = anchor_at(clk, CLOCK_BOOTTIME, &off, &clk->base_boot_ns);
	/*
	 * A clock without every anchor has no conversion either: its readers
	 * then read clock_gettime() (tsc__clock_read_slow()), not the TSC's
	 * count since its reset, offset by anchors it never took.
	 */
	if (err) {
		memset(&clk->conv, 0, sizeof(clk->conv));
		return err;	/* tsc_last_error() says why: not overwritten */
	}
	tsc__clocksource(NULL, clk->clocksource, sizeof(clk->clocksource));
	return 0;
}

/*
 * A clock with a whole ns or more per tick, read as the fast path would
 * (tsc_clock_at()); or one with no conversion at all, whose init failed
 * or never ran: clock_gettime(), rather than the 0 its arithmetic gives.
 */
uint64_t tsc__clock_read_slow(const struct tsc_clock *clk, int realtime, int how)
{
	uint64_t t;

	if (!clk->conv.ns_int && !clk->conv.ns_frac)
		return (uint64_t)tsc__ns_now(realtime ? CLOCK_REALTIME : CLOCK_MONOTONIC);
	t = how == TSC__READ_UNORDERED ? tsc__rdtsc() :
	    how == TSC__READ_ORDERED ? tsc_rdtsc_ordered() : tsc_rdtsc_start();
	return tsc_ticks_to_ns(&clk->conv, t) - (realtime ? clk->real_off : clk->mono_off);
}

int64_t tsc__ns_now(clockid_t id)
{
	struct timespec ts;

	/* These clocks cannot fail on Linux; -1 shows if one ever did. */
	if (clock_gettime(id, &ts))
		return -1;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Slack for what two reads a few instructions apart can disagree by once
 * the thread is preempted between them, beyond what their bracket shows:
 * a suspend shorter than this, or a rate error smaller than it over the
 * clock's life, goes unseen.
 */
#define CHECK_SLACK_NS	100000

/*
 * CLOCK_MONOTONIC_RAW runs at the clocksource's mult, the kernel's own
 * figure rounded to 1 part in 2^22 or so (its shift is chosen for 600 s
 * without overflow): a clock at the kernel's exact rate, as from the perf
 * page, drifts from it by up to 0.24 ppm.  Allow twice that at least.
 */
#define CHECK_RAW_PPM	0.5

/* A suspend stops CLOCK_MONOTONIC and not CLOCK_BOOTTIME (nor the TSC). */
static int check_suspend(const struct tsc_clock *clk)
{
	int64_t mono = tsc__ns_now(CLOCK_MONOTONIC), boot = tsc__ns_now(CLOCK_BOOTTIME);
	int64_t width = tsc__ns_now(CLOCK_MONOTONIC) - mono;
	int64_t slept = (boot - mono) - (int64_t)(clk->base_boot_ns - clk->base_mono_ns);

	if (slept > width + CHECK_SLACK_NS)
		return tsc__fail(-ESTALE, "the system was suspended for %.3f s since the clock's anchor (CLOCK_BOOTTIME gained that on CLOCK_MONOTONIC)",
				 (double)slept / 1e9);
	return 0;
}

/* The clock's rate against the kernel's: within the frequency's precision. */
static int check_rate(const struct tsc_clock *clk)
{
	uint64_t t0 = tsc_rdtsc_ordered();
	int64_t raw = tsc__ns_now(CLOCK_MONOTONIC_RAW) - (int64_t)clk->base_raw_ns;
	uint64_t t1 = tsc_rdtsc_ordered();
	int64_t ours = (int64_t)(tsc_ticks_to_ns(&clk->conv, t0 + (t1 - t0) / 2) -
				 tsc_ticks_to_ns(&clk->conv, clk->base_ticks));
	double ppm = clk->freq.precision_ppm > CHECK_RAW_PPM ?
		     clk->freq.precision_ppm : CHECK_RAW_PPM;
	double allowed = ppm * 1e-6 * (double)raw +
			 (double)tsc_ticks_to_ns(&clk->conv, t1 - t0) + CHECK_SLACK_NS;

	if ((double)llabs(ours - raw) > allowed)
		return tsc__fail(-ERANGE, "over %.3f s since the anchor the clock moved %+.1f us from CLOCK_MONOTONIC_RAW (%+.1f ppm), more than its frequency's +-%.3g ppm allow",
				 (double)raw / 1e9, (double)(ours - raw) / 1e3,
				 raw > 0 ? (double)(ours - raw) / (double)raw * 1e6 : 0.0,
				 ppm);
	return 0;
}

/*
 * The kernel drops tsc from its clocksources when it finds the TSC
 * unreliable; and once it no longer keeps time with the TSC it was
 * keeping time with at the anchor, its clocks and this one part.  A
 * kvm-clock chosen over a TSC the kernel still offers is no sign of
 * trouble.  Unreadable files (no sysfs) say nothing either way.
 */
static int check_kernel(const struct tsc_clock *clk)
{
	char now[sizeof(clk->clocksource)];

	if (tsc__tsc_available(NULL) == 0)
		return tsc__fail(-ENODEV, "the kernel no longer offers tsc as a clocksource: it marked the TSC unstable");
	if (strcmp(clk->clocksource, "tsc") != 0)
		return 0;
	tsc__clocksource(NULL, now, sizeof(now));
	if (now[0] && strcmp(now, "tsc") != 0)
		return tsc__fail(-ENODEV, "the kernel's clocksource was tsc at the clock's anchor and is %s now",
				 now);
	return 0;
}

int tsc_clock_check(const struct tsc_clock *clk)
{
	uint64_t t = tsc_rdtsc_ordered();
	int err;

	tsc__clear_error();
	/*
	 * A suspend first: on bare metal it also resets the TSC, and the
	 * caller should hear the cause, not the symptom.
	 */
	err = check_suspend(clk);
	if (!err && t < clk->base_ticks)
		err = tsc__fail(-ERANGE, "the TSC reads %llu, before the clock's anchor at %llu: this CPU's TSC is behind, or was reset",
				(unsigned long long)t, (unsigned long long)clk->base_ticks);
	if (!err)
		err = check_kernel(clk);
	if (!err)
		err = check_rate(clk);
	return err;
}
