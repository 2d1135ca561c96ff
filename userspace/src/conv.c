// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Conversion parameters, exact to the last bit.
 *
 * ns per tick is 1e9 * den / num: its integer part goes in ns_int, its
 * fraction, scaled by 2^64 and rounded up, in ns_frac.  For any 64-bit
 * tick count t, t * ns_int + floor(t * ns_frac / 2^64) then lies between
 * the exact t * 1e9 * den / num rounded down and that plus one: rounding
 * the fraction up adds less than t / 2^64 < 1.  Likewise for ns -> ticks.
 */
#include <errno.h>

#include "internal.h"

__extension__ typedef unsigned __int128 u128;

/* a / b as whole part and 64-bit fraction rounded up; b != 0. */
static void split(u128 a, u128 b, uint64_t *whole, uint64_t *frac)
{
	u128 q = a / b, r = a % b;
	u128 f = (r << 64) / b;

	if ((r << 64) % b)
		f++;
	if (f >> 64) {		/* rounded up to a whole one */
		q++;
		f = 0;
	}
	*whole = (uint64_t)q;
	*frac = (uint64_t)f;
}

int tsc_conv_init(struct tsc_conv *c, uint64_t num, uint64_t den)
{
	struct tsc_freq check;
	int err;

	/* split() shifts remainders < b left by 64: b must fit in 64 bits. */
	if (den > UINT64_MAX / 1000000000)
		return tsc__fail(-EINVAL, "denominator %llu too large",
				 (unsigned long long)den);
	err = tsc__freq_set(&check, TSC_SOURCE_NONE, num, den, 0, TSC_REFERENCE_UNSTATED);
	if (err)
		return err;
	split((u128)1000000000 * den, num, &c->ns_int, &c->ns_frac);
	split(num, (u128)1000000000 * den, &c->tk_int, &c->tk_frac);
	return 0;
}
