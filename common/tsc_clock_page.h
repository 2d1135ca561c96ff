/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The clock page: the kernel's own mapping from a TSC reading to its
 * clocks, published by the module at every timekeeper update and mapped
 * read-only by userspace (/sys/devices/system/cpu/tsc/clock_page).  One
 * layout for both sides; Documentation/ABI/testing/sysfs-devices-system-cpu-tsc
 * describes it for everyone else.
 *
 * The kernel computes CLOCK_X at TSC reading t (t >= cycle_last) as
 *
 *	sec_X * 10^9 + ((nsec_X + (t - cycle_last) * mult) >> shift)
 *
 * with nsec_X in units of 2^-shift ns.  Splitting mult / 2^shift into whole
 * ns per tick and a 64-bit fraction turns that into one 64x64->128
 * multiplication and a few additions, equal to the kernel's result bit for
 * bit (as long as the kernel's own 64-bit product does not overflow, which
 * its updates at least every few seconds make sure of):
 *
 *	CLOCK_X = hi64(t * mult + frac) + t * mult_ns + off_X	(mod 2^64)
 *
 * where mult_ns = mult >> shift (0 for a TSC of 1 GHz and up), mult the
 * rest of mult scaled to 2^-64 ns, frac the fraction of a ns the clocks
 * share, and off_X the rest.  A reading before cycle_last (a TSC a little
 * behind the one the kernel last read) counts as cycle_last, as the kernel
 * counts it.
 *
 * Updates follow the seqcount protocol: seq is odd while the module
 * writes; a reader reads seq, the fields, seq again, and retries if seq
 * was odd or changed.  seq also stays odd while the page is not to be
 * used at all (flags lack TSC: another clocksource, or the module is
 * gone), so that a reader's fast path tests one bit, and reads flags only
 * when it is set.  Later versions only append: a reader that knows
 * version N reads any page whose version is N or more.
 */
#ifndef TSCFK_CLOCK_PAGE_H
#define TSCFK_CLOCK_PAGE_H

#include <linux/types.h>

/* 2: max_cycles appended. */
#define TSCFK_CLOCK_PAGE_VERSION 2

/* flags */
#define TSCFK_CLOCK_TSC		0x1	/* the clocks read the TSC now */
#define TSCFK_CLOCK_GONE	0x2	/* the module was unloaded */
/* 0xc000: never set by the module; libtsc marks its own pages of this layout with them. */

/* One linear mapping: ns = hi64(t * mult + frac) + t * mult_ns + off. */
struct tscfk_clock_map {
	__u64 mult_ns;
	__u64 mult;
	__u64 frac;
	__u64 off;
};

struct tscfk_clock_page {
	/* First cache line: all a reading of REALTIME/MONOTONIC/BOOTTIME needs. */
	__u16 version;		/* TSCFK_CLOCK_PAGE_VERSION or later */
	__u16 flags;
	__u32 seq;		/* odd while being written or not usable */
	/* Changes on a step of the clocks, a resume, a clocksource change. */
	__u32 generation;
	__u32 mult_ns;		/* of REALTIME, MONOTONIC and BOOTTIME */
	__u64 cycle_last;	/* earlier readings count as this one */
	__u64 mult;		/* theirs too */
	__u64 frac;		/* the fraction of a ns they share */
	__u64 real_off;
	__u64 mono_off;
	__u64 boot_off;

	/* Second line. */
	struct tscfk_clock_map raw;	/* CLOCK_MONOTONIC_RAW */
	__u64 tai_off;			/* CLOCK_TAI, with mult_ns, mult and frac */
	/*
	 * The rate the timekeeper applies to the TSC, NTP's correction
	 * included: cycle_interval TSC ticks last ntp_tick / 2^32 ns.
	 */
	__u64 cycle_interval;
	__u64 ntp_tick;
	/* The kernel's own numbers, for checking: off_X follow from them. */
	__u32 kernel_mult;
	__u32 kernel_shift;

	/* Third line, from version 2. */
	/*
	 * The clocksource's max_cycles, a staleness bound: the page's
	 * arithmetic is exact at any reading, but a timekeeper that keeps
	 * time updates the page long before a reading gets this far past
	 * cycle_last, so a reading beyond it (a vCPU stopped for minutes,
	 * a TSC that jumped) finds a stale page, and is not extrapolated.
	 * (The kernel's own 64-bit product would overflow there; from
	 * 6.12 the kernel computes past it.)
	 */
	__u64 max_cycles;
};

/* The kernel's state at an update, as far as the page depends on it. */
struct tscfk_clock_state {
	__u64 cycle_last;
	__u32 mult, shift;
	__u64 xtime_sec;	/* CLOCK_REALTIME = xtime_sec s + xtime_nsec >> shift ns */
	__u64 xtime_nsec;
	__s64 wall_to_mono_ns;	/* MONOTONIC - REALTIME */
	__s64 mono_to_boot_ns;	/* BOOTTIME - MONOTONIC */
	__s64 tai_offset_s;	/* TAI - REALTIME */
	__u32 raw_mult, raw_shift;
	__u64 raw_cycle_last;
	__u64 raw_sec;
	__u64 raw_nsec;		/* in 2^-shift ns */
	__u64 cycle_interval;
	__u64 ntp_tick;
	__u64 max_cycles;
};

/*
 * Fill everything but version, seq, flags and generation; -1 (and nothing
 * written) for a shift the formula cannot expand (0 or above 32).
 */
int tscfk_clock_page_fill(struct tscfk_clock_page *p,
			  const struct tscfk_clock_state *s);

/* The rate the timekeeper applies to the TSC in millihertz; 0 if unknown. */
__u64 tscfk_clock_rate_millihz(const struct tscfk_clock_page *p);

#ifndef __KERNEL__
/* The reader's arithmetic: userspace's, the module never reads the page. */
static inline __u64 tscfk_clock_ns(const struct tscfk_clock_map *m,
				   __u64 cycle_last, __u64 t)
{
	/* ISO C has no 128-bit integer; GCC and Clang do, on x86-64. */
	__extension__ unsigned __int128 x;

	if (t < cycle_last)
		t = cycle_last;
	x = t;
	x = x * m->mult + m->frac;
	return (__u64)(x >> 64) + t * m->mult_ns + m->off;
}
#endif

#endif /* TSCFK_CLOCK_PAGE_H */
