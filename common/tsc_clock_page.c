// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The clock page's arithmetic, shared by the module, which fills the page,
 * and the library's unit tests, which check it against the kernel's own
 * formula (tsc_clock_page.h).
 */
#ifdef __KERNEL__
#include <linux/build_bug.h>
#include <linux/math64.h>
#include <linux/stddef.h>
#else
#include <assert.h>
#include <stddef.h>
#endif

#include "tsc_clock_page.h"

#ifndef __KERNEL__
/* The kernel's helpers of linux/math64.h, for the library's build. */
static __u64 mul_u64_u32_shr(__u64 a, __u32 mul, unsigned int shift)
{
	__extension__ unsigned __int128 x = a;

	return (__u64)(x * mul >> shift);
}

static __u64 mul_u64_u64_shr(__u64 a, __u64 mul, unsigned int shift)
{
	__extension__ unsigned __int128 x = a;

	return (__u64)(x * mul >> shift);
}

static __u64 mul_u64_u64_div_u64(__u64 a, __u64 mul, __u64 div)
{
	__extension__ unsigned __int128 x = a;

	return (__u64)(x * mul / div);
}
#endif

#define TSCFK_NSEC_PER_SEC 1000000000ULL

/* The layout is ABI: it may grow at its end, and nothing may move. */
static_assert(offsetof(struct tscfk_clock_page, seq) == 4, "seq moved");
static_assert(offsetof(struct tscfk_clock_page, boot_off) == 56, "line 1 is full");
static_assert(offsetof(struct tscfk_clock_page, raw) == 64, "raw moved");
static_assert(offsetof(struct tscfk_clock_page, max_cycles) == 128, "max_cycles moved");
static_assert(sizeof(struct tscfk_clock_page) == 136, "the layout changed");

/*
 * The mapping of one clock whose kernel state is sec s + nsec 2^-shift ns
 * at TSC reading cycle_last, advancing mult 2^-shift ns per tick:
 * X(t) = sec * 10^9 + floor((nsec + (t - cycle_last) * mult) / 2^shift).
 * With A = nsec - cycle_last * mult (a 97-bit signed number) split as
 * A = q * 2^shift + r, 0 <= r < 2^shift, and mult = w * 2^shift + m:
 * X(t) = sec * 10^9 + q + t * w + floor((t * m + r) / 2^shift), and
 * scaling the last fraction by 2^(64 - shift) makes it the high half of a
 * 128-bit sum (m and r are below 2^shift, so they fit 64 bits scaled).
 * Only q mod 2^64 is needed: with nsec and P = cycle_last * mult each
 * split the same way, q is their high parts' difference, less a borrow
 * from the low parts', all in unsigned 64-bit arithmetic.
 */
static int expand(struct tscfk_clock_map *m, __u64 cycle_last, __u32 mult,
		  __u32 shift, __u64 sec, __u64 nsec)
{
	__u64 mask, p_lo, p_hi, n_lo;

	if (shift == 0 || shift > 32)
		return -1;
	mask = (1ULL << shift) - 1;
	p_lo = (cycle_last * mult) & mask;	/* exact: shift < 64 */
	p_hi = mul_u64_u32_shr(cycle_last, mult, shift);
	n_lo = nsec & mask;
	m->mult_ns = (__u64)mult >> shift;
	m->mult = ((__u64)mult & mask) << (64 - shift);
	m->frac = ((n_lo - p_lo) & mask) << (64 - shift);
	m->off = sec * TSCFK_NSEC_PER_SEC + (nsec >> shift) - p_hi - (n_lo < p_lo);
	return 0;
}

int tscfk_clock_page_fill(struct tscfk_clock_page *p,
			  const struct tscfk_clock_state *s)
{
	struct tscfk_clock_map real, raw;

	if (expand(&real, s->cycle_last, s->mult, s->shift, s->xtime_sec,
		   s->xtime_nsec) ||
	    expand(&raw, s->raw_cycle_last, s->raw_mult, s->raw_shift, s->raw_sec,
		   s->raw_nsec))
		return -1;
	/*
	 * The other clocks differ from CLOCK_REALTIME by whole ns: only off
	 * changes.  Unsigned wrap-around is the two's complement sum.
	 */
	p->cycle_last = s->cycle_last;
	p->mult_ns = (__u32)real.mult_ns;
	p->mult = real.mult;
	p->frac = real.frac;
	p->real_off = real.off;
	p->mono_off = real.off + (__u64)s->wall_to_mono_ns;
	p->boot_off = p->mono_off + (__u64)s->mono_to_boot_ns;
	p->tai_off = real.off + (__u64)s->tai_offset_s * TSCFK_NSEC_PER_SEC;
	p->raw = raw;
	p->cycle_interval = s->cycle_interval;
	p->ntp_tick = s->ntp_tick;
	p->kernel_mult = s->mult;
	p->kernel_shift = s->shift;
	p->max_cycles = s->max_cycles;
	return 0;
}

/*
 * cycle_interval ticks in ntp_tick / 2^32 ns:
 * mHz = cycle_interval * 10^3 * 10^9 * 2^32 / ntp_tick.
 */
__u64 tscfk_clock_rate_millihz(const struct tscfk_clock_page *p)
{
	const __u64 scale = TSCFK_NSEC_PER_SEC << 32;
	__u64 ticks;

	if (!p->ntp_tick || p->cycle_interval > ~0ULL / 1000)
		return 0;
	ticks = p->cycle_interval * 1000;
	/* The quotient must fit 64 bits (divq faults otherwise). */
	if (mul_u64_u64_shr(ticks, scale, 64) >= p->ntp_tick)
		return 0;
	return mul_u64_u64_div_u64(ticks, scale, p->ntp_tick);
}
