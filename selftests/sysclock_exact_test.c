// SPDX-License-Identifier: GPL-2.0
/*
 * libtsc's system clocks on the module's page, in a guest as root: every
 * clock_gettime() of CLOCK_REALTIME, MONOTONIC and BOOTTIME lies between
 * tsc_sysclock reads just before and after it (0 violations), with the
 * clock slewed by adjtimex() at +500 and -500 ppm and stepped by +1 and
 * -1 s; and timekeeper_freq_millihz follows the slew, tsc_sysclock_rate()
 * with it.  In a time namespace, which a page reading between two
 * clock_gettime() calls reveals, the library reads clock_gettime(), in a
 * forked child too.  Where the kernel's clocks do not read the TSC the
 * library says so and reads clock_gettime().  The front door is as
 * exact.  A disciplined clock follows a step of REALTIME of 1 us.  Needs
 * the module loaded.  A disciplined clock takes the kernel's new rate at
 * the first sync after adjtimex() changes it.
 */
#include <math.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/wait.h>

#include "../testlib/harness.h"
#include "tscfk_test.h"
#include "libtsc.h"
#include "sysclock_pair.h"

#define RATE_FILE	TSC_DIR "/timekeeper_freq_millihz"
#define SAMPLES		5000

static int violations(struct __test_metadata *_metadata, const struct tsc_sysclock *s,
		      int c, const char *phase)
{
	int bad = 0;

	for (int i = 0; i < SAMPLES; i++) {
		uint64_t v[3];

		if (!sysclock_bracket(s, c, v) && bad++ < 3)
			TH_LOG("%s, %s: library %llu, clock_gettime %llu, library %llu",
			       phase, sysclock_names[c], (unsigned long long)v[0],
			       (unsigned long long)v[1], (unsigned long long)v[2]);
	}
	return bad;
}

/* adjtimex()'s frequency in ppm (scaled by 2^16, as the kernel wants it). */
static int set_freq_ppm(long ppm)
{
	struct timex tx = { .modes = ADJ_FREQUENCY, .freq = ppm * 65536 };

	return adjtimex(&tx) < 0 ? -errno : 0;
}

static int step(int sec)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += sec;
	return clock_settime(CLOCK_REALTIME, &ts) ? -errno : 0;
}

/*
 * Where the kernel's clocks do not read the TSC, the exact path has
 * nothing to compare, and the case skips.  A guest whose clocks must read
 * it (TSCFK_CLOCKS_ON_TSC=1, set by mk/vm.mk) fails instead: this test is
 * the guard against the timekeeper's internals changing meaning, and must
 * not pass having compared nothing.
 */
#define REQUIRE_KERNEL_PATH(s) do {						\
	const char *env_ = getenv("TSCFK_CLOCKS_ON_TSC");			\
	bool must_ = env_ && !strcmp(env_, "1");				\
										\
	if ((s)->path != TSC_SYSCLOCK_KERNEL) {					\
		ASSERT_FALSE(must_) TH_LOG("TSCFK_CLOCKS_ON_TSC: %s", (s)->why);	\
		SKIP(return, "%s", (s)->why);					\
	}									\
} while (0)

FIXTURE(sys) {
	struct tsc_sysclock s;
	struct timex ntp;	/* the kernel's NTP state before the test */
};

FIXTURE_SETUP(sys)
{
	REQUIRE_MODULE();
	if (geteuid() != 0)
		SKIP(return, "not root: cannot slew or step the clock");
	ASSERT_LE(0, adjtimex(&self->ntp));
	self->s.sz = sizeof(self->s);
	ASSERT_EQ(0, tsc_sysclock_init(&self->s, NULL)) TH_LOG("%s", tsc_last_error());
	TH_LOG("path %d: %s", self->s.path, self->s.why);
}

/* adjtimex()'s tick: us per 1/USER_HZ s, 10000 unless set. */
static int set_tick(long tick)
{
	struct timex tx = { .modes = ADJ_TICK, .tick = tick };

	return adjtimex(&tx) < 0 ? -errno : 0;
}

/*
 * The PLL's offset, in us, slewed out at 1/2^(2 + constant) of what is
 * left each second (kernel/time/ntp.c), in nanosecond mode, which takes
 * the constant as given (microsecond mode adds 4), the offset then in ns;
 * 0: none left, and STA_PLL clear (the offset is taken only while it is
 * set).  STA_UNSYNC stays: no test makes the kernel think it is synced.
 */
static int set_pll(long offset_us, long constant)
{
	struct timex tx = { .modes = ADJ_STATUS | ADJ_OFFSET | ADJ_TIMECONST | ADJ_NANO,
			    .status = STA_PLL | STA_UNSYNC, .offset = offset_us * 1000,
			    .constant = constant };

	if (adjtimex(&tx) < 0)
		return -errno;
	if (offset_us)
		return 0;
	tx = (struct timex){ .modes = ADJ_STATUS, .status = STA_UNSYNC };
	return adjtimex(&tx) < 0 ? -errno : 0;
}

/* adjtime()'s slew, 500 us a second while any of delta_us is left; 0: none. */
static int set_adjtime(long delta_us)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = delta_us };

	return adjtime(&tv, NULL) ? -errno : 0;
}

/* What is left of the PLL's offset and of adjtime()'s: the state a turn of the second moves. */
static void slews_left(long *pll, long *adj)
{
	struct timex tx = { .modes = 0 };

	*pll = adjtimex(&tx) < 0 ? 0 : tx.offset;
	tx = (struct timex){ .modes = ADJ_OFFSET_SS_READ };
	*adj = adjtimex(&tx) < 0 ? 0 : tx.offset;
}

/*
 * Until the kernel's next second has turned: it applies adjtime()'s slew
 * and the PLL's share then (second_overflow() in kernel/time/ntp.c),
 * tick and freq at once.  It turns at the first timekeeping update past
 * CLOCK_REALTIME's second, a tick or more late under emulation: seen when
 * what is left of a slew moves, within a second.
 */
static void next_kernel_second(void)
{
	long pll, adj, pll_now, adj_now;
	struct timespec ts;

	slews_left(&pll, &adj);
	clock_gettime(CLOCK_REALTIME, &ts);
	usleep((useconds_t)((1000000000 - ts.tv_nsec) / 1000 + 1000));
	for (int i = 0; i < 1000 && (pll || adj); i++) {
		slews_left(&pll_now, &adj_now);
		if (pll_now != pll || adj_now != adj)
			return;
		usleep(1000);
	}
}

/* The NTP state as it was, no slew left, nothing of one in the next second either. */
FIXTURE_TEARDOWN(sys)
{
	struct timex tx = self->ntp;
	long pll, adj;

	if (!self->ntp.tick)
		return;		/* skipped before it was read */
	slews_left(&pll, &adj);
	set_adjtime(0);
	set_pll(0, 0);
	/* The constant as read, in ns mode; then the mode as it was. */
	tx.modes = ADJ_STATUS | ADJ_TIMECONST | ADJ_FREQUENCY | ADJ_TICK | ADJ_NANO;
	adjtimex(&tx);
	if (!(self->ntp.status & STA_NANO)) {
		tx = (struct timex){ .modes = ADJ_MICRO };
		adjtimex(&tx);
	}
	if (pll || adj)
		next_kernel_second();	/* this second's share of them, gone */
}

TEST_F(sys, exact_through_slews_and_steps)
{
	static const struct {
		const char *name;
		long ppm;
		int step;
	} phases[] = {
		{ "free", 0, 0 }, { "+500 ppm", 500, 0 }, { "-500 ppm", -500, 0 },
		{ "stepped +1 s", 0, 1 }, { "stepped -1 s", 0, -1 },
	};
	uint64_t khz, millihz, lib;

	REQUIRE_KERNEL_PATH(&self->s);
	/* The fast path's page: usable (seq even, TSC) before and after. */
	EXPECT_EQ(0, self->s.page->seq & 1);
	EXPECT_EQ(TSC_TIMEPAGE_TSC, self->s.page->flags);
	ASSERT_EQ(0, read_u64(FREQ_FILE, &khz));
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
		ASSERT_EQ(0, set_freq_ppm(phases[i].ppm));
		if (phases[i].step)
			ASSERT_EQ(0, step(phases[i].step));
		/* NTP takes a new frequency at its next second (second_overflow()). */
		usleep(1100000);
		for (int c = 0; c < 3; c++) {
			EXPECT_EQ(0, violations(_metadata, &self->s, c, phases[i].name));
		}
		/* ticks per ns fall as the slewed ns grow: rate / (1 + ppm). */
		ASSERT_EQ(0, read_u64(RATE_FILE, &millihz));
		TH_LOG("%s: timekeeper %llu mHz, tsc_khz %llu", phases[i].name,
		       (unsigned long long)millihz, (unsigned long long)khz);
		EXPECT_GE(10e-6, fabs((double)millihz * (1 + phases[i].ppm * 1e-6) /
				      ((double)khz * 1e6) - 1));
		/* The library reads the same figure off the page. */
		ASSERT_EQ(0, tsc_sysclock_rate(&self->s, &lib)) TH_LOG("%s", tsc_last_error());
		EXPECT_EQ(millihz, lib);
	}
	EXPECT_EQ(0, self->s.page->seq & 1);
	EXPECT_EQ(TSC_TIMEPAGE_TSC, self->s.page->flags);
}

/* The front door's clock c, after everything before it, as sysclock_lib(). */
static uint64_t front(int c)
{
	__asm__ __volatile__("lfence" : : : "memory");
	return c == SYSCLOCK_REAL ? tsc_realtime_ns() :
	       c == SYSCLOCK_MONO ? tsc_monotonic_ns() : tsc_boottime_ns();
}

/*
 * The front door (tsc_realtime_ns() and kin), set up by its first read in
 * this process, takes the module's page: every clock_gettime() lies
 * between two of its reads, free, slewed and stepped; tsc_khz() is the
 * module's tsc_freq_khz.
 */
TEST_F(sys, the_front_door_is_exact)
{
	static const struct {
		const char *name;
		long ppm;
		int step;
	} phases[] = { { "free", 0, 0 }, { "+500 ppm", 500, 0 }, { "stepped +1 s", 0, 1 } };
	const char *why;
	uint64_t khz;

	REQUIRE_KERNEL_PATH(&self->s);
	(void)tsc_monotonic_ns();
	ASSERT_EQ(TSC_SYSCLOCK_KERNEL, tsc_time_path(&why)) TH_LOG("%s", why);
	ASSERT_EQ(0, read_u64(FREQ_FILE, &khz));
	EXPECT_EQ(khz, tsc_khz());
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
		ASSERT_EQ(0, set_freq_ppm(phases[i].ppm));
		if (phases[i].step)
			ASSERT_EQ(0, step(phases[i].step));
		usleep(1100000);
		for (int c = 0; c < 3; c++) {
			int bad = 0;

			for (int k = 0; k < SAMPLES; k++) {
				uint64_t a = front(c), v = sysclock_sys(c), b = front(c);

				if (!(a <= v && v <= b) && bad++ < 3)
					TH_LOG("%s, %s: front door %llu, clock_gettime %llu, front door %llu",
					       phases[i].name, sysclock_names[c], (unsigned long long)a,
					       (unsigned long long)v, (unsigned long long)b);
			}
			EXPECT_EQ(0, bad);
		}
	}
}

/*
 * A leap second: two seconds before a UTC midnight with STA_INS set, the
 * kernel repeats 23:59:59 and its REALTIME steps back a second.  Every
 * clock_gettime() bracketed by two library reads within one generation
 * of the page lies between them (a bracket the step falls in sees the
 * generation change, and is the only kind that may not), and the page's
 * generation announces the step.  The clock is put back where it would
 * have been, the status cleared.
 */
TEST_F(sys, exact_across_a_leap_second)
{
	struct timex st = { 0 };
	struct timespec was, ts;
	int status;
	uint64_t mono0, prev = 0;
	int bad = 0, straddled = 0, back = 0;
	uint32_t gen0, gen1;

	REQUIRE_KERNEL_PATH(&self->s);
	ASSERT_LE(0, adjtimex(&st)) TH_LOG("%s", strerror(errno));
	status = st.status;
	clock_gettime(CLOCK_REALTIME, &was);
	mono0 = sysclock_sys(SYSCLOCK_MONO);
	ts = (struct timespec){ .tv_sec = (was.tv_sec / 86400 + 1) * 86400 - 2 };
	ASSERT_EQ(0, clock_settime(CLOCK_REALTIME, &ts)) TH_LOG("%s", strerror(errno));
	st = (struct timex){ .modes = ADJ_STATUS, .status = status | STA_INS };
	ASSERT_LE(0, adjtimex(&st)) TH_LOG("%s", strerror(errno));
	gen0 = self->s.page->generation;
	while (sysclock_sys(SYSCLOCK_MONO) - mono0 < 4500000000ull) {
		uint32_t g1 = self->s.page->generation;
		uint64_t v[3];
		bool inside = sysclock_bracket(&self->s, SYSCLOCK_REAL, v);

		if (self->s.page->generation != g1) {
			straddled++;
			continue;
		}
		if (!inside && bad++ < 3)
			TH_LOG("library %llu, clock_gettime %llu, library %llu",
			       (unsigned long long)v[0], (unsigned long long)v[1],
			       (unsigned long long)v[2]);
		back += v[1] < prev;
		prev = v[1];
	}
	gen1 = self->s.page->generation;
	/* The status as it was (STA_UNSYNC too), the time where it would be. */
	st = (struct timex){ .modes = ADJ_STATUS, .status = status & ~(STA_INS | STA_DEL) };
	adjtimex(&st);
	{
		uint64_t t = (uint64_t)was.tv_sec * 1000000000u + (uint64_t)was.tv_nsec +
			     (sysclock_sys(SYSCLOCK_MONO) - mono0);

		ts = (struct timespec){ .tv_sec = (time_t)(t / 1000000000u),
					.tv_nsec = (long)(t % 1000000000u) };
		clock_settime(CLOCK_REALTIME, &ts);
	}
	TH_LOG("REALTIME went back %d times; generation %u to %u, %d brackets saw it change",
	       back, gen0, gen1, straddled);
	EXPECT_EQ(0, bad);
	EXPECT_EQ(1, back);	/* the leap second, once */
	EXPECT_NE(gen0, gen1);
}

/* The clock's reading of c lies between clock_gettime()'s around it. */
static bool reads_sys(const struct tsc_sysclock *s, int c)
{
	uint64_t a = sysclock_sys(c), v = sysclock_lib(s, c);

	return a <= v && v <= sysclock_sys(c);
}

/*
 * unshare(CLONE_NEWTIME) moves the caller's children into a namespace
 * whose MONOTONIC (or BOOTTIME) is 1000 s ahead, not the caller.  The
 * library learns which by evidence (a page reading between two
 * clock_gettime() calls):
 *  - the caller, initialising a clock after it, still has the page's
 *    exact clocks;
 *  - a child: the clock the parent initialised before the fork reads the
 *    child's clock_gettime() (the fork handler found the page off and
 *    replaced it), and one it initialises itself reads clock_gettime()
 *    too, and says why.
 * Each offset on its own, so that each check is seen to work.  Where the
 * kernel's clocks do not read the TSC (6.1 with 2 CPUs here) the page
 * cannot be read, and the library takes /proc/self/timens_offsets' word:
 * the children's namespace, which in a child is its own (the parent's
 * clock is then clock_gettime() too, and not checked).
 */
TEST_F(sys, a_time_namespace)
{
	static const struct {
		const char *offsets;
		int clock;
	} ns[] = {
		{ "monotonic 1000 0\n", SYSCLOCK_MONO },
		{ "boottime 1000 0\n", SYSCLOCK_BOOT },
	};

	const bool exact = self->s.path == TSC_SYSCLOCK_KERNEL;

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		struct tsc_sysclock p = { .sz = sizeof(p) };
		int status;
		pid_t pid;
		FILE *f;

		if (unshare(CLONE_NEWTIME))
			SKIP(return, "unshare(CLONE_NEWTIME): %s", strerror(errno));
		f = fopen("/proc/self/timens_offsets", "w");
		ASSERT_NE(NULL, f);
		fputs(ns[i].offsets, f);
		ASSERT_EQ(0, fclose(f));
		ASSERT_EQ(0, tsc_sysclock_init(&p, NULL)) TH_LOG("%s", tsc_last_error());
		if (exact) {
			EXPECT_EQ(TSC_SYSCLOCK_KERNEL, p.path)
				TH_LOG("the parent, %s: %s", ns[i].offsets, p.why);
			EXPECT_EQ(0, violations(_metadata, &p, ns[i].clock, "the parent"));
		}
		pid = fork();
		ASSERT_LE(0, pid);
		if (pid == 0) {
			struct tsc_sysclock c = { .sz = sizeof(c) };

			if (!reads_sys(&self->s, ns[i].clock))
				_exit(1);
			if (tsc_sysclock_init(&c, NULL) || c.path != TSC_SYSCLOCK_SYSCALL ||
			    !strstr(c.why, "time namespace"))
				_exit(2);
			_exit(reads_sys(&c, ns[i].clock) ? 0 : 3);
		}
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("%s: status %#x (1: the clock from before the fork read the page, 2: a new clock took it, 3: it was not clock_gettime())",
			       ns[i].offsets, status);
		tsc_sysclock_fini(&p);
	}
}

/* REALTIME minus MONOTONIC on a clock's page, and its generation. */
static int64_t real_minus_mono(const struct tsc_sysclock *c, uint32_t *gen)
{
	const volatile struct tsc_timepage *p = c->page;

	*gen = p->generation;
	return (int64_t)(p->real_off - p->mono_off);
}

/* A disciplined clock (caller mode) on a sysfs root without the module's page. */
static int disciplined(struct tsc_sysclock *c)
{
	static const char *const dirs[] = {
		"/tmp/sysclock-no-page", "/tmp/sysclock-no-page/devices",
		"/tmp/sysclock-no-page/devices/system", "/tmp/sysclock-no-page/devices/system/cpu",
	};
	TSC_SYSCLOCK_OPTS(o, .sysfs_root = dirs[0], .discipline = TSC_DISCIPLINE_CALLER);

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (mkdir(dirs[i], 0755) && errno != EEXIST)
			return -errno;
	}
	c->sz = sizeof(*c);
	return tsc_sysclock_init(c, &o);
}

/* A sync, tried again while its sample is too noisy (a vCPU descheduled). */
static int sync_retry(struct tsc_sysclock *c)
{
	int err = -EAGAIN;

	for (int tries = 0; tries < 10 && err == -EAGAIN; tries++)
		err = tsc_sysclock_sync(c);
	return err;
}

/*
 * A disciplined clock (on a sysfs root without the module's page) across
 * a step of REALTIME of 1 us, as a PTP servo's ADJ_SETOFFSET makes one,
 * far below a sample's noise threshold (10 us): its timer tells the next
 * sync the clock was set, which takes REALTIME's new offset, in a new
 * generation.  How far it moved is the sample's business (microseconds
 * under emulation), logged; that it moved, the generation says.
 */
TEST_F(sys, a_disciplined_clock_follows_a_1us_step)
{
	struct timex tx = { .modes = ADJ_SETOFFSET | ADJ_NANO, .time = { .tv_usec = 1000 } };
	TSC_SYSCLOCK(c);
	int64_t before, after;
	uint32_t gen0, gen1;

	ASSERT_EQ(0, disciplined(&c)) TH_LOG("%s", tsc_last_error());
	if (c.path != TSC_SYSCLOCK_DISCIPLINED)
		SKIP(return, "%s", c.why);
	ASSERT_EQ(0, sync_retry(&c)) TH_LOG("%s", tsc_last_error());
	before = real_minus_mono(&c, &gen0);
	/* It returns the clock's state: TIME_ERROR (5) while unsynchronised. */
	ASSERT_LE(0, clock_adjtime(CLOCK_REALTIME, &tx)) TH_LOG("ADJ_SETOFFSET: %s", strerror(errno));
	ASSERT_EQ(0, sync_retry(&c)) TH_LOG("%s", tsc_last_error());
	after = real_minus_mono(&c, &gen1);
	TH_LOG("after a step of +1 us: REALTIME's offset moved %+lld ns; generation %u -> %u",
	       (long long)(after - before), gen0, gen1);
	EXPECT_NE(gen0, gen1);
	EXPECT_GT(20000, llabs(after - before));
	tsc_sysclock_fini(&c);
}

/*
 * The disciplined clock's MONOTONIC minus the system's, from the
 * narrowest of 50 brackets (a host that pauses the guest mid-bracket
 * moves a bracket's middle by half the pause).
 */
static int64_t disciplined_off(const struct tsc_sysclock *c, uint64_t *width)
{
	int64_t off = 0;

	*width = UINT64_MAX;
	for (int i = 0; i < 50; i++) {
		uint64_t v[3];

		/* Not the exact clock: only its two reads are ordered. */
		(void)sysclock_bracket(c, SYSCLOCK_MONO, v);
		if (v[2] < v[0])
			continue;
		if (v[2] - v[0] < *width) {
			*width = v[2] - v[0];
			off = (int64_t)(v[0] / 2 + v[2] / 2 - v[1]);
		}
	}
	return off;
}

/* A state of the kernel's rate: adjtimex()'s freq and tick, adjtime(), the PLL. */
struct rate_state {
	const char *what;
	long freq_ppm, tick_ppm, adjtime_us, pll_us;
};

/*
 * The kernel's rate set as r says, and for adjtime() and the PLL, which
 * the kernel takes at the turn of its second, that turn waited for (and
 * for every state if turn says so).  0, or a -errno.
 */
static int set_rate(const struct rate_state *r, bool turn)
{
	const long tick = 1000000 / sysconf(_SC_CLK_TCK);
	struct timex tx = { .modes = 0 };
	int err;

	err = set_freq_ppm(r->freq_ppm);
	err = err ? err : set_tick(tick + tick * r->tick_ppm / 1000000);
	err = err ? err : set_adjtime(r->adjtime_us);
	err = err ? err : set_pll(r->pll_us, 6);
	if (err)
		return err;
	if (r->pll_us && (adjtimex(&tx) < 0 || tx.constant != 6 ||
			  (tx.status & (STA_PLL | STA_NANO)) != (STA_PLL | STA_NANO)))
		return -EPROTO;
	if (turn || r->adjtime_us || r->pll_us)
		next_kernel_second();
	return 0;
}

/*
 * A disciplined clock follows a change of the kernel's rate at the first
 * sync after it takes effect: it takes the rate from the kernel's NTP
 * state (adjtimex()'s freq, tick, the PLL's offset and adjtime()'s slew),
 * not from the interval before, which ran at the old rate.  Synced every
 * half second for two seconds (its MONOTONIC_RAW base, and what the model
 * leaves out, learnt), then after each change (just after it for freq and
 * tick, after the kernel's next second for adjtime() and the PLL), and
 * read at once and half a second later without a sync.  The first
 * reading is where the sync left the clock: off by what the kernel ran
 * at the new rate before it (more where the guest stalled between the
 * two), which the clock slews out over a second or more (at most half of
 * it in the half second, its share of the time between the readings
 * whatever that was).  The second is within 100 us of that slew's
 * range; at the old rate it would be 250 us or more beyond (changes of
 * 500 to 1560 ppm).  A first reading over 100 us judges nothing: the
 * state before the change is set again, and the change made again.  The
 * kernel's catching up the millisecond or so of its second at the old
 * rate adds some us.  Until that second the disciplined clock keeps the
 * old rate, which the kernel's is then too (each change made from a
 * state that the turn of the second does not change).
 */
TEST_F(sys, a_disciplined_clock_follows_the_kernels_rate)
{
	static const struct rate_state change[] = {
		{ "nominal", 0, 0, 0, 0 },
		{ "freq +500 ppm", 500, 0, 0, 0 },
		{ "freq -500 ppm", -500, 0, 0, 0 },
		{ "freq 0, tick +500 ppm", 0, 500, 0, 0 },
		{ "tick 0", 0, 0, 0, 0 },
		/* Each from a state whose rate holds until the kernel's second turns. */
		{ "adjtime() -50 ms: -500 ppm", 0, 0, -50000, 0 },
		{ "adjtime() done, the PLL's 400 ms: about +1560 ppm", 0, 0, 0, 400000 },
	};
	TSC_SYSCLOCK(c);

	ASSERT_EQ(0, disciplined(&c)) TH_LOG("%s", tsc_last_error());
	if (c.path != TSC_SYSCLOCK_DISCIPLINED)
		SKIP(return, "%s", c.why);
	for (int i = 0; i < 4; i++) {
		usleep(500000);
		ASSERT_EQ(0, sync_retry(&c)) TH_LOG("%s", tsc_last_error());
	}
	for (size_t i = 1; i < sizeof(change) / sizeof(change[0]); i++) {
		int64_t at_sync = 0, off, near, far;
		uint64_t width, start;
		double secs;

		for (int tries = 0; tries < 3; tries++) {
			if (tries) {
				TH_LOG("%s: %+lld ns at the sync, which came late: again from \"%s\"",
				       change[i].what, (long long)at_sync, change[i - 1].what);
				ASSERT_EQ(0, set_rate(&change[i - 1], true));
				ASSERT_EQ(0, sync_retry(&c)) TH_LOG("%s", tsc_last_error());
				usleep(500000);
				ASSERT_EQ(0, sync_retry(&c)) TH_LOG("%s", tsc_last_error());
			}
			ASSERT_EQ(0, set_rate(&change[i], false));
			ASSERT_EQ(0, sync_retry(&c)) TH_LOG("%s", tsc_last_error());
			at_sync = disciplined_off(&c, &width);
			if (llabs(at_sync) <= 100000)
				break;
		}
		ASSERT_GE(100000, llabs(at_sync))
			TH_LOG("%s: late at every try, the last %+lld ns", change[i].what,
			       (long long)at_sync);
		start = now_ns(CLOCK_MONOTONIC);
		usleep(500000);
		off = disciplined_off(&c, &width);
		secs = (double)(now_ns(CLOCK_MONOTONIC) - start) / 1e9;
		TH_LOG("%s: %+lld ns at the sync, %+lld ns %.2f s after (bracket %llu ns)",
		       change[i].what, (long long)at_sync, (long long)off, secs,
		       (unsigned long long)width);
		/* The slew takes at_sync towards 0 at its share a second at most. */
		near = at_sync - (int64_t)((double)at_sync * secs);
		far = at_sync;
		EXPECT_LE((near < far ? near : far) - 100000, off);
		EXPECT_GE((near < far ? far : near) + 100000, off);
	}
	tsc_sysclock_fini(&c);
}

/* Where the kernel's clocks do not read the TSC: clock_gettime(), and why. */
TEST_F(sys, clock_gettime_where_not_exact)
{
	if (self->s.path == TSC_SYSCLOCK_KERNEL)
		SKIP(return, "the clocks read the TSC here: the exact path is the test");
	EXPECT_EQ(TSC_SYSCLOCK_SYSCALL, self->s.path);
	EXPECT_NE(NULL, strstr(self->s.why, "clock_gettime(): ")) TH_LOG("%s", self->s.why);
	for (int c = 0; c < 3; c++) {
		EXPECT_EQ(0, violations(_metadata, &self->s, c, "clock_gettime"));
	}
}

TEST_HARNESS_MAIN
