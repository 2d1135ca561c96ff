// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The bounded readers: each term of the bound from a kernel NTP state
 * the test gives (adjtimex() replaced), on a fake page and on
 * clock_gettime(); the bound never under the kernel's maxerror as the
 * kernel grows it; the flags; disruptions by cause, counted once, and a
 * disrupted bound unknown until the daemon speaks again; a hypervisor's
 * vmclock page (a file laid out as the device) and its disruptions.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#include "fake_sysfs.h"
#include "seccomp_filter.h"
#include "internal.h"
#include "tsc_clock_page.h"

#define PAGE 4096
#define DAY_NS 86400000000000ull

static uint64_t now(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The kernel's NTP state as the test sets it: maxerror grows 500 us at
 * each turn of a second of MONOTONIC since it was set, as the kernel's
 * does at each turn of its own; the calls are counted.
 */
static struct {
	pthread_mutex_t lock;
	int state, status, fail;
	unsigned int delay_us;	/* each call takes this long (a refresh held up) */
	unsigned int late_us;	/* the state's next call starts this late (a refresher preempted) */
	uint64_t turn_lag_ns;	/* a turn is added this long after it (the kernel's tick late) */
	int inside;		/* a call is under way */
	long maxerror_us, esterror_us, pll_offset, adjtime_us;
	uint64_t set_at;	/* MONOTONIC when maxerror was set */
	unsigned int calls;
} kern = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void kern_set(long maxerror_us, int status)
{
	pthread_mutex_lock(&kern.lock);
	kern.maxerror_us = maxerror_us;
	kern.status = status;
	kern.set_at = now(CLOCK_MONOTONIC);
	pthread_mutex_unlock(&kern.lock);
}

static long kern_maxerror_at(uint64_t mono)
{
	long m;

	pthread_mutex_lock(&kern.lock);
	mono -= mono > kern.turn_lag_ns ? kern.turn_lag_ns : mono;
	m = kern.maxerror_us + (mono / 1000000000 > kern.set_at / 1000000000 ?
				(long)(mono / 1000000000 - kern.set_at / 1000000000) * 500 : 0);
	pthread_mutex_unlock(&kern.lock);
	return m;
}

static int fake_adjtimex(struct timex *tx)
{
	int modes = (int)tx->modes;
	uint64_t m;

	if (modes == 0) {
		unsigned int late = __atomic_exchange_n(&kern.late_us, 0, __ATOMIC_RELAXED);

		if (late)
			usleep(late);
	}
	m = now(CLOCK_MONOTONIC);

	__atomic_fetch_add(&kern.calls, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&kern.delay_us, __ATOMIC_RELAXED)) {
		__atomic_store_n(&kern.inside, 1, __ATOMIC_RELEASE);
		usleep(kern.delay_us);
		__atomic_store_n(&kern.inside, 0, __ATOMIC_RELEASE);
	}
	if (kern.fail) {
		errno = EPERM;
		return -1;
	}
	memset(tx, 0, sizeof(*tx));
	tx->maxerror = kern_maxerror_at(m);
	tx->esterror = kern.esterror_us;
	tx->status = kern.status;
	tx->offset = modes == ADJ_OFFSET_SS_READ ? kern.adjtime_us : kern.pll_offset;
	return kern.state;
}

/*
 * A vmclock page: a file of one page, laid out as struct vmclock_abi
 * (<linux/vmclock-abi.h>, checked where the headers have it), mapped
 * writable; the library maps it read-only, as the device's.
 */
#define VM_SEQ		12
#define VM_MARKER	16
#define VM_FLAGS	24
#define VM_STATUS	34
#define VM_GEN		104
#define VM_GEN_PRESENT	(1u << 8)
#if __has_include(<linux/vmclock-abi.h>)
#include <linux/vmclock-abi.h>
#include <stddef.h>
_Static_assert(offsetof(struct vmclock_abi, seq_count) == VM_SEQ, "seq_count");
_Static_assert(offsetof(struct vmclock_abi, disruption_marker) == VM_MARKER, "marker");
_Static_assert(offsetof(struct vmclock_abi, flags) == VM_FLAGS, "flags");
_Static_assert(offsetof(struct vmclock_abi, clock_status) == VM_STATUS, "clock_status");
_Static_assert(offsetof(struct vmclock_abi, vm_generation_counter) == VM_GEN, "generation");
_Static_assert(VMCLOCK_FLAG_VM_GEN_COUNTER_PRESENT == VM_GEN_PRESENT, "flag");
#endif

static volatile unsigned char *fake_vmclock(const char *path, uint64_t marker)
{
	static const unsigned char head[12] = { 'V', 'C', 'L', 'K', 0, 0x10, 0, 0, 1, 0, 0xff, 0 };
	unsigned char pg[PAGE] = { 0 };
	void *m;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		return NULL;
	memcpy(pg, head, sizeof(head));	/* magic, size 4096, version 1, counter invalid */
	pg[VM_SEQ] = 2;
	memcpy(pg + VM_MARKER, &marker, 8);
	pg[VM_STATUS] = 2;		/* synchronized */
	if (write(fd, pg, PAGE) != PAGE) {
		close(fd);
		return NULL;
	}
	m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

/* Set a 64-bit field of the page, under its seqcount, as a hypervisor does. */
static void vm_set(volatile unsigned char *pg, size_t off, uint64_t v)
{
	volatile uint32_t *seq = (volatile uint32_t *)(pg + VM_SEQ);

	*seq += 1;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*(volatile uint64_t *)(pg + off) = v;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*seq += 1;
}

FIXTURE(bound) {
	char dir[64], path[128], vmpath[128];
	volatile unsigned char *vm;
	struct tsc_clock clk;
	struct tscfk_clock_page p;
	struct tsc_sysclock c;
};

/* A page whose MONOTONIC is the TSC clock's, REALTIME a second on (as sysclock_test's). */
FIXTURE_SETUP(bound)
{
	TSC_OPTS(o, .source = TSC_SOURCE_CALIBRATION, .calibrate_max_ms = 50);
	TSC_SYSCLOCK_OPTS(so, .sysfs_root = self->dir);

	fake_root(_metadata, self->dir, sizeof(self->dir), 0);
	fake_put(_metadata, self->dir, "/devices/system/cpu/online", "0\n");
	snprintf(self->path, sizeof(self->path), "%s/devices/system/cpu/tsc/clock_page",
		 self->dir);
	self->clk.sz = sizeof(self->clk);
	ASSERT_EQ(0, tsc_clock_init(&self->clk, &o)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(0, self->clk.conv.ns_int) TH_LOG("a TSC under 1 GHz: the fixture needs 1 GHz up");
	self->p = (struct tscfk_clock_page){
		.version = 1, .flags = TSCFK_CLOCK_TSC, .seq = 2, .generation = 7,
		.mult = self->clk.conv.ns_frac, .frac = 0,
		.mono_off = -self->clk.mono_off,
	};
	self->p.real_off = self->p.mono_off + 1000000000;
	self->p.boot_off = self->p.mono_off + 60000000000;
	fake_put(_metadata, self->dir, "/devices/system/cpu/tsc/clock_page", "");
	fake_page_publish(_metadata, self->path, &self->p);
	/* Every test here reads a vmclock page too: nothing else moves its marker. */
	snprintf(self->vmpath, sizeof(self->vmpath), "%s/vmclock0", self->dir);
	self->vm = fake_vmclock(self->vmpath, 5);
	ASSERT_NE(NULL, self->vm);
	tsc__test_vmclock_path = self->vmpath;
	kern.fail = 0;
	kern.delay_us = 0;
	kern.late_us = 0;
	kern.turn_lag_ns = 0;
	kern.state = TIME_OK;
	kern.esterror_us = 40;
	kern.pll_offset = 0;
	kern.adjtime_us = 0;
	kern_set(2000, STA_PLL | STA_NANO);
	tsc__test_adjtimex = fake_adjtimex;
	tsc__test_realtime_step_ns = 0;
	tsc__test_sleep_ns = 0;
	tsc__test_raw_ppm = 0;
	self->c.sz = sizeof(self->c);
	ASSERT_EQ(0, tsc_sysclock_init(&self->c, &so)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_KERNEL, self->c.path) TH_LOG("%s", self->c.why);
}

FIXTURE_TEARDOWN(bound)
{
	tsc__test_adjtimex = NULL;
	tsc__test_realtime_step_ns = 0;
	tsc__test_sleep_ns = 0;
	tsc__test_raw_ppm = 0;
	remove_root(self->dir);
}

/* The page's REALTIME for the TSC clock's MONOTONIC m. */
static uint64_t page_real(const struct tscfk_clock_page *p, uint64_t m)
{
	return m + (p->real_off - p->mono_off);
}

/* A bounded reading: its time between the page's REALTIME before and after it, symmetric. */
static void read_checked(struct __test_metadata *_metadata, struct tsc_time_bound *b,
			 const struct tsc_sysclock *c, const struct tsc_clock *clk,
			 const struct tscfk_clock_page *p)
{
	uint64_t a = page_real(p, tsc_clock_now(clk));

	tsc_sysclock_realtime_bounded(c, b);
	ASSERT_LE(a, b->now);
	ASSERT_LE(b->now, page_real(p, tsc_clock_now(clk)) + 1);
	if (b->latest == UINT64_MAX)
		return;
	ASSERT_EQ(b->latest - b->now, b->now - b->earliest);
}

/* Pure: the terms from the NTP state, and the flags. */
TEST(base_from_the_ntp_state)
{
	struct tsc__ntp n = { .known = true, .state = TIME_OK, .status = STA_PLL,
			      .maxerror_us = 1500, .esterror_us = 30, .slewing_ns = 2500 };
	uint64_t noon = 20000 * DAY_NS + DAY_NS / 2;
	struct tsc__bound_base b;

	tsc__bound_base(&n, 700, 1, noon, &b);
	EXPECT_EQ(0u, b.flags);
	EXPECT_EQ(1500000u, b.maxerror_ns);
	EXPECT_EQ(30000u, b.esterror_ns);
	EXPECT_EQ(2500u, b.slewing_ns);
	EXPECT_EQ(1u, b.reading_ns);
	EXPECT_EQ(700u, b.skew_ns);

	tsc__bound_base(&n, UINT64_MAX, 0, noon, &b);
	EXPECT_EQ((uint32_t)TSC_BOUND_SKEW_UNKNOWN, b.flags);
	EXPECT_EQ(0u, b.skew_ns);

	/* Unsynchronised: STA_UNSYNC, maxerror at the kernel's 16 s, or no state at all. */
	n.status = STA_UNSYNC;
	tsc__bound_base(&n, 0, 0, noon, &b);
	EXPECT_EQ((uint32_t)TSC_BOUND_UNSYNCED, b.flags);
	n.status = 0;
	n.maxerror_us = 16000000;
	tsc__bound_base(&n, 0, 0, noon, &b);
	EXPECT_EQ((uint32_t)TSC_BOUND_UNSYNCED, b.flags);
	n = (struct tsc__ntp){ .known = false };
	tsc__bound_base(&n, 0, 0, noon, &b);
	EXPECT_EQ((uint32_t)TSC_BOUND_UNSYNCED, b.flags);

	/* A leap second: from a second before the day's end, or the one just gone. */
	n = (struct tsc__ntp){ .known = true, .status = STA_INS, .maxerror_us = 10 };
	tsc__bound_base(&n, 0, 0, noon, &b);
	EXPECT_EQ((uint32_t)TSC_BOUND_LEAP, b.flags);
	EXPECT_EQ(20001 * DAY_NS - 1000000000, b.leap_from);
	n.status = STA_DEL;
	tsc__bound_base(&n, 0, 0, 20001 * DAY_NS + 400000000, &b);
	EXPECT_EQ((uint32_t)TSC_BOUND_LEAP, b.flags);
	EXPECT_EQ(20001 * DAY_NS - 1000000000, b.leap_from);
	n.status = 0;
	n.state = TIME_OOP;
	tsc__bound_base(&n, 0, 0, 20001 * DAY_NS - 300000000, &b);
	EXPECT_EQ((uint32_t)TSC_BOUND_LEAP, b.flags);
}

/* adjtimex()'s answers: maxerror, esterror, and what is left to slew in either unit. */
TEST(ntp_state_read)
{
	struct tsc__ntp n;

	tsc__test_adjtimex = fake_adjtimex;
	kern.fail = 0;
	kern.state = TIME_INS;
	kern.esterror_us = 77;
	kern.adjtime_us = -300;
	kern.pll_offset = -2500;
	kern_set(1234, STA_PLL | STA_NANO | STA_INS);
	tsc__ntp_read(&n);
	EXPECT_TRUE(n.known);
	EXPECT_EQ(TIME_INS, n.state);
	EXPECT_EQ(1234, n.maxerror_us);
	EXPECT_EQ(77, n.esterror_us);
	EXPECT_EQ(300000u + 2500u, n.slewing_ns);
	kern_set(1234, STA_PLL);	/* the PLL's offset in us */
	tsc__ntp_read(&n);
	EXPECT_EQ(300000u + 2500000u, n.slewing_ns);
	kern.fail = 1;
	tsc__ntp_read(&n);
	EXPECT_FALSE(n.known);
	tsc__test_adjtimex = NULL;
}

/* On the page: each term, their sum, the fast path's and the slow path's alike. */
TEST_F(bound, the_terms_add_up)
{
	TSC_BOUND_TERMS(t);
	struct tsc_time_bound b;
	uint64_t fixed;

	kern.pll_offset = 3000;
	kern.adjtime_us = 0;
	kern_set(2000, STA_PLL | STA_NANO);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(0u, b.flags) TH_LOG("flags %#x", b.flags);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(2000000u, t.maxerror_ns);
	EXPECT_EQ(3000u, t.slewing_ns);
	EXPECT_EQ(1u, t.reading_ns);
	EXPECT_EQ(0u, t.skew_ns);	/* one CPU online */
	EXPECT_EQ(0u, t.leap_ns);
	EXPECT_EQ(40000u, t.esterror_ns);
	EXPECT_LE(500000u, t.growth_ns);
	EXPECT_EQ(t.maxerror_ns + t.growth_ns + t.slewing_ns + t.reading_ns + t.skew_ns +
		  t.leap_ns, t.bound_ns);
	/* The growth: 500 ppm of the age, and the kernel's next step. */
	EXPECT_LE(500000u + t.age_ns / 2000, t.growth_ns);
	EXPECT_GE(500000u + t.age_ns / 2000 + 2, t.growth_ns);
	/* The fast path reads a fresh state. */
	ASSERT_EQ(1, tsc__bounded_read(&self->c.page, &self->c.use_rdtscp, &self->c.max_delta,
				       &self->c.bound, &b));
	/* The fast path's bound against the terms': only their growth apart. */
	fixed = t.maxerror_ns + 500000 + t.slewing_ns + t.reading_ns;
	for (int i = 0; i < 1000; i++) {
		read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
		ASSERT_LE(fixed, b.latest - b.now);
		ASSERT_GE(fixed + 1000000, b.latest - b.now);
	}
}

/* Readers between refreshes read the state; the first a second on refreshes it. */
TEST_F(bound, refreshed_by_a_reader_once_a_second)
{
	struct tsc_time_bound b;
	unsigned int calls;

	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	calls = __atomic_load_n(&kern.calls, __ATOMIC_RELAXED);
	for (int i = 0; i < 100000; i++)
		tsc_sysclock_realtime_bounded(&self->c, &b);
	EXPECT_GE(calls + 2, __atomic_load_n(&kern.calls, __ATOMIC_RELAXED))
		TH_LOG("adjtimex() called in the fast path");
	usleep(1100000);
	calls = __atomic_load_n(&kern.calls, __ATOMIC_RELAXED);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(calls + 2, __atomic_load_n(&kern.calls, __ATOMIC_RELAXED))
		TH_LOG("a second on, no refresh");
}

/*
 * Never under the kernel's maxerror at the same moment, which grows 500
 * us at each turn of a second, between refreshes too: read for 2.5 s.
 */
TEST_F(bound, never_under_the_kernels_maxerror)
{
	uint64_t end = now(CLOCK_MONOTONIC) + 2500000000u;
	unsigned int reads = 0;

	kern_set(1000, STA_PLL | STA_NANO);
	while (now(CLOCK_MONOTONIC) < end) {
		struct tsc_time_bound b;
		uint64_t m;

		read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
		m = now(CLOCK_MONOTONIC);
		ASSERT_LE((uint64_t)kern_maxerror_at(m) * 1000, b.latest - b.now)
			TH_LOG("read %u: bound %llu ns under the kernel's maxerror %ld us", reads,
			       (unsigned long long)(b.latest - b.now), kern_maxerror_at(m));
		/* And under what the kernel's model allows: 500 ppm since the daemon spoke. */
		ASSERT_LE(1000000 + (m - kern.set_at) / 2000, b.latest - b.now)
			TH_LOG("read %u: bound %llu ns, %llu ns since maxerror was set", reads,
			       (unsigned long long)(b.latest - b.now),
			       (unsigned long long)(m - kern.set_at));
		reads++;
	}
	EXPECT_LT(1000u, reads);
}

static int terms_err;

static void *terms_now(void *arg)
{
	TSC_BOUND_TERMS(t);

	terms_err = tsc_sysclock_bound_terms(arg, &t);
	return NULL;
}

/*
 * A refresh held up (another thread inside adjtimex() for 2.5 s): the
 * others read on from the state as it was, its bound grown, and say it
 * is stale once it is 2 s old.
 */
TEST_F(bound, a_refresh_held_up_is_stale)
{
	struct tsc_time_bound b, first;
	pthread_t th;

	read_checked(_metadata, &first, &self->c, &self->clk, &self->p);
	EXPECT_FALSE(first.flags & TSC_BOUND_STALE);
	usleep(1100000);
	kern.delay_us = 2500000;
	ASSERT_EQ(0, pthread_create(&th, NULL, terms_now, &self->c));
	for (int i = 0; i < 1000 && !__atomic_load_n(&kern.inside, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	ASSERT_TRUE(__atomic_load_n(&kern.inside, __ATOMIC_ACQUIRE));
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_FALSE(b.flags & TSC_BOUND_STALE) TH_LOG("1.1 s old: not yet");
	usleep(1000000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_TRUE(b.flags & TSC_BOUND_STALE) TH_LOG("2.1 s old: flags %#x", b.flags);
	EXPECT_LE(first.latest - first.now + 1000000, b.latest - b.now) TH_LOG("grown 500 ppm of 2 s");
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_EQ(0, terms_err);
	kern.delay_us = 0;
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_FALSE(b.flags & TSC_BOUND_STALE) TH_LOG("refreshed: flags %#x", b.flags);
}

/* Unsynchronised or not readable: [0, UINT64_MAX], flagged. */
TEST_F(bound, unsynchronised_is_unbounded)
{
	struct tsc_time_bound b;

	kern_set(2000, STA_UNSYNC);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(0u, b.earliest);
	EXPECT_EQ(UINT64_MAX, b.latest);
	EXPECT_TRUE(b.flags & TSC_BOUND_UNSYNCED);
}

TEST(unreadable_ntp_state_is_unbounded)
{
	TSC_SYSCLOCK(c);
	struct tsc_time_bound b;

	tsc__test_adjtimex = fake_adjtimex;
	kern.fail = 1;
	ASSERT_EQ(0, tsc_sysclock_init(&c, NULL));
	tsc_sysclock_realtime_bounded(&c, &b);
	EXPECT_EQ(0u, b.earliest);
	EXPECT_EQ(UINT64_MAX, b.latest);
	EXPECT_TRUE(b.flags & TSC_BOUND_UNSYNCED);
	kern.fail = 0;
	tsc__test_adjtimex = NULL;
}

/* Whether this process started under a seccomp filter (a container's): the tests below need none. */
static bool filtered_already(void)
{
	char buf[4096] = "";
	int fd = open("/proc/self/status", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

	if (fd >= 0)
		close(fd);
	return n <= 0 || !strstr(buf, "\nSeccomp:\t0\n");
}

/*
 * Under a seccomp filter (this test's process only: the harness forks
 * each), adjtimex() is called only once the caller says the filter
 * allows it, through either options struct; until then the NTP state is
 * unknown, so the bound is.  A filter added after the word is not taken
 * for allowed.
 */
TEST(a_seccomp_filter_needs_the_callers_word)
{
	TSC_SYSCLOCK(c);
	TSC_SYSCLOCK_OPTS(plain, .sysfs_root = "/nonexistent");
	TSC_SYSCLOCK_OPTS(o, .sysfs_root = "/nonexistent", .adjtimex_allowed = true);
	struct tsc_time_bound b;
	struct tsc__ntp n;

	if (filtered_already())
		SKIP(return, "this process started under a seccomp filter: none to add and compare");
	tsc__ntp_read(&n);
	ASSERT_TRUE(n.known) TH_LOG("no filter yet: adjtimex() is called");
	ASSERT_EQ(0, seccomp_filter_adjtimex(SECCOMP_RET_ALLOW));
	tsc__ntp_read(&n);
	EXPECT_FALSE(n.known) TH_LOG("a filter, and no word: not called");
	ASSERT_EQ(0, tsc_sysclock_init(&c, &plain));
	tsc_sysclock_realtime_bounded(&c, &b);
	EXPECT_TRUE(b.flags & TSC_BOUND_UNSYNCED);
	tsc__ntp_read(&n);
	EXPECT_FALSE(n.known) TH_LOG("options without the word: still not called");
	ASSERT_EQ(0, tsc_sysclock_init(&c, &o));
	tsc__ntp_read(&n);
	EXPECT_TRUE(n.known) TH_LOG("the caller's word: called");
	ASSERT_EQ(0, seccomp_filter_adjtimex(SECCOMP_RET_ALLOW));
	tsc__ntp_read(&n);
	EXPECT_FALSE(n.known) TH_LOG("a filter added after the word: not called");
	tsc_sysclock_fini(&c);
}

TEST(a_seccomp_filter_needs_the_callers_word_front_door)
{
	TSC_TIME_OPTS(o, .adjtimex_allowed = true);
	struct tsc__ntp n;

	if (filtered_already())
		SKIP(return, "this process started under a seccomp filter: none to add and compare");
	ASSERT_EQ(0, seccomp_filter_adjtimex(SECCOMP_RET_ALLOW));
	tsc__ntp_read(&n);
	EXPECT_FALSE(n.known);
	ASSERT_EQ(0, tsc_time_setup(&o)) TH_LOG("%s", tsc_last_error());
	tsc__ntp_read(&n);
	EXPECT_TRUE(n.known);
}

/* The module's skew bound, with every online CPU measured; unknown otherwise. */
TEST_F(bound, the_cpus_skew)
{
	TSC_BOUND_TERMS(t);
	const char *d = self->dir;

	fake_put(_metadata, d, "/devices/system/cpu/online", "0-1\n");
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_TRUE(t.flags & TSC_BOUND_SKEW_UNKNOWN) TH_LOG("two CPUs, no module: unknown");
	fake_put(_metadata, d, "/devices/system/cpu/tsc/generation", "3\n");
	fake_put(_metadata, d, "/devices/system/cpu/tsc/max_skew_ticks", "2500\n");
	fake_put(_metadata, d, "/devices/system/cpu/cpu0/tsc_freq_khz", "2000000\n");
	fake_put(_metadata, d, "/devices/system/cpu/cpu0/tsc/status", "reference\n");
	fake_put(_metadata, d, "/devices/system/cpu/cpu1/tsc/status", "unmeasured\n");
	usleep(1100000);	/* the next refresh reads them */
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_TRUE(t.flags & TSC_BOUND_SKEW_UNKNOWN) TH_LOG("cpu1 unmeasured: unknown");
	fake_put(_metadata, d, "/devices/system/cpu/cpu1/tsc/status", "measured\n");
	fake_put(_metadata, d, "/devices/system/cpu/tsc/generation", "4\n");
	usleep(1100000);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_FALSE(t.flags & TSC_BOUND_SKEW_UNKNOWN);
	/* 2500 ticks at 2 GHz: 1250 ns, and (1 + 500 ppm) / (1 - 500 ppm) of it: 1251.25. */
	EXPECT_EQ(1252u, t.skew_ns);
	EXPECT_EQ(t.maxerror_ns + t.growth_ns + t.slewing_ns + t.reading_ns + 1252, t.bound_ns);
}

/* The next reading refreshes: the page's generation moved, nothing else. */
static void refresh_soon(struct __test_metadata *_metadata, FIXTURE_DATA(bound) *self)
{
	self->p.generation++;
	self->p.seq += 2;
	fake_page_publish(_metadata, self->path, &self->p);
}

/* REALTIME stepped by ns on the page, as the kernel rewrites it. */
static void page_step(struct __test_metadata *_metadata, FIXTURE_DATA(bound) *self, int64_t ns)
{
	self->p.real_off += ns;
	refresh_soon(_metadata, self);
}

/* The daemon states maxerror 800 us; a second on, the next refresh has read it. */
static void daemon_speaks(void)
{
	kern_set(800, STA_PLL | STA_NANO);
	usleep(1100000);
}

/* The daemon states maxerror 800 us; b: a reading after the next refresh, a second on. */
static void read_after_the_daemon_spoke(struct __test_metadata *_metadata,
					FIXTURE_DATA(bound) *self, struct tsc_time_bound *b)
{
	daemon_speaks();
	read_checked(_metadata, b, &self->c, &self->clk, &self->p);
}

/* The skew term after a refresh: its ns, or UINT64_MAX with the flag. */
static uint64_t skew_now(struct __test_metadata *_metadata, FIXTURE_DATA(bound) *self)
{
	TSC_BOUND_TERMS(t);

	refresh_soon(_metadata, self);
	EXPECT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	if (t.flags & TSC_BOUND_SKEW_UNKNOWN) {
		EXPECT_EQ(0u, t.skew_ns);
		return UINT64_MAX;
	}
	if (t.bound_ns != UINT64_MAX)
		EXPECT_EQ(t.maxerror_ns + t.growth_ns + t.slewing_ns + t.reading_ns + t.skew_ns +
			  t.leap_ns, t.bound_ns);
	return t.skew_ns;
}

/* Two CPUs online under the fixture's root, each with its topology directory. */
static void two_cpus(struct __test_metadata *_metadata, const char *d)
{
	fake_put(_metadata, d, "/devices/system/cpu/online", "0-1\n");
	for (int cpu = 0; cpu < 3; cpu++) {
		char rel[64];

		snprintf(rel, sizeof(rel), "/devices/system/cpu/cpu%d/topology/core_id", cpu);
		fake_put(_metadata, d, rel, "0\n");
	}
}

/*
 * A measurement of ticks for CPUs 0-1 under root, proven or not, 100 ms
 * long: long enough that its rate's bound (the two TSC readings may be
 * ticks apart) adds under 100 ppm.
 */
static void note(struct __test_metadata *_metadata, const char *root, uint64_t ticks, bool proven)
{
	struct tsc__skew_key key;
	cpu_set_t cpus;

	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	CPU_SET(1, &cpus);
	ASSERT_EQ(0, tsc__skew_key(root, &key, true));
	usleep(100000);
	tsc__bound_note_skew(root, &key, &cpus, ticks, proven);
}

/*
 * The skew term of 25000 ticks (10 us at 2.5 GHz): never under them at
 * the TSC's rate and TSC_BOUND_DRIFT_PPM more (tsc__skew_ns() adds about
 * twice that to MONOTONIC's rate, which an NTP daemon may have a few
 * hundred ppm off tsc_hz()'s), nor more than 1% over.
 */
static bool is_25000_ticks(struct __test_metadata *_metadata, uint64_t skew)
{
	double ns = 25000e9 / (double)tsc_hz();

	EXPECT_LE(ns * (1 + TSC_BOUND_DRIFT_PPM * 1e-6), (double)skew);
	EXPECT_GE(ns * 1.01 + 2, (double)skew);
	return skew != UINT64_MAX;
}

/* The module's files: CPUs 0-1 measured, 1000 ticks apart at 2 GHz, generation 3. */
static void module_measured(struct __test_metadata *_metadata, const char *d)
{
	fake_put(_metadata, d, "/devices/system/cpu/tsc/generation", "3\n");
	fake_put(_metadata, d, "/devices/system/cpu/tsc/max_skew_ticks", "1000\n");
	fake_put(_metadata, d, "/devices/system/cpu/cpu0/tsc_freq_khz", "2000000\n");
	fake_put(_metadata, d, "/devices/system/cpu/cpu0/tsc/status", "reference\n");
	fake_put(_metadata, d, "/devices/system/cpu/cpu1/tsc/status", "measured\n");
}

/* The module's tsc/measured_since_ns: MONOTONIC now, plus off (in s). */
static void measured_since(struct __test_metadata *_metadata, const char *d, int off)
{
	struct timespec ts;
	char v[32];

	ASSERT_EQ(0, clock_gettime(CLOCK_MONOTONIC, &ts));
	snprintf(v, sizeof(v), "%lld\n", ((long long)ts.tv_sec + off) * 1000000000 + ts.tv_nsec);
	fake_put(_metadata, d, "/devices/system/cpu/tsc/measured_since_ns", v);
}

/*
 * Without the module's measurement, the library's own (tsc_report_get()
 * in userspace) gives the skew term: the last one, proven, for its root,
 * while the same CPUs stay online, until a sleep or a migration; the
 * module's, where it has one, first.
 */
TEST_F(bound, the_librarys_own_skew)
{
	const char *d = self->dir;
	char other[64], cmd[512];
	struct tsc__skew_key key;
	uint64_t skew;

	ASSERT_NE(0u, tsc_hz()) TH_LOG("%s", tsc_last_error());
	two_cpus(_metadata, d);
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("two CPUs, neither measured");
	note(_metadata, d, 25000, true);
	skew = skew_now(_metadata, self);
	TH_LOG("25000 ticks at %llu Hz: %llu ns", (unsigned long long)tsc_hz(),
	       (unsigned long long)skew);
	EXPECT_TRUE(is_25000_ticks(_metadata, skew));

	/* A later measurement that proved nothing takes its place. */
	note(_metadata, d, 25000, false);
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("a measurement in doubt");
	note(_metadata, d, 25000, true);
	EXPECT_TRUE(is_25000_ticks(_metadata, skew_now(_metadata, self)));

	/* Other CPUs online, as many: unknown; the measured ones back: known. */
	fake_put(_metadata, d, "/devices/system/cpu/online", "0,2\n");
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("cpu2 was never measured");
	fake_put(_metadata, d, "/devices/system/cpu/online", "0-1\n");
	EXPECT_TRUE(is_25000_ticks(_metadata, skew_now(_metadata, self)));

	/* cpu1 offline and back: its topology directory made anew. */
	snprintf(cmd, sizeof(cmd), "cd %s/devices/system/cpu/cpu1 && mkdir topology.new && "
		 "rm -r topology && mv topology.new topology", d);
	ASSERT_EQ(0, system(cmd));
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("cpu1 went offline since");
	note(_metadata, d, 25000, true);
	EXPECT_TRUE(is_25000_ticks(_metadata, skew_now(_metadata, self)));

	/* A sleep since: the TSCs may have restarted. */
	tsc__test_sleep_ns = 3000000000;
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("measured before a sleep");
	note(_metadata, d, 25000, true);
	EXPECT_TRUE(is_25000_ticks(_metadata, skew_now(_metadata, self)));

	/* A migration, by the marker or by the generation. */
	vm_set(self->vm, VM_MARKER, 6);
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("measured before a migration");
	vm_set(self->vm, VM_GEN, 1);
	vm_set(self->vm, VM_FLAGS, VM_GEN_PRESENT);
	note(_metadata, d, 25000, true);
	EXPECT_TRUE(is_25000_ticks(_metadata, skew_now(_metadata, self)));
	vm_set(self->vm, VM_GEN, 2);
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("measured before a VM generation");

	/* Something moved during the measurement: no note. */
	ASSERT_EQ(0, tsc__skew_key(d, &key, true));
	tsc__test_sleep_ns += 3000000000;
	{
		cpu_set_t cpus = key.online;

		tsc__bound_note_skew(d, &key, &cpus, 25000, true);
		EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("a sleep during it");
		/* Not every CPU online measured: no note. */
		ASSERT_EQ(0, tsc__skew_key(d, &key, true));
		CPU_CLR(1, &cpus);
		tsc__bound_note_skew(d, &key, &cpus, 25000, true);
		EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("cpu1 not measured");
	}

	/* Another root's measurement: this root's is gone. */
	note(_metadata, d, 25000, true);
	EXPECT_TRUE(is_25000_ticks(_metadata, skew_now(_metadata, self)));
	fake_root(_metadata, other, sizeof(other), 0);
	two_cpus(_metadata, other);
	note(_metadata, other, 25000, true);
	remove_root(other);
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("the note is another root's");

	/* The module's measurement first, where it has one (and since the migrations above). */
	note(_metadata, d, 25000, true);
	measured_since(_metadata, d, 0);
	module_measured(_metadata, d);
	EXPECT_EQ(501u, skew_now(_metadata, self)) TH_LOG("1000 ticks at 2 GHz, 500 ppm more");
}

/*
 * A migration: the module's skew, measured on the host before, is unknown
 * until the module has measured every CPU again, after the migration was
 * seen (tsc/measured_since_ns), whatever its generation says.
 */
TEST_F(bound, the_modules_skew_after_a_migration)
{
	const char *d = self->dir;

	two_cpus(_metadata, d);
	module_measured(_metadata, d);
	measured_since(_metadata, d, -1);
	EXPECT_EQ(501u, skew_now(_metadata, self));

	vm_set(self->vm, VM_MARKER, 6);
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("measured before a migration");
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("and still, at the next refresh");
	/* A CPU measured alone: the others' offsets are as old. */
	fake_put(_metadata, d, "/devices/system/cpu/tsc/generation", "4\n");
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("only the generation moved");
	/* A module that cannot say when: unknown. */
	fake_set(_metadata, d, "/devices/system/cpu/tsc/measured_since_ns", NULL);
	fake_put(_metadata, d, "/devices/system/cpu/tsc/generation", "5\n");
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("no measured_since_ns");
	/* Every CPU measured again: known again, and stays so. */
	measured_since(_metadata, d, 0);
	fake_put(_metadata, d, "/devices/system/cpu/tsc/generation", "6\n");
	EXPECT_EQ(501u, skew_now(_metadata, self));
	measured_since(_metadata, d, -1);
	EXPECT_EQ(501u, skew_now(_metadata, self)) TH_LOG("a second migration is not yet seen");

	/* The VM generation moved (a snapshot restored): the same. */
	vm_set(self->vm, VM_GEN, 1);
	vm_set(self->vm, VM_FLAGS, VM_GEN_PRESENT);
	EXPECT_EQ(501u, skew_now(_metadata, self)) TH_LOG("the first generation read is no change");
	vm_set(self->vm, VM_GEN, 2);
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("measured before a VM generation");
	measured_since(_metadata, d, 0);
	fake_put(_metadata, d, "/devices/system/cpu/tsc/generation", "7\n");
	EXPECT_EQ(501u, skew_now(_metadata, self));

	/* One CPU online: no skew to lose. */
	vm_set(self->vm, VM_MARKER, 7);
	fake_put(_metadata, d, "/devices/system/cpu/online", "0\n");
	fake_put(_metadata, d, "/devices/system/cpu/tsc/generation", "8\n");
	EXPECT_EQ(0u, skew_now(_metadata, self)) TH_LOG("one CPU, after a migration");
	fake_put(_metadata, d, "/devices/system/cpu/online", "0-1\n");
	fake_put(_metadata, d, "/devices/system/cpu/tsc/generation", "9\n");
	EXPECT_EQ(UINT64_MAX, skew_now(_metadata, self)) TH_LOG("cpu1 back, not measured since");
}

/*
 * A migration after the clock was set up and before its first refresh:
 * counted by that refresh, and the module's skew unknown.
 */
TEST_F(bound, a_migration_before_the_first_refresh)
{
	TSC_BOUND_TERMS(t);
	const char *d = self->dir;

	two_cpus(_metadata, d);
	module_measured(_metadata, d);
	measured_since(_metadata, d, -1);
	vm_set(self->vm, VM_MARKER, 6);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_EQ(1u, t.by_cause[TSC_DISRUPTION_VMCLOCK]);
	EXPECT_TRUE(t.flags & TSC_BOUND_SKEW_UNKNOWN);
	EXPECT_TRUE(t.flags & TSC_BOUND_DISRUPTED);
}

/*
 * A real measurement (tsc_report_get() in userspace, CPUs 0 and 1),
 * where it proves the CPUs: the skew term at least its max_skew_ticks.
 */
TEST_F(bound, the_librarys_own_skew_measured)
{
	TSC_REPORT_OPTS(ro, .sysfs_root = self->dir, .userspace = true, .max_ms = 300);
	struct tsc_report r;
	double measured;
	uint64_t skew;
	cpu_set_t set;

	ASSERT_EQ(0, sched_getaffinity(0, sizeof(set), &set));
	if (!CPU_ISSET(0, &set) || !CPU_ISSET(1, &set))
		SKIP(return, "CPUs 0 and 1 are not both this process's: no pair to measure");
	ASSERT_NE(0u, tsc_hz()) TH_LOG("%s", tsc_last_error());
	two_cpus(_metadata, self->dir);
	ASSERT_EQ(0, tsc_report_get(&r, &ro)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_OFFSETS_USERSPACE, r.offsets_source);
	measured = (double)r.max_skew_ticks * 1e9 / (double)tsc_hz();
	skew = skew_now(_metadata, self);
	TH_LOG("%s; skew term %llu ns", r.verdict, (unsigned long long)skew);
	if (r.trustworthy) {
		EXPECT_NE(UINT64_MAX, skew);
		EXPECT_LE(measured * (1 + TSC_BOUND_DRIFT_PPM * 1e-6), (double)skew);
	} else {
		EXPECT_EQ(UINT64_MAX, skew) TH_LOG("a measurement in doubt gives no skew");
	}
	tsc_report_free(&r);
}

/* Two keys' brackets, t ticks and [m1, m2] ns apart at most. */
static uint64_t skew_ns_of(uint64_t t, int64_t m, int64_t width, uint64_t ticks)
{
	struct tsc__skew_key a = { .t = 1000, .mono_before = 5000, .mono_after = 5000 + width };
	struct tsc__skew_key b = { .t = 1000 + t, .mono_before = 5000 + m,
				   .mono_after = 5000 + m + width };

	return tsc__skew_ns(&a, &b, ticks);
}

/*
 * Pure: the skew's ns at the most ns per tick the brackets allow (twice
 * the skew off the ticks: each bracket may straddle two CPUs), and the
 * rate's allowance, (1e6 + 500) / (1e6 - 500).
 */
TEST(the_skews_rate)
{
	/* 1e9 ticks in 0.5 s, brackets exact: 0.5 ns per tick; 1000 ticks 500 ns, 500.5 more. */
	EXPECT_EQ((uint64_t)ceil(1000 * 500000000.0 / (1e9 - 2000) * 1000500 / 999500) + 1,
		  skew_ns_of(1000000000, 500000000, 0, 1000));
	EXPECT_EQ(502u, skew_ns_of(1000000000, 500000000, 0, 1000));
	/* Brackets 100 ns wide: 100 ns more in the interval's ns. */
	EXPECT_EQ((uint64_t)ceil(1000 * 500000100.0 / (1e9 - 2000) * 1000500 / 999500) + 1,
		  skew_ns_of(1000000000, 500000000, 100, 1000));
	/* An interval no longer than twice the skew, or going back: unknown. */
	EXPECT_EQ(UINT64_MAX, skew_ns_of(2000, 1000, 0, 1000));
	EXPECT_NE(UINT64_MAX, skew_ns_of(2002, 1000, 0, 1000));
	EXPECT_EQ(UINT64_MAX, skew_ns_of(0, 1000, 0, 1000));
	EXPECT_EQ(UINT64_MAX, skew_ns_of(1000000, 0, 0, 10));
	EXPECT_EQ(UINT64_MAX, skew_ns_of(1000000, -100, 0, 10));
	/* Ticks that would overflow the interval, or a skew past 1e15 ns: unknown. */
	EXPECT_EQ(UINT64_MAX, skew_ns_of(1000000, 1000, 0, UINT64_MAX / 2 + 1));
	EXPECT_EQ(UINT64_MAX, skew_ns_of(UINT64_MAX - 1000, INT64_MAX / 2, 0, UINT64_MAX / 8));
}

/* Within a second of a leap second, a second wider; the flag all the day. */
TEST_F(bound, a_leap_second)
{
	TSC_BOUND_TERMS(t);
	struct tsc_time_bound b;
	uint64_t r = page_real(&self->p, tsc_clock_now(&self->clk));
	uint64_t to_midnight = (r / DAY_NS + 1) * DAY_NS - r;

	kern_set(2000, STA_PLL | STA_NANO | STA_INS);
	usleep(1100000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_TRUE(b.flags & TSC_BOUND_LEAP);
	EXPECT_GT(1000000000u, b.latest - b.now);
	/* REALTIME half a second before midnight. */
	self->p.real_off += to_midnight - 500000000 - 1100000000;
	self->p.seq += 2;
	fake_page_publish(_metadata, self->path, &self->p);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_TRUE(b.flags & TSC_BOUND_LEAP);
	EXPECT_LT(1000000000u, b.latest - b.now);
	/* The slow path's terms say so too. */
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_EQ(1000000000u, t.leap_ns);
	EXPECT_EQ(t.maxerror_ns + t.growth_ns + t.slewing_ns + t.reading_ns + t.skew_ns +
		  t.leap_ns, t.bound_ns);
}

/* A refresh of the state, RATE_MIN_NS and more after the last: the terms then. */
static void judged_later(struct __test_metadata *_metadata, FIXTURE_DATA(bound) *self,
			 struct tsc_bound_terms *t)
{
	usleep(600000);
	refresh_soon(_metadata, self);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, t));
}

/*
 * The TSC's rate against MONOTONIC_RAW, on the kernel's page: steady,
 * nothing; 2000 ppm off from a refresh on, one disruption at the next
 * refresh half a second or more later, and no bound until the daemon
 * speaks; steady at the new rate, nothing more.
 */
TEST_F(bound, the_tscs_rate_moved)
{
	TSC_BOUND_TERMS(t);

	/* The first refresh anchors, the second sets the reference, the third compares. */
	for (int i = 0; i < 3; i++)
		judged_later(_metadata, self, &t);
	EXPECT_EQ(0u, t.by_cause[TSC_DISRUPTION_RATE]) TH_LOG("steady, yet moved");
	EXPECT_FALSE(t.flags & TSC_BOUND_DISRUPTED);

	tsc__test_raw_base = tsc__ns_now(CLOCK_MONOTONIC_RAW);
	tsc__test_raw_ppm = 2000;
	judged_later(_metadata, self, &t);
	EXPECT_EQ(1u, t.by_cause[TSC_DISRUPTION_RATE]);
	EXPECT_EQ(1u, t.disruptions);
	EXPECT_TRUE(t.flags & TSC_BOUND_DISRUPTED);
	EXPECT_EQ(UINT64_MAX, t.bound_ns);
	judged_later(_metadata, self, &t);
	judged_later(_metadata, self, &t);
	EXPECT_EQ(1u, t.by_cause[TSC_DISRUPTION_RATE]) TH_LOG("the new rate, steady, counted again");

	/* The daemon speaks: a bound again. */
	kern_set(800, STA_PLL | STA_NANO);
	judged_later(_metadata, self, &t);
	EXPECT_FALSE(t.flags & TSC_BOUND_DISRUPTED);
	EXPECT_EQ(1u, t.disruptions);
	EXPECT_EQ(0u, t.by_cause[TSC_DISRUPTION_STEP] + t.by_cause[TSC_DISRUPTION_RESUME] +
		      t.by_cause[TSC_DISRUPTION_CLOCKSOURCE] + t.by_cause[TSC_DISRUPTION_VMCLOCK]);
}

/* A change in the middle of an interval: counted once, not at each end. */
TEST_F(bound, the_tscs_rate_moved_mid_interval)
{
	TSC_BOUND_TERMS(t);

	for (int i = 0; i < 3; i++)
		judged_later(_metadata, self, &t);
	usleep(300000);
	tsc__test_raw_base = tsc__ns_now(CLOCK_MONOTONIC_RAW);
	tsc__test_raw_ppm = 2000;
	for (int i = 0; i < 4; i++)
		judged_later(_metadata, self, &t);
	EXPECT_EQ(1u, t.by_cause[TSC_DISRUPTION_RATE]);
}

/* Within tolerance (400 ppm), or a resume between: no disruption of the rate. */
TEST_F(bound, the_tscs_rate_within_tolerance)
{
	TSC_BOUND_TERMS(t);

	for (int i = 0; i < 3; i++)
		judged_later(_metadata, self, &t);
	tsc__test_raw_base = tsc__ns_now(CLOCK_MONOTONIC_RAW);
	tsc__test_raw_ppm = 400;
	judged_later(_metadata, self, &t);
	judged_later(_metadata, self, &t);
	EXPECT_EQ(0u, t.by_cause[TSC_DISRUPTION_RATE]) TH_LOG("400 ppm is within 500");

	/* A resume, then 2000 ppm more: judged anew, not against before. */
	self->p.real_off += 3000000000;
	self->p.boot_off += 3000000000;
	tsc__test_raw_base = tsc__ns_now(CLOCK_MONOTONIC_RAW);
	tsc__test_raw_ppm = 2400;
	judged_later(_metadata, self, &t);
	EXPECT_EQ(1u, t.by_cause[TSC_DISRUPTION_RESUME]);
	for (int i = 0; i < 3; i++)
		judged_later(_metadata, self, &t);
	EXPECT_EQ(0u, t.by_cause[TSC_DISRUPTION_RATE]) TH_LOG("the rate after a resume is its own");
}

/* A step, a resume, a clocksource change: each counted once, by cause. */
TEST_F(bound, disruptions_on_the_page)
{
	TSC_BOUND_TERMS(t);
	struct tsc_time_bound b;

	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(0u, b.disruptions);
	EXPECT_FALSE(b.flags & TSC_BOUND_DISRUPTED);

	/* The generation moved, nothing else: nothing a reading sees changed. */
	self->p.generation++;
	self->p.seq += 2;
	fake_page_publish(_metadata, self->path, &self->p);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(0u, b.disruptions);

	/* Another clocksource (the page withdrawn) and back: counted, no bound until the daemon speaks. */
	self->p.flags = 0;
	self->p.seq += 1;	/* odd: not to be used */
	fake_page_publish(_metadata, self->path, &self->p);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_EQ(0u, t.reading_ns) TH_LOG("clock_gettime() while the page is withdrawn");
	self->p.flags = TSCFK_CLOCK_TSC;
	self->p.generation++;
	self->p.seq += 1;
	fake_page_publish(_metadata, self->path, &self->p);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(2u, b.disruptions) TH_LOG("away and back: two changes of path");
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_EQ(2u, t.by_cause[TSC_DISRUPTION_CLOCKSOURCE]);
	/*
	 * The daemon speaks: 500 us, and 1.5 ms after two of the kernel's
	 * turns, under the 2 ms it grew from.  Then it states 2 ms again,
	 * above the 800 us it speaks at below.
	 */
	kern_set(500, STA_PLL | STA_NANO);
	usleep(1100000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_FALSE(b.flags & TSC_BOUND_DISRUPTED);
	kern_set(2000, STA_PLL | STA_NANO);

	/* A step of REALTIME: counted before this read returns, and no bound. */
	page_step(_metadata, self, 5000000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(3u, b.disruptions);
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED);
	EXPECT_EQ(0u, b.earliest);
	EXPECT_EQ(UINT64_MAX, b.latest);
	for (int i = 0; i < 1000; i++) {
		read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
		ASSERT_EQ(3u, b.disruptions) TH_LOG("one step counted again");
	}

	/* A resume: REALTIME and BOOTTIME moved against MONOTONIC, not against each other. */
	self->p.generation++;
	self->p.real_off += 3000000000;
	self->p.boot_off += 3000000000;
	self->p.seq += 2;
	fake_page_publish(_metadata, self->path, &self->p);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(4u, b.disruptions);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_EQ(1u, t.by_cause[TSC_DISRUPTION_STEP]);
	EXPECT_EQ(1u, t.by_cause[TSC_DISRUPTION_RESUME]);
	EXPECT_EQ(2u, t.by_cause[TSC_DISRUPTION_CLOCKSOURCE]);

	/* The kernel alone grows maxerror: still disrupted a second on. */
	usleep(1100000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED);
	/* The daemon speaks: a bound again, at the next refresh. */
	read_after_the_daemon_spoke(_metadata, self, &b);
	EXPECT_FALSE(b.flags & TSC_BOUND_DISRUPTED);
	EXPECT_NE(UINT64_MAX, b.latest);
	EXPECT_EQ(4u, b.disruptions);
}

/* d set up on root, disciplined by its readers: the page-less state, where the page is withdrawn. */
static void disciplined_on(struct __test_metadata *_metadata, const char *root,
			   struct tsc_sysclock *d)
{
	TSC_SYSCLOCK_OPTS(so, .sysfs_root = root, .discipline = TSC_DISCIPLINE_READERS);

	ASSERT_EQ(0, tsc_sysclock_init(d, &so)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_DISCIPLINED, d->path) TH_LOG("%s", d->why);
}

/* The kernel's clocksource, as current_clocksource names it under the fixture's root. */
static void clocksource_named(struct __test_metadata *_metadata, FIXTURE_DATA(bound) *self,
			      const char *name)
{
	char line[40];

	snprintf(line, sizeof(line), "%s\n", name);
	fake_put(_metadata, self->dir, "/devices/system/clocksource/clocksource0/current_clocksource",
		 line);
}

/* The kernel's clocks off tsc: the page says not to be used (seq odd, no TSC). */
static void page_withdrawn(struct __test_metadata *_metadata, FIXTURE_DATA(bound) *self)
{
	self->p.flags = 0;
	self->p.seq += 1;
	fake_page_publish(_metadata, self->path, &self->p);
}

/* The module unloaded: its page says so, and its file is gone. */
static void module_unloaded(struct __test_metadata *_metadata, FIXTURE_DATA(bound) *self)
{
	self->p.flags = TSCFK_CLOCK_GONE;
	self->p.seq += 1;
	fake_page_publish(_metadata, self->path, &self->p);
	ASSERT_EQ(0, unlink(self->path));
}

/* Loaded again: a new file where the old one was. */
static void module_loaded_anew(struct __test_metadata *_metadata, FIXTURE_DATA(bound) *self)
{
	self->p.flags = TSCFK_CLOCK_TSC;
	self->p.seq = 2;
	fake_page_publish(_metadata, self->path, &self->p);
}

/* A bounded reading of c, then its terms: the counts, in all and of two causes, and the flag. */
static void expect_counts(struct __test_metadata *_metadata, const struct tsc_sysclock *c,
			  uint32_t total, uint32_t steps, uint32_t paths, bool disrupted,
			  const char *what)
{
	TSC_BOUND_TERMS(t);
	struct tsc_time_bound b;

	tsc_sysclock_realtime_bounded(c, &b);
	EXPECT_EQ(total, b.disruptions) TH_LOG("%s", what);
	EXPECT_EQ(disrupted, !!(b.flags & TSC_BOUND_DISRUPTED)) TH_LOG("%s: flags %#x", what, b.flags);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(c, &t));
	EXPECT_EQ(steps, t.by_cause[TSC_DISRUPTION_STEP]) TH_LOG("%s", what);
	EXPECT_EQ(paths, t.by_cause[TSC_DISRUPTION_CLOCKSOURCE]) TH_LOG("%s", what);
}

/*
 * A clock set up anew counts on from the clocks set up before it, one
 * change of path more where it reads by another: after the module went
 * (through clock_gettime()), and on its new page when it came back, though
 * the first clock was not read since its page went.  Another set-up on
 * the same page counts with it.  Each is disrupted, as the first clock
 * would be, until the daemon speaks.
 */
TEST_F(bound, a_new_set_up_counts_on)
{
	TSC_SYSCLOCK_OPTS(so, .sysfs_root = self->dir);
	TSC_SYSCLOCK(d);
	TSC_SYSCLOCK(e);
	TSC_SYSCLOCK(f);
	struct tsc_time_bound b;

	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	page_step(_metadata, self, 5000000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	ASSERT_EQ(1u, b.disruptions);

	module_unloaded(_metadata, self);
	ASSERT_EQ(0, tsc_sysclock_init(&d, &so)) TH_LOG("%s", tsc_last_error());
	ASSERT_NE(TSC_SYSCLOCK_KERNEL, d.path) TH_LOG("%s", d.why);
	expect_counts(_metadata, &d, 2, 1, 1, true, "the first clock's step, then clock_gettime()");

	module_loaded_anew(_metadata, self);
	ASSERT_EQ(0, tsc_sysclock_init(&e, &so)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_KERNEL, e.path) TH_LOG("%s", e.why);
	expect_counts(_metadata, &e, 3, 1, 2, true, "and the new page");
	ASSERT_EQ(0, tsc_sysclock_init(&f, &so)) TH_LOG("%s", tsc_last_error());
	expect_counts(_metadata, &f, 3, 1, 2, true, "one page, one count");
	daemon_speaks();
	expect_counts(_metadata, &f, 3, 1, 2, false, "the daemon spoke since");
	tsc_sysclock_fini(&f);
	tsc_sysclock_fini(&e);
	tsc_sysclock_fini(&d);
}

/* rel under the fixture's root replaced by content, as a new file (another inode). */
static void replace_file(struct __test_metadata *_metadata, FIXTURE_DATA(bound) *self,
			 const char *rel, const char *content)
{
	char path[256], tmp[270];
	int fd;

	snprintf(path, sizeof(path), "%s%s", self->dir, rel);
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)strlen(content), write(fd, content, strlen(content)));
	close(fd);
	ASSERT_EQ(0, rename(tmp, path));
}

/*
 * Through clock_gettime() the readings show no clocksource and no module:
 * a refresh reads both.  Another clocksource, the module loaded, loaded
 * anew (its page file another), unloaded: each counted once, within a
 * second, with no bound until the daemon speaks.
 */
TEST_F(bound, a_clock_off_the_page_sees_what_it_follows)
{
	TSC_SYSCLOCK_OPTS(so, .sysfs_root = self->dir);
	static const char cs[] = "/devices/system/clocksource/clocksource0/current_clocksource";
	static const char page[] = "/devices/system/cpu/tsc/clock_page";
	TSC_SYSCLOCK(d);

	module_unloaded(_metadata, self);
	fake_put(_metadata, self->dir, cs, "tsc\n");
	ASSERT_EQ(0, tsc_sysclock_init(&d, &so)) TH_LOG("%s", tsc_last_error());
	ASSERT_NE(TSC_SYSCLOCK_KERNEL, d.path) TH_LOG("%s", d.why);
	expect_counts(_metadata, &d, 0, 0, 0, false, "no module");
	usleep(1100000);
	expect_counts(_metadata, &d, 0, 0, 0, false, "nothing moved");
	fake_set(_metadata, self->dir, cs, NULL);
	usleep(1100000);
	expect_counts(_metadata, &d, 0, 0, 0, false, "a clocksource unread is not another");

	fake_put(_metadata, self->dir, cs, "hpet\n");
	usleep(1100000);
	expect_counts(_metadata, &d, 1, 0, 1, true, "another clocksource");
	daemon_speaks();
	expect_counts(_metadata, &d, 1, 0, 1, false, "the daemon spoke since");

	replace_file(_metadata, self, page, "a page");
	usleep(1100000);
	expect_counts(_metadata, &d, 2, 0, 2, true, "the module loaded");
	replace_file(_metadata, self, page, "another page");
	usleep(1100000);
	expect_counts(_metadata, &d, 3, 0, 3, true, "and loaded anew");
	ASSERT_EQ(0, unlink(self->path));
	usleep(1100000);
	expect_counts(_metadata, &d, 4, 0, 4, true, "and unloaded");
	for (int i = 0; i < 1000; i++)
		expect_counts(_metadata, &d, 4, 0, 4, true, "counted again");
	tsc_sysclock_fini(&d);
}

/*
 * The module loaded anew while its first page's clock was not read: a
 * clock set up on the new page counts the change from the old one.
 */
TEST_F(bound, a_set_up_on_a_new_page_counts_the_reload)
{
	TSC_SYSCLOCK_OPTS(so, .sysfs_root = self->dir);
	TSC_SYSCLOCK(e);

	read_checked(_metadata, &(struct tsc_time_bound){ 0 }, &self->c, &self->clk, &self->p);
	module_unloaded(_metadata, self);
	module_loaded_anew(_metadata, self);
	ASSERT_EQ(0, tsc_sysclock_init(&e, &so)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_KERNEL, e.path) TH_LOG("%s", e.why);
	expect_counts(_metadata, &e, 1, 0, 1, true, "from the old page to the new");
	tsc_sysclock_fini(&e);
}

/*
 * The kernel's clocks on another clocksource, the module loaded: a clock
 * disciplined by its readers and one set up plain both read
 * clock_gettime(), by two states.  The second set up goes on from the
 * first: the same path, nothing counted, and the daemon spoke since the
 * first's change.
 */
TEST_F(bound, a_set_up_beside_one_reading_alike_counts_nothing)
{
	TSC_SYSCLOCK(d);
	struct tsc_time_bound b;

	clocksource_named(_metadata, self, "kvm-clock");
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	page_withdrawn(_metadata, self);
	expect_counts(_metadata, &self->c, 1, 0, 1, true, "the page withdrawn");
	daemon_speaks();
	expect_counts(_metadata, &self->c, 1, 0, 1, false, "the daemon spoke since");
	disciplined_on(_metadata, self->dir, &d);
	expect_counts(_metadata, &d, 1, 0, 1, false, "the same path as the first clock");
	usleep(1100000);
	expect_counts(_metadata, &d, 1, 0, 1, false, "and a refresh on");
	tsc_sysclock_fini(&d);
}

/*
 * The kernel's clocks back on tsc, which a clock its readers discipline
 * counts through clock_gettime(); the daemon spoke since.  A clock set up
 * then on the page reads the same clock another way: nothing counted.
 */
TEST_F(bound, a_set_up_on_the_page_beside_one_reading_the_tsc_counts_nothing)
{
	TSC_SYSCLOCK_OPTS(plain, .sysfs_root = self->dir);
	TSC_SYSCLOCK(d);
	TSC_SYSCLOCK(e);

	/* The page's offsets the system's, as the kernel's are: no step between the two ways. */
	self->p.real_off = self->p.mono_off + (int64_t)(now(CLOCK_REALTIME) - now(CLOCK_MONOTONIC));
	self->p.boot_off = self->p.mono_off + (int64_t)(now(CLOCK_BOOTTIME) - now(CLOCK_MONOTONIC));
	clocksource_named(_metadata, self, "kvm-clock");
	page_withdrawn(_metadata, self);
	disciplined_on(_metadata, self->dir, &d);
	expect_counts(_metadata, &d, 0, 0, 0, false, "off tsc");
	clocksource_named(_metadata, self, "tsc");
	self->p.flags = TSCFK_CLOCK_TSC;
	self->p.generation++;
	self->p.seq += 1;
	fake_page_publish(_metadata, self->path, &self->p);
	usleep(1100000);
	expect_counts(_metadata, &d, 1, 0, 1, true, "on tsc again");
	daemon_speaks();
	expect_counts(_metadata, &d, 1, 0, 1, false, "the daemon spoke since");
	ASSERT_EQ(0, tsc_sysclock_init(&e, &plain)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_KERNEL, e.path) TH_LOG("%s", e.why);
	expect_counts(_metadata, &e, 1, 0, 1, false, "the page, beside clock_gettime() on tsc");
	tsc_sysclock_fini(&e);
	tsc_sysclock_fini(&d);
}

/*
 * A migration the first clock counted, and the daemon spoke since: a
 * clock set up after it, by the state the first set-up made (which read
 * the hypervisor's marker then), goes on from the marker the first clock
 * last read, and counts nothing.
 */
TEST_F(bound, a_set_up_goes_on_from_the_hypervisors_marker)
{
	TSC_SYSCLOCK(d);
	struct tsc_time_bound b;

	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	page_withdrawn(_metadata, self);
	expect_counts(_metadata, &self->c, 1, 0, 1, true, "the page withdrawn");
	vm_set(self->vm, VM_MARKER, 6);
	expect_counts(_metadata, &self->c, 2, 0, 1, true, "and a migration");
	daemon_speaks();
	expect_counts(_metadata, &self->c, 2, 0, 1, false, "the daemon spoke since");
	disciplined_on(_metadata, self->dir, &d);
	expect_counts(_metadata, &d, 2, 0, 1, false, "the migration counted again");
	tsc_sysclock_fini(&d);
}

/*
 * The module unloads its files first and marks its page gone after: a
 * refresh between the two reads the page with no file beside it, the
 * kernel on tsc.  The page gone then is a change of path all the same.
 */
TEST_F(bound, an_unload_counts_though_the_file_went_first)
{
	struct tsc_time_bound b;
	char gone[160];

	clocksource_named(_metadata, self, "tsc");
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	/* The file gone from its path, the page it maps still there. */
	snprintf(gone, sizeof(gone), "%s.gone", self->path);
	ASSERT_EQ(0, rename(self->path, gone));
	usleep(1100000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(0u, b.disruptions) TH_LOG("the page still read");
	self->p.flags = TSCFK_CLOCK_GONE;
	self->p.seq += 1;
	fake_page_publish(_metadata, gone, &self->p);
	expect_counts(_metadata, &self->c, 1, 0, 1, true, "the page gone");
	ASSERT_EQ(0, unlink(gone));
}

/*
 * The kernel withdraws the page as it leaves tsc and names the clocksource
 * it went to only after: a reading between the two finds the page gone
 * and the name still tsc.  A change of path all the same.
 */
TEST_F(bound, a_switch_away_counts_though_the_name_comes_later)
{
	struct tsc_time_bound b;

	clocksource_named(_metadata, self, "tsc");
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	page_withdrawn(_metadata, self);
	expect_counts(_metadata, &self->c, 1, 0, 1, true, "the page withdrawn, tsc still named");
}

/*
 * A write to the page under way for longer than a reader waits (its
 * writer preempted): no bound meanwhile, nothing counted, and the page
 * again as soon as the write is done.
 */
TEST_F(bound, a_busy_page_is_not_a_change_of_path)
{
	struct tsc_time_bound b;

	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	self->p.seq += 1;
	fake_page_publish(_metadata, self->path, &self->p);
	tsc_sysclock_realtime_bounded(&self->c, &b);
	EXPECT_EQ(0u, b.disruptions);
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED) TH_LOG("a bound while the page was busy");
	self->p.seq += 1;
	fake_page_publish(_metadata, self->path, &self->p);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(0u, b.disruptions) TH_LOG("a busy page counted");
	EXPECT_FALSE(b.flags & TSC_BOUND_DISRUPTED) TH_LOG("flags %#x", b.flags);
}

/*
 * The refresh that saw a step read the kernel's maxerror 2 s after the
 * page (preempted between them).  A second later the kernel alone has
 * added one turn's 500 us, perhaps two: still disrupted, however late
 * the first read was.
 */
TEST_F(bound, disrupted_until_the_daemon_speaks_after_a_late_read)
{
	struct tsc_time_bound b;

	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	page_step(_metadata, self, -7000000);
	kern.late_us = 2000000;
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	ASSERT_TRUE(b.flags & TSC_BOUND_DISRUPTED);
	usleep(1050000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED) TH_LOG("cleared, though the daemon never spoke");
	read_after_the_daemon_spoke(_metadata, self, &b);
	EXPECT_FALSE(b.flags & TSC_BOUND_DISRUPTED) TH_LOG("the daemon spoke: flags %#x", b.flags);
}

/*
 * The kernel adds a second's 500 us at its next tick, which may come
 * late: here, 300 ms.  A step seen just after a turn, then a refresh
 * 1.02 s on, just after the next turn, which the kernel has yet to add:
 * its maxerror is what it was, and the daemon has not spoken.
 */
TEST_F(bound, disrupted_while_the_kernels_tick_is_late)
{
	struct tsc_time_bound b;

	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	while (now(CLOCK_MONOTONIC) % 1000000000 < 50000000 ||
	       now(CLOCK_MONOTONIC) % 1000000000 >= 150000000)
		usleep(10000);
	page_step(_metadata, self, -7000000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	ASSERT_TRUE(b.flags & TSC_BOUND_DISRUPTED);
	kern.turn_lag_ns = 300000000;
	usleep(1020000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED) TH_LOG("cleared, though the daemon never spoke");
	read_after_the_daemon_spoke(_metadata, self, &b);
	EXPECT_FALSE(b.flags & TSC_BOUND_DISRUPTED) TH_LOG("the daemon spoke: flags %#x", b.flags);
}

/* A clock on clock_gettime() (no sysfs at all), the kernel's maxerror 3 ms. */
static void syscall_clock(struct __test_metadata *_metadata, struct tsc_sysclock *c)
{
	TSC_SYSCLOCK_OPTS(o, .sysfs_root = "/nonexistent");

	tsc__test_adjtimex = fake_adjtimex;
	kern.fail = 0;
	kern.state = TIME_OK;
	kern_set(3000, STA_PLL | STA_NANO);
	ASSERT_EQ(0, tsc_sysclock_init(c, &o));
	ASSERT_EQ(TSC_SYSCLOCK_SYSCALL, c->path);
}

/* Without a page: clock_gettime()'s REALTIME, and a step seen at the next read. */
TEST(disruptions_without_a_page)
{
	TSC_BOUND_TERMS(t);
	TSC_SYSCLOCK(c);
	struct tsc_time_bound b;
	uint64_t a;

	syscall_clock(_metadata, &c);
	a = now(CLOCK_REALTIME);
	tsc_sysclock_realtime_bounded(&c, &b);
	EXPECT_LE(a, b.now);
	EXPECT_LE(b.now, now(CLOCK_REALTIME));
	EXPECT_LE(3500000u, b.latest - b.now);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&c, &t));
	EXPECT_EQ(0u, t.reading_ns);
	EXPECT_TRUE(t.flags & TSC_BOUND_SKEW_UNKNOWN) TH_LOG("no sysfs at all: unknown");
	tsc__test_realtime_step_ns = 20000;
	tsc_sysclock_realtime_bounded(&c, &b);
	EXPECT_EQ(t.disruptions + 1, b.disruptions) TH_LOG("a 20 us step not seen at once");
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&c, &t));
	EXPECT_EQ(1u, t.by_cause[TSC_DISRUPTION_STEP]);
	tsc__test_realtime_step_ns = 0;
	tsc__test_adjtimex = NULL;
}

/* Through clock_gettime() the bound does not read the TSC: its rate is not judged. */
TEST(the_tscs_rate_without_a_page)
{
	TSC_BOUND_TERMS(t);
	TSC_SYSCLOCK(c);

	syscall_clock(_metadata, &c);
	/* Anchored, a reference, compared; then 2000 ppm off, and compared again. */
	for (int i = 0; i < 6; i++) {
		if (i == 3) {
			tsc__test_raw_base = tsc__ns_now(CLOCK_MONOTONIC_RAW);
			tsc__test_raw_ppm = 2000;
		}
		ASSERT_EQ(0, tsc_sysclock_bound_terms(&c, &t));
		usleep(1100000);
	}
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&c, &t));
	EXPECT_EQ(0u, t.by_cause[TSC_DISRUPTION_RATE]);
	tsc__test_raw_ppm = 0;
	tsc__test_adjtimex = NULL;
}

/*
 * The hypervisor moved the disruption marker (a live migration): the
 * very next read counts it and has no bound, until the daemon speaks.
 * The VM generation moved: counted at the next refresh.
 */
TEST_F(bound, a_vmclock_disruption)
{
	TSC_BOUND_TERMS(t);
	struct tsc_time_bound b;

	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_EQ(0u, t.disruptions);
	EXPECT_FALSE(t.flags & TSC_BOUND_DISRUPTED);
	EXPECT_EQ(2, t.vmclock_status) TH_LOG("the fixture's vmclock, synchronized");
	EXPECT_EQ(5u, t.vmclock_marker);

	vm_set(self->vm, VM_MARKER, 6);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(1u, b.disruptions) TH_LOG("the marker moved, not seen at once");
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED);
	EXPECT_EQ(UINT64_MAX, b.latest);
	for (int i = 0; i < 1000; i++) {
		read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
		ASSERT_EQ(1u, b.disruptions) TH_LOG("one disruption counted again");
	}
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_EQ(1u, t.by_cause[TSC_DISRUPTION_VMCLOCK]);
	EXPECT_EQ(6u, t.vmclock_marker);
	EXPECT_EQ(0u, t.by_cause[TSC_DISRUPTION_STEP] + t.by_cause[TSC_DISRUPTION_RESUME] +
		      t.by_cause[TSC_DISRUPTION_CLOCKSOURCE]);

	/* The daemon speaks: a bound again. */
	read_after_the_daemon_spoke(_metadata, self, &b);
	EXPECT_FALSE(b.flags & TSC_BOUND_DISRUPTED);

	/* The generation, where the hypervisor keeps one: its first reading is no change. */
	vm_set(self->vm, VM_GEN, 1);
	vm_set(self->vm, VM_FLAGS, VM_GEN_PRESENT);
	usleep(1100000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(1u, b.disruptions);
	vm_set(self->vm, VM_GEN, 2);
	usleep(1100000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(2u, b.disruptions) TH_LOG("the generation moved, not seen at the refresh");
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_EQ(2u, t.by_cause[TSC_DISRUPTION_VMCLOCK]);
}

/*
 * A step and a migration between two readings: both counted by the
 * first reading after them, whatever the two counters' values (the
 * generation 8 to 9 and the marker 6 to 7 move the same bits).
 */
TEST_F(bound, a_step_and_a_vmclock_disruption_at_once)
{
	TSC_BOUND_TERMS(t);
	struct tsc_time_bound b;

	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	self->p.generation = 8;
	self->p.seq += 2;
	fake_page_publish(_metadata, self->path, &self->p);
	vm_set(self->vm, VM_MARKER, 6);
	usleep(1100000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	ASSERT_EQ(6u, t.vmclock_marker);
	ASSERT_EQ(1u, t.disruptions) TH_LOG("the marker's first move");
	read_after_the_daemon_spoke(_metadata, self, &b);
	ASSERT_FALSE(b.flags & TSC_BOUND_DISRUPTED);

	self->p.generation = 9;
	self->p.real_off += 5000000;
	self->p.seq += 2;
	fake_page_publish(_metadata, self->path, &self->p);
	vm_set(self->vm, VM_MARKER, 7);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(3u, b.disruptions) TH_LOG("not both counted at once");
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_EQ(1u, t.by_cause[TSC_DISRUPTION_STEP]);
	EXPECT_EQ(2u, t.by_cause[TSC_DISRUPTION_VMCLOCK]);
}

/*
 * A page the hypervisor does not finish writing: no bound meanwhile, not
 * counted; once it settles, compared with the last reading that did.
 */
TEST_F(bound, a_vmclock_that_would_not_settle)
{
	TSC_BOUND_TERMS(t);
	struct tsc_time_bound b;
	volatile uint32_t *seq = (volatile uint32_t *)(self->vm + VM_SEQ);

	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	*seq += 1;
	*(volatile uint64_t *)(self->vm + VM_MARKER) = 6;
	usleep(1100000);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_EQ(-3, t.vmclock_status);
	EXPECT_EQ(0u, t.disruptions);
	EXPECT_TRUE(t.flags & TSC_BOUND_DISRUPTED) TH_LOG("a bound while the page was unsettled");
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(UINT64_MAX, b.latest);
	*seq += 1;
	usleep(1100000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(1u, b.disruptions) TH_LOG("moved while unsettled, not counted once settled");
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&self->c, &t));
	EXPECT_EQ(2, t.vmclock_status);
	EXPECT_EQ(1u, t.by_cause[TSC_DISRUPTION_VMCLOCK]);
}

/* Without the kernel's page: the marker compared at every read all the same. */
TEST(a_vmclock_disruption_without_a_page)
{
	TSC_BOUND_TERMS(t);
	TSC_SYSCLOCK(c);
	char path[] = "/tmp/vmclock_test.XXXXXX";
	volatile unsigned char *vm;
	struct tsc_time_bound b;
	int fd = mkstemp(path);

	ASSERT_LE(0, fd);
	close(fd);
	vm = fake_vmclock(path, 1);
	ASSERT_NE(NULL, vm);
	tsc__test_vmclock_path = path;
	syscall_clock(_metadata, &c);
	tsc_sysclock_realtime_bounded(&c, &b);
	EXPECT_FALSE(b.flags & TSC_BOUND_DISRUPTED);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&c, &t));
	EXPECT_EQ(2, t.vmclock_status);
	vm_set(vm, VM_MARKER, 2);
	tsc_sysclock_realtime_bounded(&c, &b);
	EXPECT_EQ(t.disruptions + 1, b.disruptions) TH_LOG("the marker moved, not seen at once");
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&c, &t));
	EXPECT_EQ(1u, t.by_cause[TSC_DISRUPTION_VMCLOCK]);
	tsc__test_adjtimex = NULL;
	unlink(path);
}

/* No device: nothing read, nothing counted. */
TEST(no_vmclock)
{
	TSC_BOUND_TERMS(t);

	tsc__test_vmclock_path = "/nonexistent/vmclock0";
	ASSERT_EQ(0, tsc_time_bound_terms(&t));
	EXPECT_EQ(-1, t.vmclock_status);
	EXPECT_EQ(0u, t.by_cause[TSC_DISRUPTION_VMCLOCK]);
}

/* Many readers across a step: counted once, and every reading bounded or flagged. */
struct racer {
	const struct tsc_sysclock *c;
	int stop;
	unsigned int reads, bad;
};

static void *race(void *arg)
{
	struct racer *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		struct tsc_time_bound b;

		tsc_sysclock_realtime_bounded(r->c, &b);
		if (b.earliest > b.now || b.latest < b.now)
			__atomic_fetch_add(&r->bad, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&r->reads, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

TEST_F(bound, racing_readers_count_a_step_once)
{
	struct racer r = { .c = &self->c };
	pthread_t th[4];
	struct tsc_time_bound b;

	for (int i = 0; i < 4; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, race, &r));
	usleep(50000);
	page_step(_metadata, self, -7000000);
	usleep(50000);
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_EQ(1u, b.disruptions);
	EXPECT_EQ(0u, r.bad);
	EXPECT_LT(1000u, r.reads);
}

/*
 * A second on, a refresh of the fixture's clock in thread th, held up
 * publishing for pause_us: under way when this returns.
 */
static void publishing_held_up(struct __test_metadata *_metadata, FIXTURE_DATA(bound) *self,
			       pthread_t *th, unsigned int pause_us)
{
	usleep(1100000);	/* the state a second old: the next reader refreshes */
	tsc__test_publish_pause_us = pause_us;
	ASSERT_EQ(0, pthread_create(th, NULL, terms_now, &self->c));
	for (int i = 0; i < 1000 && !__atomic_load_n(&tsc__test_publishing, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	ASSERT_TRUE(__atomic_load_n(&tsc__test_publishing, __ATOMIC_ACQUIRE));
}

/*
 * A reader that finds a refresh publishing (its thread preempted there,
 * or interrupted by the handler that reads) reads a state of its own;
 * after a step, the state is disrupted, and so is that reading: no
 * bound until the refresh ends.
 */
TEST_F(bound, a_reader_beside_a_refresh_publishing)
{
	struct tsc_time_bound b;
	pthread_t th;

	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_FALSE(b.flags & TSC_BOUND_DISRUPTED);
	page_step(_metadata, self, -7000000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	ASSERT_TRUE(b.flags & TSC_BOUND_DISRUPTED) TH_LOG("a 7 ms step: flags %#x", b.flags);
	publishing_held_up(_metadata, self, &th, 300000);
	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_TRUE(__atomic_load_n(&tsc__test_publishing, __ATOMIC_ACQUIRE)) TH_LOG("read after it ended");
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED) TH_LOG("flags %#x", b.flags);
	EXPECT_EQ(UINT64_MAX, b.latest) TH_LOG("a bound of %llu ns",
					       (unsigned long long)(b.latest - b.now));
	ASSERT_EQ(0, pthread_join(th, NULL));
	tsc__test_publish_pause_us = 0;
	EXPECT_EQ(0, terms_err);
}

/*
 * A clock set up while the state it would go on from is held up
 * publishing (its refresher preempted there, past the set-up's wait):
 * what that one judged is not known, so the new one starts with no
 * bound, uncounted, until the daemon speaks.
 */
TEST_F(bound, a_set_up_beside_a_refresh_publishing_starts_disrupted)
{
	TSC_SYSCLOCK_OPTS(so, .sysfs_root = self->dir, .discipline = TSC_DISCIPLINE_READERS);
	TSC_SYSCLOCK(d);
	struct tsc_time_bound b;
	pthread_t th;

	read_checked(_metadata, &b, &self->c, &self->clk, &self->p);
	EXPECT_FALSE(b.flags & TSC_BOUND_DISRUPTED);
	publishing_held_up(_metadata, self, &th, 500000);
	/* The page withdrawn, so that the new clock reads by the other state. */
	page_withdrawn(_metadata, self);
	ASSERT_EQ(0, tsc_sysclock_init(&d, &so)) TH_LOG("%s", tsc_last_error());
	EXPECT_TRUE(__atomic_load_n(&tsc__test_publishing, __ATOMIC_ACQUIRE)) TH_LOG("set up after it ended");
	ASSERT_EQ(TSC_SYSCLOCK_DISCIPLINED, d.path) TH_LOG("%s", d.why);
	tsc_sysclock_realtime_bounded(&d, &b);
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED) TH_LOG("flags %#x", b.flags);
	EXPECT_EQ(0u, b.disruptions);
	ASSERT_EQ(0, pthread_join(th, NULL));
	tsc__test_publish_pause_us = 0;
	EXPECT_EQ(0, terms_err);
	tsc_sysclock_fini(&d);
}

TEST(terms_size_checked)
{
	struct tsc_bound_terms t = { .sz = 8 };

	EXPECT_EQ(-EINVAL, tsc_time_bound_terms(&t));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "TSC_BOUND_TERMS")) TH_LOG("%s", tsc_last_error());
}

/*
 * The front door, on this machine's clocks and its real NTP state; its
 * first read sets the clock up and leaves errno as it was.
 */
TEST(front_door)
{
	TSC_BOUND_TERMS(t);
	struct tsc_time_bound b;
	struct timex tx = { .modes = 0 };
	uint64_t a = now(CLOCK_REALTIME);
	int state;

	errno = EDOM;
	tsc_realtime_bounded(&b);
	EXPECT_EQ(EDOM, errno);
	EXPECT_LE(a, b.now);
	EXPECT_LE(b.now, now(CLOCK_REALTIME));
	ASSERT_EQ(0, tsc_time_bound_terms(&t)) TH_LOG("%s", tsc_last_error());
	state = adjtimex(&tx);
	ASSERT_LE(0, state);
	if ((tx.status & STA_UNSYNC) || tx.maxerror >= 16000000) {
		EXPECT_TRUE(t.flags & TSC_BOUND_UNSYNCED);
		EXPECT_EQ(UINT64_MAX, t.bound_ns);
	} else {
		EXPECT_LE((uint64_t)tx.maxerror * 1000, t.bound_ns);
	}
}

TEST_HARNESS_MAIN
