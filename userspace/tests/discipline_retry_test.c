// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The disciplined clock's helper when a sync's sample is too noisy to use
 * (tsc__test_wide_samples makes the next ones so): the sync is tried
 * again 10 ms on, not a period later, and after failures in a row at
 * twice the wait each time; readers keep the page meanwhile (its lease
 * lasts a quarter second past the next sync's time).  The syncs are read off the page: each starts a segment at a
 * new cycle_last.
 */
#include <time.h>

#include "fake_sysfs.h"
#include "internal.h"
#include "../../testlib/page_syncs.h"

/*
 * The start of the helper's next sync after the one at 'after', waiting
 * up to 'ms'; 0 if none came.  *least: the least time, in s, that the
 * page could still be read ahead of now meanwhile (its lease).
 */
static uint64_t next_sync(const struct tsc_sysclock *c, uint64_t after, double ns_per_tick,
			  int ms, double *least)
{
	const struct timespec one_ms = { .tv_nsec = 1000000 };

	*least = 1e9;
	for (int i = 0; i < ms; i++) {
		uint64_t t = page_segment_start(c), now = tsc_rdtsc_ordered();
		uint64_t bound = __atomic_load_n(&c->max_delta, __ATOMIC_ACQUIRE);

		if (t && t != after && (double)(t - after) * ns_per_tick >= (double)SAME_SYNC_NS)
			return t;
		if (t == after) {
			double ahead = ((double)bound - (double)(now - t)) * ns_per_tick / 1e9;

			*least = ahead < *least ? ahead : *least;
		}
		nanosleep(&one_ms, NULL);
	}
	return 0;
}

FIXTURE(retry) {
	char dir[64];
	struct tsc_sysclock c;
	double ns_per_tick;
	uint64_t last;		/* the last sync seen */
};

FIXTURE_SETUP(retry)
{
	TSC_SYSCLOCK_OPTS(o, .discipline = TSC_DISCIPLINE_HELPER);
	uint64_t millihz;
	double least;

	fake_root(_metadata, self->dir, sizeof(self->dir), 0);
	o.sysfs_root = self->dir;
	self->c = (struct tsc_sysclock){ .sz = sizeof(self->c) };
	ASSERT_EQ(0, tsc_sysclock_init(&self->c, &o)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_DISCIPLINED, self->c.path);
	ASSERT_EQ(0, tsc_sysclock_rate(&self->c, &millihz)) TH_LOG("%s", tsc_last_error());
	self->ns_per_tick = 1e12 / (double)millihz;
	/* Its first sync, a period after the start: the helper's rhythm from there. */
	self->last = next_sync(&self->c, page_segment_start(&self->c), self->ns_per_tick, 3000, &least);
	ASSERT_NE(0, self->last) TH_LOG("no sync of the helper's within 3 s");
}

FIXTURE_TEARDOWN(retry)
{
	__atomic_store_n(&tsc__test_wide_samples, 0, __ATOMIC_RELEASE);
	tsc_sysclock_fini(&self->c);
	remove_root(self->dir);
}

/*
 * The next sync's interval after 'fails' samples in a row too wide, in
 * s; the lease's least in *least.
 */
static double interval_failing(struct __test_metadata *_metadata, FIXTURE_DATA(retry) *self,
			       unsigned int fails, double *least)
{
	uint64_t t;

	__atomic_store_n(&tsc__test_wide_samples, fails, __ATOMIC_RELEASE);
	t = next_sync(&self->c, self->last, self->ns_per_tick, 8000, least);
	EXPECT_NE(0, t) TH_LOG("no sync within 8 s");
	EXPECT_EQ(0, __atomic_load_n(&tsc__test_wide_samples, __ATOMIC_ACQUIRE))
		TH_LOG("the samples made too wide were not all taken");
	if (!t)
		return 0;
	return (double)(t - self->last) * self->ns_per_tick / 1e9;
}

/* One failed sync: again 10 ms on, in the same second, not the next. */
TEST_F(retry, again_soon)
{
	double least, s = interval_failing(_metadata, self, 1, &least);

	TH_LOG("a sync failed once: %.3f s since the last; the page could be read %.3f s further at least",
	       s, least);
	EXPECT_LE(1.01, s);	/* a period, then the 10 ms after the failure */
	EXPECT_GT(1.5, s);	/* a period later would be 2 s */
	EXPECT_LT(0.0, least);	/* the lease held meanwhile */
}

/* Four in a row: 10, 20, 40, 80 ms on, each twice the last. */
TEST_F(retry, twice_as_long_each_time)
{
	double least, s = interval_failing(_metadata, self, 4, &least);

	TH_LOG("a sync failed 4 times: %.3f s since the last; the page could be read %.3f s further at least",
	       s, least);
	EXPECT_LE(1.15, s);
	EXPECT_GT(1.65, s);
	EXPECT_LT(0.0, least);
}

TEST_HARNESS_MAIN
