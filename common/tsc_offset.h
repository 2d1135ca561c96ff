/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * TSC offset estimation from ping-pong probes, shared by the kernel module
 * and userspace (the library and the unit tests compile this same code).
 *
 * A probe is three TSC readings: the reference CPU reads t1, the target CPU
 * reads t after it has seen the reference's message, and the reference reads
 * t2 after it has seen the target's answer.  Causality orders the reads in
 * real time, so the target's offset (target TSC - reference TSC) lies in the
 * bracket [t - t2, t - t1].  Every bracket of a constant offset contains it,
 * so the intersection of all brackets is the tightest interval that is still
 * certain.  Brackets that do not intersect prove the offset changed during
 * the measurement: the TSCs drift or jump.
 *
 * Everything here is O(1) in memory and time per probe, with no allocation,
 * division or floating point, so the module can feed it with interrupts off.
 */
#ifndef TSCFK_OFFSET_H
#define TSCFK_OFFSET_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdbool.h>
#include <stdint.h>
#endif

/* Fewer probes than this give no estimate: one lucky bracket proves little. */
#define TSCFK_OFFSET_MIN_ROUNDS 8

/* Running state for one (reference, target) pair. */
struct tscfk_offset_est {
	int64_t lo, hi;		/* intersection of the current run of brackets */
	int64_t env_lo, env_hi;	/* envelope of every bracket */
	uint32_t rounds;	/* probes added */
	uint32_t runs;		/* runs of mutually intersecting brackets */
	uint32_t bad;		/* probes whose reference reads went backwards */
	bool warp;		/* some bracket excluded zero */
};

/* What one pair's probes say. */
struct tscfk_offset_result {
	int64_t offset;		/* best estimate, in ticks */
	int64_t min, max;	/* the offset is certainly in [min, max] */
	uint32_t rounds;	/* probes used */
	bool consistent;	/* all brackets intersect: a constant offset */
	bool monotonic;		/* no probe saw time go backwards across CPUs */
};

/* Skew across a set of CPUs, one of which is the reference (offset 0). */
struct tscfk_skew {
	int64_t min, max;	/* envelope of all offsets, reference included */
	bool monotonic;		/* every pair consistent and monotonic */
};

void tscfk_offset_init(struct tscfk_offset_est *e);
void tscfk_offset_add(struct tscfk_offset_est *e, uint64_t t1, uint64_t t,
		      uint64_t t2);
bool tscfk_offset_result(const struct tscfk_offset_est *e,
			 struct tscfk_offset_result *r);

bool tscfk_offset_adjust_agrees(const struct tscfk_offset_result *r,
				int64_t adjust_target, int64_t adjust_ref);

void tscfk_skew_init(struct tscfk_skew *s);
void tscfk_skew_add(struct tscfk_skew *s, const struct tscfk_offset_result *r);
uint64_t tscfk_skew_max(const struct tscfk_skew *s);

#endif /* TSCFK_OFFSET_H */
