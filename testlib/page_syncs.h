/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * A disciplined clock's syncs, seen from outside the library: each starts
 * a segment on the clock's page at a new cycle_last.  clock_accuracy
 * times the helper's syncs so, and libtsc's discipline_retry_test too.
 */
#ifndef PAGE_SYNCS_H
#define PAGE_SYNCS_H

#include <stdint.h>

#include "libtsc.h"

/*
 * Segments this close together are one sync's: new_segment() publishes
 * again, microseconds on, when its writer was preempted.
 */
#define SAME_SYNC_NS	100000000LL

/*
 * The page's cycle_last, where a sync starts its segment; 0 while the
 * page is being rewritten (it is odd then, or its seq moved on).  The
 * helper swaps pages and never writes the one the readers hold, so a
 * seq that reads even and the same around it is the segment's.
 */
static inline uint64_t page_segment_start(const struct tsc_sysclock *c)
{
	const volatile struct tsc_timepage *p = __atomic_load_n(&c->page, __ATOMIC_ACQUIRE);
	uint32_t seq = __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE);
	uint64_t t = p->cycle_last;

	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return (seq & 1) || __atomic_load_n(&p->seq, __ATOMIC_RELAXED) != seq ? 0 : t;
}

#endif
