// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A reading taken after seeing another thread's is never earlier, as with
 * clock_gettime(): two threads on two CPUs hand a reading back and forth
 * (release, acquire) HANDOFFS times, each reading the clock once it has
 * the other's, and an ordered reader's reading must never be before the
 * one it saw.  The unordered reader's count is printed, not judged: a
 * plain rdtsc may run before the acquire load, which is what the ordered
 * ones forbid, but whether it does here depends on the CPU.
 *
 * On silicon, not under emulation (QEMU's TCG never reorders): make check
 * runs it on the host.  The clock is a page of the test's own whose
 * MONOTONIC is tsc_now()'s, so that only the TSC read's order is tested,
 * on any machine, module or not.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "../../testlib/harness.h"
#include "internal.h"

#define HANDOFFS 5000000ul

static struct tsc_timepage page __attribute__((aligned(64)));

enum reader { ORDERED, UNORDERED, GETTIME };

/* Whether the TSCs are in step, asked once for all the tests. */
static bool in_step_asked, in_step;
static char verdict[512];

struct relay {
	_Alignas(64) atomic_ulong turn;	/* hand-offs done; whose turn by parity */
	uint64_t value;			/* the reading handed over */
	_Alignas(64) const struct tsc_sysclock *clock;
	enum reader reader;
	int cpu[2];
	/* Per thread: readings earlier than the one seen, and by how much at most. */
	unsigned long earlier[2];
	uint64_t worst[2];
};

static uint64_t gettime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t read_clock(const struct relay *r)
{
	switch (r->reader) {
	case ORDERED:
		return tsc_sysclock_monotonic(r->clock);
	case UNORDERED:
		return tsc_sysclock_monotonic_unordered(r->clock);
	default:
		return gettime_ns();
	}
}

struct side {
	struct relay *r;
	int me;
};

static void *run_side(void *arg)
{
	const struct side *s = arg;
	struct relay *r = s->r;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(r->cpu[s->me], &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
		return (void *)1;
	for (unsigned long i = (unsigned long)s->me; i < HANDOFFS; i += 2) {
		uint64_t seen, now;

		while (atomic_load_explicit(&r->turn, memory_order_acquire) != i)
			__builtin_ia32_pause();
		seen = r->value;
		now = read_clock(r);
		if (i && now < seen) {
			r->earlier[s->me]++;
			if (seen - now > r->worst[s->me])
				r->worst[s->me] = seen - now;
		}
		r->value = now;
		atomic_store_explicit(&r->turn, i + 1, memory_order_release);
	}
	return NULL;
}

/* Hand readings over HANDOFFS times; the count of earlier ones. */
static unsigned long relay(struct __test_metadata *_metadata, struct relay *r,
			   const char *name)
{
	struct side s[2] = { { r, 0 }, { r, 1 } };
	pthread_t t[2];
	void *ret[2];

	atomic_store(&r->turn, 0);
	r->value = 0;
	r->earlier[0] = r->earlier[1] = 0;
	r->worst[0] = r->worst[1] = 0;
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, run_side, &s[i]));
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(0, pthread_join(t[i], &ret[i]));
		ASSERT_EQ(NULL, ret[i]);
	}
	TH_LOG("%-34s %lu hand-offs between cpu%d and cpu%d: %lu readings earlier than the one seen, by up to %llu ns",
	       name, HANDOFFS, r->cpu[0], r->cpu[1], r->earlier[0] + r->earlier[1],
	       (unsigned long long)(r->worst[0] > r->worst[1] ? r->worst[0] : r->worst[1]));
	return r->earlier[0] + r->earlier[1];
}

FIXTURE(order) {
	struct tsc_clock clk;
	struct tsc_sysclock c;
	struct tsc__order_cpu cpu;
	struct relay r;
};

/*
 * The clock on a page of the test's whose MONOTONIC is tsc_now()'s line,
 * and two CPUs this thread may run on.
 */
FIXTURE_SETUP(order)
{
	TSC_OPTS(o, .source = TSC_SOURCE_CALIBRATION, .calibrate_max_ms = 50);
	cpu_set_t set;
	int n = 0;

	ASSERT_EQ(0, sched_getaffinity(0, sizeof(set), &set));
	for (int cpu = 0; cpu < CPU_SETSIZE && n < 2; cpu++)
		if (CPU_ISSET(cpu, &set))
			self->r.cpu[n++] = cpu;
	if (n < 2)
		SKIP(return, "one CPU to run on: nothing to hand a reading across");
	/*
	 * Readings compared across CPUs mean something only where their TSCs
	 * are in step: asked once (tsc_report_get(), the module's offsets or
	 * the library's own measurement).
	 */
	if (!in_step_asked) {
		TSC_REPORT_OPTS(ro, .max_ms = 500);
		struct tsc_report rep;

		in_step_asked = true;
		if (tsc_report_get(&rep, &ro) == 0) {
			in_step = rep.trustworthy;
			snprintf(verdict, sizeof(verdict), "%s", rep.verdict);
			tsc_report_free(&rep);
		} else {
			snprintf(verdict, sizeof(verdict), "no report: %s", tsc_last_error());
		}
	}
	if (!in_step)
		SKIP(return, "these CPUs' TSCs are not known to be in step: %s", verdict);
	self->clk.sz = sizeof(self->clk);
	ASSERT_EQ(0, tsc_clock_init(&self->clk, &o));
	page = (struct tsc_timepage){ .version = 1, .flags = TSC_TIMEPAGE_TSC, .seq = 2,
				      .mult_ns = (uint32_t)self->clk.conv.ns_int,
				      .mult = self->clk.conv.ns_frac,
				      .mono_off = -self->clk.mono_off };
	self->c.sz = sizeof(self->c);
	tsc__order_cpu(&self->cpu);
	self->r.clock = &self->c;
}

FIXTURE_TEARDOWN(order)
{
}

/* The clock with the order asked for, on the test's page. */
static void init_order(struct __test_metadata *_metadata, struct tsc_sysclock *c,
		       enum tsc_sysclock_order order)
{
	TSC_SYSCLOCK_OPTS(o, .order = order);

	ASSERT_EQ(0, tsc_sysclock_init(c, &o));
	c->page = &page;
}

/*
 * The kernel's clock, for comparison: were its readings earlier too, the
 * TSCs of these CPUs would not be in step, which no reader can mend.
 */
TEST_F(order, clock_gettime_is_the_control)
{
	self->r.reader = GETTIME;
	EXPECT_EQ(0, relay(_metadata, &self->r, "clock_gettime(MONOTONIC)"));
}

TEST_F(order, lfence_rdtsc_is_never_earlier)
{
	init_order(_metadata, &self->c, TSC_ORDER_LFENCE);
	ASSERT_EQ(0, self->c.use_rdtscp);
	self->r.reader = ORDERED;
	EXPECT_EQ(0, relay(_metadata, &self->r, "ordered, lfence; rdtsc"));
}

TEST_F(order, rdtscp_is_never_earlier)
{
	if (!self->cpu.rdtscp)
		SKIP(return, "this CPU has no rdtscp");
	init_order(_metadata, &self->c, TSC_ORDER_RDTSCP);
	ASSERT_EQ(1, self->c.use_rdtscp);
	self->r.reader = ORDERED;
	EXPECT_EQ(0, relay(_metadata, &self->r, "ordered, rdtscp"));
}

/* What init picks by default, as every caller gets it. */
TEST_F(order, the_default_is_never_earlier)
{
	init_order(_metadata, &self->c, TSC_ORDER_AUTO);
	self->r.reader = ORDERED;
	EXPECT_EQ(0, relay(_metadata, &self->r, self->c.use_rdtscp ? "ordered by default (rdtscp)" :
			   "ordered by default (lfence; rdtsc)"));
}

/* Printed, not judged: the CPU may or may not run rdtsc early here. */
TEST_F(order, unordered_is_counted)
{
	init_order(_metadata, &self->c, TSC_ORDER_AUTO);
	self->r.reader = UNORDERED;
	relay(_metadata, &self->r, "unordered (rdtsc)");
}

/* The choice itself, on made-up CPUs. */
TEST(pick)
{
	struct tsc__order_cpu intel = { .rdtscp = true }, old = { 0 };
	struct tsc__order_cpu zen2 = { .amd = true, .rdtscp = true };
	struct tsc__order_cpu zen3 = { .amd = true, .rdtscp = true, .lfence_serializing = true };
	uint32_t v = 7;

	ASSERT_EQ(0, tsc__order_pick(&old, TSC_ORDER_AUTO, &v));
	EXPECT_EQ(0, v);	/* no rdtscp: lfence; rdtsc */
	EXPECT_EQ(-EOPNOTSUPP, tsc__order_pick(&old, TSC_ORDER_RDTSCP, &v));
	ASSERT_EQ(0, tsc__order_pick(&zen2, TSC_ORDER_AUTO, &v));
	EXPECT_EQ(1, v);	/* LFENCE not said to serialise: rdtscp */
	ASSERT_EQ(0, tsc__order_pick(&zen2, TSC_ORDER_LFENCE, &v));
	EXPECT_EQ(0, v);	/* asked for */
	v = 7;
	ASSERT_EQ(0, tsc__order_pick(&zen3, TSC_ORDER_AUTO, &v));
	EXPECT_TRUE(v == 0 || v == 1);	/* by cost */
	v = 7;
	ASSERT_EQ(0, tsc__order_pick(&intel, TSC_ORDER_AUTO, &v));
	EXPECT_TRUE(v == 0 || v == 1);
	EXPECT_EQ(-EINVAL, tsc__order_pick(&intel, (enum tsc_sysclock_order)3, &v));
}

/* An order that is none: refused, and the clock says it reads clock_gettime(). */
TEST(bad_order_is_refused_and_said)
{
	TSC_SYSCLOCK_OPTS(o, .order = (enum tsc_sysclock_order)3);
	TSC_SYSCLOCK(c);
	uint64_t a, m;

	ASSERT_EQ(-EINVAL, tsc_sysclock_init(&c, &o));
	EXPECT_EQ(TSC_SYSCLOCK_SYSCALL, c.path);
	EXPECT_EQ(0, strncmp(c.why, "clock_gettime(): tsc_sysclock_init() failed: order 3", 52))
		TH_LOG("%s", c.why);
	a = gettime_ns();
	m = tsc_sysclock_monotonic(&c);
	EXPECT_LE(a, m);
	EXPECT_LE(m, gettime_ns());
}

/* A clock nobody initialised, zeroed: clock_gettime()'s time, not a crash. */
TEST(zeroed_clock_reads_clock_gettime)
{
	static struct tsc_sysclock zero;
	uint64_t a = gettime_ns(), m = tsc_sysclock_monotonic(&zero);
	uint64_t u = tsc_sysclock_monotonic_unordered(&zero), b = gettime_ns();
	uint64_t rate;

	EXPECT_LE(a, m);
	EXPECT_LE(m, u);
	EXPECT_LE(u, b);
	EXPECT_EQ(-ENODATA, tsc_sysclock_rate(&zero, &rate));
}

TEST_HARNESS_MAIN
