// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * struct tsc_sysclock on a fake sysfs whose tsc/clock_page is a file the
 * test writes: the page's mapping is what the readers compute, through the
 * fast path and through the slow one (a TSC under 1 GHz); a page that is
 * not to be used, or no page, gives clock_gettime() and says why; a write
 * that never ends costs a bounded wait; the page is followed as it
 * changes, and an unloaded module's page is mapped anew.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_sysfs.h"
#include "internal.h"
#include "tsc_clock_page.h"

#define PAGE 4096

static uint64_t now(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

FIXTURE(page) {
	char dir[64], path[128];
	struct tsc_clock clk;	/* this machine's TSC against CLOCK_MONOTONIC */
	struct tscfk_clock_page p;
};

/*
 * A page whose MONOTONIC is tsc_now()'s: mult the clock's ns fraction,
 * no frac, mono_off the clock's with the sign the page's sum wants; the
 * others a second and a minute on.
 */
FIXTURE_SETUP(page)
{
	TSC_OPTS(o, .source = TSC_SOURCE_CALIBRATION, .calibrate_max_ms = 50);
	char cmd[256];

	fake_root(_metadata, self->dir, sizeof(self->dir), 0);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/devices/system/cpu/tsc", self->dir);
	ASSERT_EQ(0, system(cmd));
	snprintf(self->path, sizeof(self->path), "%s/devices/system/cpu/tsc/clock_page",
		 self->dir);
	self->clk.sz = sizeof(self->clk);
	ASSERT_EQ(0, tsc_clock_init(&self->clk, &o)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(0, self->clk.conv.ns_int) TH_LOG("a TSC under 1 GHz: the fixture needs 1 GHz up");
	/* frac below 2^64 moves a result by less than 1 ns: up to 1 ns late. */
	self->p = (struct tscfk_clock_page){
		.version = 1, .flags = TSCFK_CLOCK_TSC, .seq = 2, .generation = 7,
		.mult = self->clk.conv.ns_frac, .frac = 0x8000000000000000ull,
		.mono_off = -self->clk.mono_off,
	};
	self->p.real_off = self->p.mono_off + 1000000000;
	self->p.boot_off = self->p.mono_off + 60000000000;
	fake_page_publish(_metadata, self->path, &self->p);
}

FIXTURE_TEARDOWN(page)
{
	remove_root(self->dir);
}

static int init(struct tsc_sysclock *c, const char *dir)
{
	TSC_SYSCLOCK_OPTS(o, .sysfs_root = dir);

	return tsc_sysclock_init(c, &o);
}

/* Each clock lies between tsc_now() before and after it, shifted. */
static void expect_page_time(struct __test_metadata *_metadata, const struct tsc_sysclock *c,
			     const struct tsc_clock *clk)
{
	for (int i = 0; i < 1000; i++) {
		uint64_t a = tsc_now_ordered(clk), m = tsc_sysclock_monotonic(c);
		uint64_t r = tsc_sysclock_realtime(c), b = tsc_sysclock_boottime(c);
		uint64_t z = tsc_now_ordered(clk);

		ASSERT_LE(a, m);
		ASSERT_LE(m, z + 1);
		ASSERT_LE(a + 1000000000, r);
		ASSERT_LE(r, z + 1 + 1000000000);
		ASSERT_LE(a + 60000000000, b);
		ASSERT_LE(b, z + 1 + 60000000000);
	}
}

TEST_F(page, the_pages_time)
{
	TSC_SYSCLOCK(c);

	ASSERT_EQ(0, init(&c, self->dir)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(TSC_SYSCLOCK_KERNEL, c.path);
	EXPECT_NE(NULL, strstr(c.why, "generation 7): exact")) TH_LOG("%s", c.why);
	expect_page_time(_metadata, &c, &self->clk);
	/* The page changes under the clock: the readers follow it. */
	self->p.mono_off += 5000000000;
	self->p.seq += 2;
	fake_page_publish(_metadata, self->path, &self->p);
	{
		uint64_t a = tsc_now_ordered(&self->clk) + 5000000000;
		uint64_t m = tsc_sysclock_monotonic(&c);

		EXPECT_LE(a, m);
		EXPECT_LE(m, tsc_now_ordered(&self->clk) + 5000000000);
	}
}

/*
 * A TSC reading before cycle_last counts as cycle_last, as in the kernel:
 * with cycle_last far ahead, every reading is the page's value there,
 * exactly, the fraction included.
 */
TEST_F(page, readings_before_cycle_last)
{
	TSC_SYSCLOCK(c);
	struct tscfk_clock_map real;
	uint64_t want;

	self->p.cycle_last = tsc_ticks_unordered() + (1ull << 40);
	self->p.frac = 0xffffffffffffffffull;
	fake_page_publish(_metadata, self->path, &self->p);
	ASSERT_EQ(0, init(&c, self->dir));
	real = (struct tscfk_clock_map){ 0, self->p.mult, self->p.frac, self->p.real_off };
	want = tscfk_clock_ns(&real, self->p.cycle_last, 0);
	EXPECT_EQ(want, tsc_sysclock_realtime(&c));
	EXPECT_EQ(want - 1000000000, tsc_sysclock_monotonic(&c));
	EXPECT_EQ(want + 59000000000, tsc_sysclock_boottime(&c));
	/* By hand: hi64(last * mult + frac) + off. */
	EXPECT_EQ((uint64_t)(((unsigned __int128)self->p.cycle_last * self->p.mult +
			      self->p.frac) >> 64) + self->p.real_off, want);
}

/* A TSC under 1 GHz: whole ns per tick, through the slow path. */
TEST_F(page, whole_ns_per_tick)
{
	TSC_SYSCLOCK(c);
	uint64_t t0, t1, m;
	struct tscfk_clock_map map;

	self->p.mult_ns = 2;
	fake_page_publish(_metadata, self->path, &self->p);
	ASSERT_EQ(0, init(&c, self->dir));
	map = (struct tscfk_clock_map){ 2, self->p.mult, self->p.frac, self->p.mono_off };
	t0 = tsc_rdtsc_ordered();
	m = tsc_sysclock_monotonic(&c);
	t1 = tsc_rdtsc_ordered();
	EXPECT_LE(tscfk_clock_ns(&map, 0, t0), m);
	EXPECT_LE(m, tscfk_clock_ns(&map, 0, t1));
}

static void expect_syscall_time(struct __test_metadata *_metadata, const struct tsc_sysclock *c)
{
	uint64_t a = now(CLOCK_MONOTONIC), m = tsc_sysclock_monotonic(c);
	uint64_t ra = now(CLOCK_REALTIME), r = tsc_sysclock_realtime(c);
	uint64_t ba = now(CLOCK_BOOTTIME), b = tsc_sysclock_boottime(c);

	EXPECT_LE(a, m);
	EXPECT_LE(m, now(CLOCK_MONOTONIC));
	EXPECT_LE(ra, r);
	EXPECT_LE(r, now(CLOCK_REALTIME));
	EXPECT_LE(ba, b);
	EXPECT_LE(b, now(CLOCK_BOOTTIME));
}

/*
 * REALTIME from the clock lies between clock_gettime()'s around it: the
 * page's REALTIME here is MONOTONIC and a second, decades away from it.
 */
static bool reads_realtime(const struct tsc_sysclock *c)
{
	uint64_t a = now(CLOCK_REALTIME), r = tsc_sysclock_realtime(c);

	return a <= r && r <= now(CLOCK_REALTIME);
}

/*
 * A page nobody moved on for longer than its max_cycles (layout 2) is
 * stale: readings go to clock_gettime(), through the fast path's test
 * and through the slow path's (a TSC under 1 GHz).  Within max_cycles,
 * the page.
 */
TEST_F(page, stale_past_max_cycles)
{
	for (uint32_t mult_ns = 0; mult_ns < 2; mult_ns++) {
		TSC_SYSCLOCK(c);

		self->p.version = 2;
		self->p.mult_ns = mult_ns;
		/* Seconds of the TSC at any rate: no preemption makes a fresh page stale. */
		self->p.max_cycles = 1ull << 34;
		self->p.cycle_last = tsc_ticks_unordered() - (1ull << 35);
		fake_page_publish(_metadata, self->path, &self->p);
		ASSERT_EQ(0, init(&c, self->dir)) TH_LOG("%s", tsc_last_error());
		EXPECT_EQ(1ull << 34, c.max_delta);
		EXPECT_TRUE(reads_realtime(&c)) TH_LOG("mult_ns %u: the stale page was read", mult_ns);
		EXPECT_LE(now(CLOCK_MONOTONIC), tsc_sysclock_monotonic(&c));
		/* Moved on: the page again. */
		self->p.cycle_last = tsc_ticks_unordered() - (1ull << 20);
		self->p.seq += 2;
		fake_page_publish(_metadata, self->path, &self->p);
		EXPECT_FALSE(reads_realtime(&c)) TH_LOG("mult_ns %u: a fresh page was not read", mult_ns);
	}
}

/*
 * A layout-1 page (an older module) has no max_cycles: the bound is the
 * kernel's own, from its mult with 11 % more (clocks_calc_max_nsecs()),
 * and none without a mult.
 */
TEST_F(page, stale_on_a_version_1_page)
{
	TSC_SYSCLOCK(c);
	const uint32_t mult = 1u << 31;	/* 0.5 GHz at shift 30: a bound of 3.6 s at 2 GHz */
	const uint64_t bound = 0xffffffffffffffffull / (mult + (uint64_t)mult * 11 / 100);

	self->p.version = 1;
	self->p.max_cycles = 1;		/* not there in layout 1: ignored */
	self->p.kernel_mult = mult;
	self->p.cycle_last = tsc_ticks_unordered() - 2 * bound;
	fake_page_publish(_metadata, self->path, &self->p);
	ASSERT_EQ(0, init(&c, self->dir)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(bound, c.max_delta);
	EXPECT_TRUE(reads_realtime(&c));
	self->p.cycle_last = tsc_ticks_unordered() - bound / 2;
	self->p.seq += 2;
	fake_page_publish(_metadata, self->path, &self->p);
	EXPECT_FALSE(reads_realtime(&c));
	/* No mult either: no bound but the one that tells readings before cycle_last. */
	self->p.kernel_mult = 0;
	self->p.cycle_last = 0;
	fake_page_publish(_metadata, self->path, &self->p);
	ASSERT_EQ(0, init(&c, self->dir));
	EXPECT_EQ(INT64_MAX, c.max_delta);
	EXPECT_FALSE(reads_realtime(&c));
}

/*
 * The system's page (the default root's, here through TSC_SYSFS_ROOT)
 * must tell this process's clocks, by evidence: this one's MONOTONIC is
 * a calibrated tsc_now(), microseconds off clock_gettime(), and its
 * BOOTTIME a minute off, as a time namespace's would be.  So init takes
 * clock_gettime() and says why; a page that cannot be read now is left
 * to /proc/self/timens_offsets (none here); and a fork's child replaces
 * the page it inherited, which its clocks then read past, while the
 * parent's keep it.
 */
TEST_F(page, the_systems_page_by_evidence)
{
	TSC_SYSCLOCK(c);
	TSC_SYSCLOCK(kept);
	int status;
	pid_t pid;

	ASSERT_EQ(0, init(&kept, self->dir));
	ASSERT_EQ(TSC_SYSCLOCK_KERNEL, kept.path);
	ASSERT_EQ(0, setenv("TSC_SYSFS_ROOT", self->dir, 1));
	ASSERT_EQ(0, tsc_sysclock_init(&c, NULL));
	EXPECT_EQ(TSC_SYSCLOCK_SYSCALL, c.path);
	EXPECT_NE(NULL, strstr(c.why, "off the kernel's page (a time namespace's offset)"))
		TH_LOG("%s", c.why);
	expect_syscall_time(_metadata, &c);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(reads_realtime(&kept) ? 0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("the child read the page its clocks disagree with");
	EXPECT_FALSE(reads_realtime(&kept)) TH_LOG("the parent lost its page");
	/* Not readable now (another clocksource): the offsets file's word. */
	self->p.flags = 0;
	self->p.seq = 5;
	fake_page_publish(_metadata, self->path, &self->p);
	ASSERT_EQ(0, tsc_sysclock_init(&c, NULL));
	EXPECT_NE(NULL, strstr(c.why, "do not read the TSC")) TH_LOG("%s", c.why);
	ASSERT_EQ(0, unsetenv("TSC_SYSFS_ROOT"));
}

/* The kernel's clocks left the TSC: seq odd, no TSC in flags. */
TEST_F(page, not_to_be_used)
{
	TSC_SYSCLOCK(c);

	self->p.flags = 0;
	self->p.seq = 3;
	fake_page_publish(_metadata, self->path, &self->p);
	ASSERT_EQ(0, init(&c, self->dir));
	EXPECT_EQ(TSC_SYSCLOCK_SYSCALL, c.path);
	EXPECT_NE(NULL, strstr(c.why, "do not read the TSC")) TH_LOG("%s", c.why);
	expect_syscall_time(_metadata, &c);
	/* ... and back: the same clock takes the fast path again. */
	self->p.flags = TSCFK_CLOCK_TSC;
	self->p.seq = 4;
	fake_page_publish(_metadata, self->path, &self->p);
	expect_page_time(_metadata, &c, &self->clk);
}

/*
 * The rate: 2600002 ticks in a 1 ms interval are 2600002000 Hz; NTP
 * wanting the interval 10 ns shorter makes it 10 ppm more, to the mHz
 * (2600028000.280 Hz, rounded down).  Followed as the page changes; none
 * where the page is not to be used, and none that is nonsense.
 */
TEST_F(page, rate)
{
	TSC_SYSCLOCK(c);
	uint64_t mhz = 0;

	self->p.cycle_interval = 2600002;
	self->p.ntp_tick = 1000000ull << 32;
	fake_page_publish(_metadata, self->path, &self->p);
	ASSERT_EQ(0, init(&c, self->dir));
	ASSERT_EQ(0, tsc_sysclock_rate(&c, &mhz)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(2600002000000ull, mhz);
	self->p.ntp_tick = (1000000ull - 10) << 32;
	self->p.seq += 2;
	fake_page_publish(_metadata, self->path, &self->p);
	ASSERT_EQ(0, tsc_sysclock_rate(&c, &mhz));
	EXPECT_EQ(2600028000280ull, mhz);
	self->p.ntp_tick = 0;
	self->p.seq += 2;
	fake_page_publish(_metadata, self->path, &self->p);
	EXPECT_EQ(-ERANGE, tsc_sysclock_rate(&c, &mhz));
	self->p.flags = 0;
	self->p.seq += 1;
	fake_page_publish(_metadata, self->path, &self->p);
	EXPECT_EQ(-ENODATA, tsc_sysclock_rate(&c, &mhz));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "do not read the TSC")) TH_LOG("%s", tsc_last_error());
	{
		TSC_SYSCLOCK(never_initialised);

		EXPECT_EQ(-ENODATA, tsc_sysclock_rate(&never_initialised, &mhz));
	}
}

/* A write that never ends (a writer that died mid-way): a bounded wait. */
TEST_F(page, a_write_that_never_ends)
{
	TSC_SYSCLOCK(c);
	uint64_t t0;

	ASSERT_EQ(0, init(&c, self->dir));
	self->p.seq = 5;
	fake_page_publish(_metadata, self->path, &self->p);
	t0 = now(CLOCK_MONOTONIC);
	expect_syscall_time(_metadata, &c);
	EXPECT_GT(now(CLOCK_MONOTONIC) - t0, 0);
	EXPECT_LT(now(CLOCK_MONOTONIC) - t0, 1000000000ull);
}

TEST_F(page, no_module)
{
	TSC_SYSCLOCK(c);

	ASSERT_EQ(0, unlink(self->path));
	ASSERT_EQ(0, init(&c, self->dir));
	EXPECT_EQ(TSC_SYSCLOCK_SYSCALL, c.path);
	EXPECT_NE(NULL, strstr(c.why, "module (1.1 or later) is not loaded")) TH_LOG("%s", c.why);
	expect_syscall_time(_metadata, &c);
}

/* A file too short for a page: no SIGBUS on reading it, clock_gettime() instead. */
TEST_F(page, a_short_file)
{
	TSC_SYSCLOCK(c);

	ASSERT_EQ(0, truncate(self->path, 0));
	ASSERT_EQ(0, init(&c, self->dir));
	EXPECT_EQ(TSC_SYSCLOCK_SYSCALL, c.path);
	EXPECT_NE(NULL, strstr(c.why, "not a file of a clock page's size")) TH_LOG("%s", c.why);
	expect_syscall_time(_metadata, &c);
}

/* The module went and came back: its old page says GONE, init maps the new. */
TEST_F(page, a_reloaded_module)
{
	TSC_SYSCLOCK(c);
	TSC_SYSCLOCK(d);

	ASSERT_EQ(0, init(&c, self->dir));
	self->p.flags = TSCFK_CLOCK_GONE;
	self->p.seq = 9;
	fake_page_publish(_metadata, self->path, &self->p);
	expect_syscall_time(_metadata, &c);
	/* A new module: a new file where the old one was. */
	ASSERT_EQ(0, unlink(self->path));
	self->p.flags = TSCFK_CLOCK_TSC;
	self->p.seq = 2;
	fake_page_publish(_metadata, self->path, &self->p);
	ASSERT_EQ(0, init(&d, self->dir));
	EXPECT_EQ(TSC_SYSCLOCK_KERNEL, d.path);
	expect_page_time(_metadata, &d, &self->clk);
	expect_syscall_time(_metadata, &c);
}

/*
 * Past its bound, a page ahead of the system's clocks (a disciplined
 * one's by its error) holds MONOTONIC and BOOTTIME at its value there,
 * so that they never go back; by more than TSC__FLOOR_MAX_NS (a suspend
 * the TSC counted), not: the system's.  REALTIME is never held: it steps
 * back with the system's.  The page here is stale, 2^34 ticks past its
 * bound; MONOTONIC and REALTIME are 8 ms ahead at the bound, BOOTTIME 1 s.
 */
TEST_F(page, stale_and_ahead_holds_monotonic_within_its_limit)
{
	const uint64_t bound = 1ull << 34, ahead = 8000000;
	struct tscfk_clock_map at = { 0 };
	TSC_SYSCLOCK(c);
	uint64_t base, mono, real, a, v, b;

	self->p.version = 2;
	self->p.max_cycles = bound;
	self->p.cycle_last = tsc_ticks_unordered() - 2 * bound;
	at.mult = self->p.mult;
	at.frac = self->p.frac;
	base = tscfk_clock_ns(&at, self->p.cycle_last, self->p.cycle_last + bound);
	mono = now(CLOCK_MONOTONIC) + ahead;
	real = now(CLOCK_REALTIME) + ahead;
	self->p.mono_off = mono - base;
	self->p.real_off = real - base;
	self->p.boot_off = now(CLOCK_BOOTTIME) + 1000000000 - base;
	fake_page_publish(_metadata, self->path, &self->p);
	ASSERT_EQ(0, init(&c, self->dir)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(bound, c.max_delta);
	/* Held where the system's is still below the page's value at its bound. */
	a = now(CLOCK_MONOTONIC);
	v = tsc_sysclock_monotonic(&c);
	b = now(CLOCK_MONOTONIC);
	if (b < mono) {
		EXPECT_EQ(mono, v);
	} else {
		EXPECT_TRUE(a <= v && v <= (b > mono ? b : mono));
	}
	/* REALTIME: clock_gettime()'s, never the page's value at its bound. */
	a = now(CLOCK_REALTIME);
	v = tsc_sysclock_realtime(&c);
	b = now(CLOCK_REALTIME);
	EXPECT_TRUE(a <= v && v <= b) TH_LOG("REALTIME %llu, the system's %llu..%llu, the page's %llu",
					     (unsigned long long)v, (unsigned long long)a,
					     (unsigned long long)b, (unsigned long long)real);
	/* A second ahead: beyond TSC__FLOOR_MAX_NS, the system's. */
	a = now(CLOCK_BOOTTIME);
	v = tsc_sysclock_boottime(&c);
	b = now(CLOCK_BOOTTIME);
	EXPECT_TRUE(a <= v && v <= b) TH_LOG("BOOTTIME %llu, the system's %llu..%llu",
					     (unsigned long long)v, (unsigned long long)a,
					     (unsigned long long)b);
}

TEST(sizes_and_options)
{
	struct tsc_sysclock c = { .sz = 8 };
	struct {
		struct tsc_sysclock_opts o;
		uint64_t newer;
	} n = { .o = { .sz = sizeof(n) }, .newer = 1 };

	EXPECT_EQ(-EINVAL, tsc_sysclock_init(&c, NULL));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "TSC_SYSCLOCK()"));
	/* A clock that failed to initialise still reads: clock_gettime(). */
	expect_syscall_time(_metadata, &c);
	c.sz = sizeof(c);
	EXPECT_EQ(-EINVAL, tsc_sysclock_init(&c, &n.o));
	n.newer = 0;
	/* Padding in a program built against 1.2.0's header: ignored. */
	n.o.tsc__reserved_1_2[2] = 0xab;
	EXPECT_EQ(0, tsc_sysclock_init(&c, &n.o)) TH_LOG("%s", tsc_last_error());
	EXPECT_NE(TSC_SYSCLOCK_NONE, c.path);
}

/*
 * Each version's fields fill their 8 bytes with no padding, which an
 * initialiser need not zero: a library of the version before would take
 * a stray byte there for a field it does not know.
 */
TEST(no_padding_in_a_versions_fields)
{
	struct tsc_sysclock_opts o;
	struct tsc_time_opts t;

	EXPECT_EQ(24u, offsetof(struct tsc_sysclock_opts, order));	/* 1.1 knew 24 */
	EXPECT_EQ(32u - 24, sizeof(o.order) + sizeof(o.helper_inherit) +
			    sizeof(o.tsc__reserved_1_2));
	EXPECT_EQ(offsetof(struct tsc_sysclock_opts, helper_inherit) + sizeof(o.helper_inherit),
		  offsetof(struct tsc_sysclock_opts, tsc__reserved_1_2));
	EXPECT_EQ(32u, offsetof(struct tsc_sysclock_opts, adjtimex_allowed));	/* 1.2 knew 32 */
	EXPECT_EQ(sizeof(o) - 32, sizeof(o.adjtimex_allowed) + sizeof(o.tsc__reserved_1_4));
	/* The front door's: 1.3 knew 16. */
	EXPECT_EQ(16u - 8, sizeof(t.exact_or_syscall) + sizeof(t.helper) +
			   sizeof(t.tsc__reserved_1_3));
	EXPECT_EQ(16u, offsetof(struct tsc_time_opts, adjtimex_allowed));
	EXPECT_EQ(sizeof(t) - 16, sizeof(t.adjtimex_allowed) + sizeof(t.tsc__reserved_1_4));
}

TEST_HARNESS_MAIN
