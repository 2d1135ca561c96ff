// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * struct tsc_freq: building one and comparing two.  Below everything that
 * makes one (sources.c, calibrate.c) and everything that picks one
 * (freq.c), so that the dependencies run one way.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "internal.h"

__extension__ typedef unsigned __int128 u128;

int tsc__freq_set(struct tsc_freq *f, enum tsc_source source, uint64_t num,
		  uint64_t den, double precision_ppm, enum tsc_reference ref)
{
	/* Compare num/den with the limits without dividing: no rounding. */
	if (!den || (u128)num < (u128)TSC_MIN_HZ * den ||
	    (u128)num > (u128)TSC_MAX_HZ * den)
		return tsc__fail(-ERANGE, "%s: %llu/%llu Hz is not within 1 MHz..20 GHz",
				 tsc_source_name(source), (unsigned long long)num,
				 (unsigned long long)den);
	f->source = source;
	f->num = num;
	f->den = den;
	f->hz = (double)num / (double)den;
	f->precision_ppm = precision_ppm;
	f->precision_of = ref;
	f->reserved32 = 0;
	f->bound_ppm = 0;
	memset(f->reserved, 0, sizeof(f->reserved));
	f->detail[0] = '\0';
	return 0;
}

/*
 * The tsc clocksource counts the TSC at mult / 2^shift ns a tick, made once
 * from tsc_khz: clocksource_register_khz(&clocksource_tsc, tsc_khz) calls
 * clocks_calc_mult_shift(&mult, &shift, tsc_khz, NSEC_PER_MSEC, 600 * 1000)
 * (kernel/time/clocksource.c: 600 s, its cap for a 64-bit counter, in
 * units of the kHz), as below.  mult is rounded to the nearest, so it is
 * within half a unit of 10^6 * 2^shift / tsc_khz, and the Hz the two give
 * differ by at most 0.5 / (mult - 0.5) of the kernel's: 1 part in 2^22 or
 * so.  __clocksource_update_freq_scale() then halves a mult that could
 * overflow when NTP adjusts it by 11%.  clock_page_test checks this mult
 * against the kernel's own.
 */
double tsc__kernel_rounding(uint64_t khz)
{
	uint64_t tmp = (600000 * khz) >> 32, mult = 0;
	unsigned int sftacc = 32;
	double err = 0.5;		/* of a unit of mult, at most */

	if (khz < TSC_MIN_HZ / 1000 || khz > TSC_MAX_HZ / 1000)
		return NAN;
	while (tmp) {
		tmp >>= 1;
		sftacc--;
	}
	for (unsigned int sft = 32; sft > 0; sft--) {
		mult = (((uint64_t)1000000 << sft) + khz / 2) / khz;
		if (!(mult >> sftacc))
			break;
	}
	/*
	 * Then halved, truncated, while mult and 11% of it overflow 32 bits
	 * (below 7159 kHz): each halving adds up to half a unit of the new.
	 */
	while (mult + mult * 11 / 100 > UINT32_MAX) {
		mult >>= 1;
		err = err / 2 + 0.5;
	}
	return err / ((double)mult - err);
}

double tsc_freq_diff_ppm(const struct tsc_freq *a, const struct tsc_freq *b)
{
	/* (a - b) / b = (an * bd - bn * ad) / (bn * ad), each exact in 128 bits. */
	u128 x = (u128)a->num * b->den, y = (u128)b->num * a->den;

	if (!a->num || !a->den || !b->num || !b->den)	/* no rate: a zeroed struct, say */
		return NAN;
	if (x >= y)
		return (double)(x - y) / (double)y * 1e6;
	return -(double)(y - x) / (double)y * 1e6;
}
