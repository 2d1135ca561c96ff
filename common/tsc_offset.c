// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * TSC offset estimation from ping-pong probes: see tsc_offset.h.
 */
#include "tsc_offset.h"

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* Midpoint of [lo, hi] without overflowing, whatever the two values. */
static int64_t mid64(int64_t lo, int64_t hi)
{
	return lo + (int64_t)(((uint64_t)hi - (uint64_t)lo) / 2);
}

void tscfk_offset_init(struct tscfk_offset_est *e)
{
	*e = (struct tscfk_offset_est){ 0 };
}

/*
 * Add one probe.  The subtractions are done on unsigned values and then
 * read as signed, so counters near the 64-bit wrap still give the right
 * small differences.
 */
void tscfk_offset_add(struct tscfk_offset_est *e, uint64_t t1, uint64_t t,
		      uint64_t t2)
{
	int64_t lo = (int64_t)(t - t2);
	int64_t hi = (int64_t)(t - t1);

	/*
	 * t2 before t1 means the reference's own TSC went backwards: there
	 * is no bracket to take, and nothing about this pair can be trusted.
	 * lo > hi otherwise means an offset near +-2^63, beyond any real TSC.
	 */
	if ((int64_t)(t2 - t1) < 0 || lo > hi) {
		e->bad++;
		e->warp = true;
		return;
	}

	/* The bracket excludes zero: one CPU saw the other's time go back. */
	if (lo > 0 || hi < 0)
		e->warp = true;

	if (e->rounds == 0) {
		e->lo = lo;
		e->hi = hi;
		e->env_lo = lo;
		e->env_hi = hi;
		e->runs = 1;
	} else if (lo > e->hi || hi < e->lo) {
		/* Disjoint from all before: the offset moved. Start afresh. */
		e->lo = lo;
		e->hi = hi;
		e->runs++;
	} else {
		e->lo = max64(e->lo, lo);
		e->hi = min64(e->hi, hi);
	}
	e->env_lo = min64(e->env_lo, lo);
	e->env_hi = max64(e->env_hi, hi);
	e->rounds++;
}

/*
 * Summarise a pair.  Returns false, leaving *r untouched, when there were
 * too few probes to say anything.
 *
 * A consistent pair reports the intersection of its brackets.  An
 * inconsistent one reports the envelope of every bracket, which is wide but
 * still certainly holds every offset the pair had during the measurement,
 * and as its estimate the middle of the latest run of intersecting
 * brackets: the best guess of where the offset is now.
 */
bool tscfk_offset_result(const struct tscfk_offset_est *e,
			 struct tscfk_offset_result *r)
{
	if (e->rounds < TSCFK_OFFSET_MIN_ROUNDS)
		return false;

	r->rounds = e->rounds;
	r->consistent = e->runs == 1 && e->bad == 0;
	r->monotonic = !e->warp;
	r->offset = mid64(e->lo, e->hi);
	if (r->consistent) {
		r->min = e->lo;
		r->max = e->hi;
	} else {
		r->min = e->env_lo;
		r->max = e->env_hi;
	}
	return true;
}

/*
 * Whether the CPUs' IA32_TSC_ADJUST values agree with the measured offset.
 * A TSC reads a counter started at reset plus its TSC_ADJUST, and a write
 * to the TSC moves TSC_ADJUST by as much (Intel SDM vol. 3, 18.17.3), so
 * two CPUs reset together (one package) differ by their TSC_ADJUSTs,
 * exactly: the measured interval must hold that difference.  It need not
 * across packages reset at different times, nor in a guest, whose
 * hypervisor offsets the TSC behind the MSR.
 */
bool tscfk_offset_adjust_agrees(const struct tscfk_offset_result *r,
				int64_t adjust_target, int64_t adjust_ref)
{
	int64_t want = (int64_t)((uint64_t)adjust_target - (uint64_t)adjust_ref);

	return r->min <= want && want <= r->max;
}

void tscfk_skew_init(struct tscfk_skew *s)
{
	/* The reference itself is at offset zero, exactly. */
	*s = (struct tscfk_skew){ .min = 0, .max = 0, .monotonic = true };
}

void tscfk_skew_add(struct tscfk_skew *s, const struct tscfk_offset_result *r)
{
	s->min = min64(s->min, r->min);
	s->max = max64(s->max, r->max);
	if (!r->consistent || !r->monotonic)
		s->monotonic = false;
}

/*
 * An upper bound on the difference between any two of the CPUs' TSCs read
 * at the same instant: the width of the envelope of all their intervals.
 */
uint64_t tscfk_skew_max(const struct tscfk_skew *s)
{
	return (uint64_t)s->max - (uint64_t)s->min;
}
