// SPDX-License-Identifier: GPL-2.0
/*
 * tsc/clock_page and tsc/timekeeper_freq_millihz: the page maps read-only
 * and nothing else; where the clocks read the TSC, each clock computed
 * from the page at a TSC reading lies between the same computation just
 * before and just after clock_gettime() (0 violations); its generation
 * follows a step of the clock and a clocksource switch; CLOCK_TAI follows
 * the kernel's TAI offset set by adjtimex(); a mapping outlives
 * the module and then says it is gone, also one that a forked child
 * inherited and never touched, after drop_caches, through libtsc's clock;
 * libtsc's bounded clock counts the unload and the load, once each, and
 * a real switch of the clocksource away and back;
 * in a time namespace with offsets mmap() is refused and read() gives
 * that namespace's clocks, a mapping made before the initial one's;
 * libtsc's sysfs and perf rates lie within their hard bounds of the rate
 * MONOTONIC_RAW counts the TSC at.
 * Loads the module itself, from $TSCFK_KO; starts and ends with it
 * unloaded.
 */
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/timex.h>
#include <sys/wait.h>

#include "../testlib/harness.h"
#include "../testlib/no_page_root.h"
#include "tscfk_test.h"
#include "module_fixture.h"
#include "tsc_clock_page.h"
#include "libtsc.h"

#define PAGE_FILE	TSC_DIR "/clock_page"
#define RATE_FILE	TSC_DIR "/timekeeper_freq_millihz"
#define CS_DIR		CPU_SYS "/../clocksource/clocksource0/"
#define PAGE		4096

enum { REAL, MONO, BOOT, TAI, RAW, NCLOCKS };
static const clockid_t clock_ids[NCLOCKS] = {
	CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME, CLOCK_TAI, CLOCK_MONOTONIC_RAW
};
static const char *const clock_names[NCLOCKS] = {
	"REALTIME", "MONOTONIC", "BOOTTIME", "TAI", "MONOTONIC_RAW"
};

/* The TSC after everything before it, and before anything after it. */
static inline uint64_t rdtsc_fenced(void)
{
	uint32_t lo, hi;

	__asm__ __volatile__("lfence; rdtsc; lfence" : "=a"(lo), "=d"(hi) : : "memory");
	return (uint64_t)hi << 32 | lo;
}

/*
 * A consistent copy of the page, and a TSC reading taken inside its
 * sequence count, as a reader of the ABI does it: 1; 0 if the page says
 * the clocks do not read the TSC (s->flags says what it says).
 */
static int page_snapshot(const volatile struct tscfk_clock_page *p, struct tscfk_clock_page *s,
			 uint64_t *t)
{
	for (;;) {
		uint32_t seq = __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE);

		/* Odd: being written, or, without TSC in flags, not to be used. */
		if (seq & 1) {
			s->flags = p->flags;
			if (!(s->flags & TSCFK_CLOCK_TSC))
				return 0;
			continue;
		}
		*s = *p;
		*t = rdtsc_fenced();
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&p->seq, __ATOMIC_RELAXED) == seq)
			return !!(s->flags & TSCFK_CLOCK_TSC);
	}
}

/* Clock c of a copy of the page at TSC reading t. */
static uint64_t clock_at(const struct tscfk_clock_page *s, int c, uint64_t t)
{
	struct tscfk_clock_map m;

	if (c == RAW) {
		m = s->raw;
	} else {
		m = (struct tscfk_clock_map){ s->mult_ns, s->mult, s->frac, 0 };
		m.off = c == REAL ? s->real_off : c == MONO ? s->mono_off :
			c == BOOT ? s->boot_off : s->tai_off;
	}
	return tscfk_clock_ns(&m, s->cycle_last, t);
}

/*
 * Clock c at a TSC reading taken inside the page's sequence count: 1 and
 * the time in *ns; 0 if the page says the clocks do not read the TSC
 * (*flags says what it says).
 */
static int page_read(const volatile struct tscfk_clock_page *p, int c, uint64_t *ns,
		     uint16_t *flags)
{
	struct tscfk_clock_page s;
	uint64_t t;
	int tsc = page_snapshot(p, &s, &t);

	*flags = s.flags;
	if (!tsc)
		return 0;
	*ns = clock_at(&s, c, t);
	return 1;
}

static uint64_t gettime(int c)
{
	struct timespec ts;

	clock_gettime(clock_ids[c], &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

static const volatile struct tscfk_clock_page *map_page(struct __test_metadata *_metadata)
{
	int fd = open(PAGE_FILE, O_RDONLY | O_CLOEXEC);
	void *p;

	EXPECT_LE(0, fd) TH_LOG("%s: %s", PAGE_FILE, strerror(errno));
	if (fd < 0)
		return NULL;
	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	EXPECT_NE(MAP_FAILED, p) TH_LOG("mmap: %s", strerror(errno));
	return p == MAP_FAILED ? NULL : p;
}

/*
 * Each clock between two page readings around clock_gettime(), n times:
 * the number of times it was not.
 */
static int violations(struct __test_metadata *_metadata,
		      const volatile struct tscfk_clock_page *p, int c, int n)
{
	int bad = 0;

	for (int i = 0; i < n; i++) {
		uint64_t a, k, b;
		uint16_t flags;

		if (!page_read(p, c, &a, &flags))
			return -1;
		k = gettime(c);
		if (!page_read(p, c, &b, &flags))
			return -1;
		if (k < a || k > b) {
			if (bad++ < 3)
				TH_LOG("%s: page %llu, clock_gettime %llu, page %llu", clock_names[c],
				       (unsigned long long)a, (unsigned long long)k,
				       (unsigned long long)b);
		}
	}
	return bad;
}

/* Write to p through /proc/self/mem, as a debugger would: -errno. */
static int forced_write(void *p)
{
	int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	uint16_t v = 0xdead;
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pwrite(fd, &v, sizeof(v), (off_t)(uintptr_t)p);
	close(fd);
	return n < 0 ? -errno : (int)n;
}

/*
 * In a child: MADV_DONTNEED on its copy of the mapping, then a read.  The
 * signal that ended it, 0 if the read returned (its value then lost), or
 * -1 if madvise() failed (ENOSYS: a kernel without CONFIG_ADVISE_SYSCALLS,
 * as the debug kernel; then SIGBUS is what the test asks of it anyway).
 */
static int read_after_dontneed(void *p)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		signal(SIGBUS, SIG_DFL);	/* not the sanitizer's report */
		if (madvise(p, PAGE, MADV_DONTNEED))
			_exit(errno == ENOSYS ? 2 : 1);
		_exit(((volatile struct tscfk_clock_page *)p)->version == 0 ? 3 : 4);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	if (WIFSIGNALED(status))
		return WTERMSIG(status);
	return WEXITSTATUS(status) == 2 ? SIGBUS : 0;
}

TEST_F(module, maps_read_only)
{
	char buf[PAGE + 16];
	void *p;
	int fd;

	ASSERT_EQ(0, module_load(""));
	EXPECT_EQ(-1, open(PAGE_FILE, O_RDWR));
	EXPECT_EQ(EACCES, errno);
	fd = open(PAGE_FILE, O_RDONLY);
	ASSERT_LE(0, fd);
	/* Shared and writable: the file is not open for writing. */
	EXPECT_EQ(MAP_FAILED, mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
	EXPECT_EQ(EACCES, errno);
	/* Private and writable: the module's refusal. */
	EXPECT_EQ(MAP_FAILED, mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
	EXPECT_EQ(EACCES, errno);
	/* Executable: the module's, or sysfs's noexec (EPERM). */
	EXPECT_EQ(MAP_FAILED, mmap(NULL, PAGE, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0));
	EXPECT_TRUE(errno == EACCES || errno == EPERM) TH_LOG("errno %d", errno);
	/* One page at offset 0, nothing else. */
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 2 * PAGE, PROT_READ, MAP_SHARED, fd, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, PAGE));
	EXPECT_EQ(EINVAL, errno);
	/* Read-only mapped, and mprotect() cannot add writing. */
	p = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
	ASSERT_NE(MAP_FAILED, p) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(TSCFK_CLOCK_PAGE_VERSION, ((struct tscfk_clock_page *)p)->version);
	EXPECT_EQ(-1, mprotect(p, PAGE, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	/* Nor grown by mremap(): there is one page. */
	EXPECT_EQ(MAP_FAILED, mremap(p, PAGE, 2 * PAGE, MREMAP_MAYMOVE));
	/* Nor written by force, as ptrace() and /proc/PID/mem would. */
	EXPECT_GT(0, forced_write(p));
	EXPECT_EQ(TSCFK_CLOCK_PAGE_VERSION, ((struct tscfk_clock_page *)p)->version);
	/* Dropped by its process, it is gone for it: SIGBUS, never a new page. */
	EXPECT_EQ(SIGBUS, read_after_dontneed(p));
	munmap(p, PAGE);
	/*
	 * read() gives the page as a mapping sees it: a whole page, past the
	 * fields too (which move with the clocks, the rest does not).
	 */
	EXPECT_EQ(PAGE, pread(fd, buf, sizeof(buf), 0));
	EXPECT_EQ(TSCFK_CLOCK_PAGE_VERSION, ((struct tscfk_clock_page *)buf)->version);
	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(0, memcmp(buf + sizeof(struct tscfk_clock_page),
			    (char *)p + sizeof(struct tscfk_clock_page),
			    PAGE - sizeof(struct tscfk_clock_page)));
	munmap(p, PAGE);
	close(fd);
}

TEST_F(module, the_kernels_clocks)
{
	const volatile struct tscfk_clock_page *p;
	uint64_t ns, khz, millihz;
	uint16_t flags;
	char buf[64];
	bool tsc;

	ASSERT_EQ(0, module_load(""));
	p = map_page(_metadata);
	ASSERT_NE(NULL, p);
	tsc = page_read(p, MONO, &ns, &flags);
	TH_LOG("clocksource tsc: %s; page flags %#x, generation %u, mult_ns %u, shift %u",
	       clocksource_is_tsc() ? "yes" : "no", flags, p->generation, p->mult_ns,
	       p->kernel_shift);
	EXPECT_EQ(clocksource_is_tsc(), tsc);
	EXPECT_EQ(0, flags & TSCFK_CLOCK_GONE);
	if (!tsc) {
		/* Not to be used: seq says so too, for readers that test one bit. */
		EXPECT_EQ(1, p->seq & 1);
		EXPECT_EQ(-ENODATA, read_file(RATE_FILE, buf, sizeof(buf)));
		munmap((void *)p, PAGE);
		SKIP(return, "the clocks do not read the TSC: the page says so, nothing to compare");
	}
	for (int c = 0; c < NCLOCKS; c++) {
		EXPECT_EQ(0, violations(_metadata, p, c, 10000)) {
			TH_LOG("%s", clock_names[c]);
		}
	}
	/*
	 * Without NTP the rate is tsc_khz's, up to the clocksource's rounding
	 * of mult (1 part in 2^22 or more) and of the tick's cycles (1 in 10^7).
	 */
	ASSERT_EQ(0, read_u64(RATE_FILE, &millihz));
	ASSERT_EQ(0, read_u64(FREQ_FILE, &khz));
	TH_LOG("timekeeper %llu mHz, tsc_khz %llu", (unsigned long long)millihz,
	       (unsigned long long)khz);
	EXPECT_GE(2e-6, fabs((double)millihz / ((double)khz * 1e6) - 1));
	/*
	 * max_cycles (layout 2) is the clocksource's: what its mult, and the
	 * 11 % the kernel allows it to be adjusted by, keep within 64 bits
	 * (clocks_calc_max_nsecs()), at mult as registered, which NTP has
	 * moved by well under 1 % since.  Minutes of the TSC, not a value of
	 * our own.
	 */
	{
		double fit = 18446744073709551615.0 / (p->kernel_mult * 1.11);

		TH_LOG("max_cycles %llu, %.0f s of the TSC; 2^64 / (mult + 11 %%) %.0f",
		       (unsigned long long)p->max_cycles, p->max_cycles / (khz * 1e3), fit);
		EXPECT_GE(0.01, fabs(p->max_cycles / fit - 1));
	}
	munmap((void *)p, PAGE);
}

/*
 * TSC_REFERENCE_KERNEL is the tsc clocksource's rate:
 * MONOTONIC_RAW's mult / 2^shift ns a tick, which the page gives whole.
 * libtsc computes that mult from tsc_khz as the kernel does; here it meets
 * the kernel's own on each kernel of the matrix.  tsc_khz and the perf
 * page's rate lie within the hard bound libtsc states of it.
 */
TEST_F(module, the_kernels_rate_within_the_bound)
{
	const volatile struct tscfk_clock_page *p;
	struct tscfk_clock_page s;
	struct tsc_freq f;
	uint64_t mult, t;
	uint32_t shift;
	double ns_per_tick, hz, off;
	int err, tsc;

	ASSERT_EQ(0, module_load(""));
	p = map_page(_metadata);
	ASSERT_NE(NULL, p);
	tsc = page_snapshot(p, &s, &t);
	munmap((void *)p, PAGE);
	if (!tsc)
		SKIP(return, "the clocks do not read the TSC: no rate of theirs for it");
	shift = s.kernel_shift;
	ASSERT_TRUE(shift >= 1 && shift <= 32) TH_LOG("shift %u", shift);
	mult = s.raw.mult_ns << shift | s.raw.mult >> (64 - shift);
	ns_per_tick = (double)mult / (double)(1ull << shift);
	ASSERT_EQ(0, tsc_freq_from_sysfs(&f, NULL)) TH_LOG("%s", tsc_last_error());
	hz = 1e9 / ns_per_tick;
	off = fabs(f.hz - hz) / hz * 1e6;
	TH_LOG("tsc_khz %.0f; MONOTONIC_RAW's mult %llu, shift %u: %.3f Hz, %.4f ppm off, bound %.4f ppm",
	       f.hz / 1e3, (unsigned long long)mult, shift, hz, off, f.bound_ppm);
	if (f.precision_of != TSC_REFERENCE_KERNEL)
		SKIP(return, "tsc_khz may be the kernel's unrefined estimate: %.300s", f.detail);
	/* The kernel's mult, not one like it: half a unit of it. */
	EXPECT_GE(1e-9, fabs(f.bound_ppm / (0.5e6 / (mult - 0.5)) - 1));
	EXPECT_GE(f.bound_ppm, off);
	err = tsc_freq_from_perf(&f);
	if (err) {
		TH_LOG("perf: %s", tsc_last_error());
		return;
	}
	off = fabs(f.hz - hz) / hz * 1e6;
	TH_LOG("perf: %.3f Hz, %.4f ppm off, bound %.4f ppm", f.hz, off, f.bound_ppm);
	EXPECT_LT(0, f.bound_ppm);
	EXPECT_GE(f.bound_ppm, off);
}

/* Another clocksource than tsc from available_clocksource, or "". */
static void other_clocksource(char *other, size_t size)
{
	char avail[256], *save;

	other[0] = '\0';
	if (read_file(CS_DIR "available_clocksource", avail, sizeof(avail)) <= 0)
		return;
	for (char *w = strtok_r(avail, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
		if (strcmp(w, "tsc") && strcmp(w, "tsc-early")) {
			snprintf(other, size, "%s", w);
			return;
		}
}

TEST_F(module, generation_follows_a_step)
{
	const volatile struct tscfk_clock_page *p;
	CLOCK_EVENTS(events);
	uint32_t gen;
	uint64_t mono_off;
	int64_t moved;
	struct timespec ts;
	uint16_t flags;
	uint64_t ns;
	bool tsc;

	ASSERT_EQ(0, module_load(""));
	p = map_page(_metadata);
	ASSERT_NE(NULL, p);
	/*
	 * A step of CLOCK_REALTIME by +1 s: a new generation, and where the
	 * page holds the mapping, REALTIME's offset moves and MONOTONIC's not.
	 */
	READ_CLOCK_EVENTS(events);
	/* Loaded just now: nothing counted yet, its own first update included. */
	EXPECT_EQ(0, events[0] + events[1] + events[2]);
	tsc = page_read(p, REAL, &ns, &flags);
	gen = p->generation;
	mono_off = p->mono_off;
	moved = (int64_t)p->real_off;
	ASSERT_EQ(0, clock_gettime(CLOCK_REALTIME, &ts));
	ts.tv_sec += 1;
	ASSERT_EQ(0, clock_settime(CLOCK_REALTIME, &ts)) TH_LOG("%s", strerror(errno));
	moved = (int64_t)p->real_off - moved;
	EXPECT_NE(gen, p->generation);
	if (tsc) {
		/* The kernel's own rounding of the step may move MONOTONIC by 1 ns. */
		TH_LOG("step +1 s: real_off moved %lld ns, mono_off %lld", (long long)moved,
		       (long long)(p->mono_off - mono_off));
		EXPECT_LT(llabs(moved - 1000000000), 50000000);
		EXPECT_EQ(0, violations(_metadata, p, REAL, 1000));
	}
	ASSERT_EQ(0, clock_gettime(CLOCK_REALTIME, &ts));
	ts.tv_sec -= 1;
	ASSERT_EQ(0, clock_settime(CLOCK_REALTIME, &ts));
	/* Two steps, counted as such. */
	ASSERT_CLOCK_EVENTS(events, 2, 0, 0);
	munmap((void *)p, PAGE);
}

/*
 * The kernel's TAI offset (0 until set, as in these guests) moved to 37 s
 * by adjtimex(ADJ_TAI): CLOCK_TAI from the page follows it, to the ns.
 */
TEST_F(module, tai_follows_the_kernels_offset)
{
	const volatile struct tscfk_clock_page *p;
	CLOCK_EVENTS(events);
	struct timex tx = { 0 };
	uint16_t flags;
	uint64_t ns;
	int was;

	ASSERT_EQ(0, module_load(""));
	p = map_page(_metadata);
	ASSERT_NE(NULL, p);
	READ_CLOCK_EVENTS(events);
	ASSERT_LE(0, adjtimex(&tx)) TH_LOG("%s", strerror(errno));
	was = tx.tai;
	tx = (struct timex){ .modes = ADJ_TAI, .constant = was + 37 };
	ASSERT_LE(0, adjtimex(&tx)) TH_LOG("ADJ_TAI: %s", strerror(errno));
	if (page_read(p, TAI, &ns, &flags)) {
		EXPECT_EQ((uint64_t)(was + 37) * 1000000000, p->tai_off - p->real_off);
		EXPECT_EQ(0, violations(_metadata, p, TAI, 1000));
	} else {
		TH_LOG("the clocks do not read the TSC: the offset not compared");
	}
	tx = (struct timex){ .modes = ADJ_TAI, .constant = was };
	EXPECT_LE(0, adjtimex(&tx));
	/* The kernel calls its clock set; no reading of REALTIME changed. */
	ASSERT_CLOCK_EVENTS(events, 0, 0, 0);
	munmap((void *)p, PAGE);
}

/* A switch of the clocksource away from tsc and back. */
TEST_F(module, generation_follows_a_clocksource_switch)
{
	const volatile struct tscfk_clock_page *p;
	CLOCK_EVENTS(events);
	char other[32];
	uint16_t flags;
	uint32_t gen;
	uint64_t ns;

	ASSERT_EQ(0, module_load(""));
	p = map_page(_metadata);
	ASSERT_NE(NULL, p);
	other_clocksource(other, sizeof(other));
	if (!clocksource_is_tsc() || !other[0]) {
		munmap((void *)p, PAGE);
		SKIP(return, "the clocksource is not tsc, or there is no other: no switch to make");
	}
	READ_CLOCK_EVENTS(events);
	gen = p->generation;
	ASSERT_LT(0, write_file(CS_DIR "current_clocksource", other, strlen(other)));
	EXPECT_EQ(0, page_read(p, MONO, &ns, &flags)) TH_LOG("on %s", other);
	EXPECT_NE(gen, p->generation);
	gen = p->generation;
	ASSERT_LT(0, write_file(CS_DIR "current_clocksource", "tsc", 3));
	EXPECT_EQ(1, page_read(p, MONO, &ns, &flags));
	EXPECT_NE(gen, p->generation);
	EXPECT_EQ(0, violations(_metadata, p, MONO, 1000));
	ASSERT_CLOCK_EVENTS(events, 0, 0, 2);
	munmap((void *)p, PAGE);
}

/*
 * The child of unshare(CLONE_NEWTIME) with MONOTONIC 1000 s and BOOTTIME
 * 2000 s ahead, the ABI's promises there: 0, or what broke.  A read()
 * copy, at a TSC reading after it, must lie between clock_gettime()
 * calls around both, with a millisecond's slack for the copy's age (a
 * wrong offset is 1000 s off).
 */
enum { NS_OK, NS_MAPPED, NS_READ, NS_NO_TSC, NS_CLOCK, NS_INHERITED = NS_CLOCK + NCLOCKS };

static int in_time_namespace(struct __test_metadata *_metadata,
			     const volatile struct tscfk_clock_page *inherited)
{
	int fd = open(PAGE_FILE, O_RDONLY | O_CLOEXEC);
	struct tscfk_clock_page s;
	uint64_t ns, now;
	uint16_t flags;
	void *p;

	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);
	if (p != MAP_FAILED || errno != EOPNOTSUPP) {
		TH_LOG("mmap: %s", p == MAP_FAILED ? strerror(errno) : "mapped");
		return NS_MAPPED;
	}
	for (int c = 0; c < NCLOCKS; c++) {
		uint64_t a = gettime(c), t, b;

		if (pread(fd, &s, sizeof(s), 0) != sizeof(s))
			return NS_READ;
		if (!(s.flags & TSCFK_CLOCK_TSC))
			return NS_NO_TSC;
		t = rdtsc_fenced();
		b = gettime(c);
		ns = clock_at(&s, c, t);
		if (ns + 1000000 < a || ns > b + 1000000) {
			TH_LOG("%s: read() %llu, clock_gettime %llu..%llu", clock_names[c],
			       (unsigned long long)ns, (unsigned long long)a,
			       (unsigned long long)b);
			return NS_CLOCK + c;
		}
	}
	/* The parent's mapping is the initial namespace's, 1000 s behind. */
	if (!page_read(inherited, MONO, &ns, &flags))
		return NS_NO_TSC;
	now = gettime(MONO);
	if (now - ns < 999000000000ull || now - ns > 1001000000000ull) {
		TH_LOG("inherited mapping: MONOTONIC %llu, clock_gettime %llu",
		       (unsigned long long)ns, (unsigned long long)now);
		return NS_INHERITED;
	}
	return NS_OK;
}

/*
 * A time namespace with offsets: the page there would give another
 * namespace's MONOTONIC, MONOTONIC_RAW and BOOTTIME, so mmap() is
 * refused and read() adds the offsets; a mapping made before keeps the
 * initial namespace's clocks.  And /proc/PID/maps names the mapping as
 * the ABI document says.
 */
TEST_F(module, a_time_namespace_with_offsets)
{
	const volatile struct tscfk_clock_page *p, *own;
	char maps[1 << 16];
	int status;
	pid_t pid;
	FILE *f;

	ASSERT_EQ(0, module_load(""));
	p = map_page(_metadata);
	ASSERT_NE(NULL, p);
	ASSERT_LT(0, read_file("/proc/self/maps", maps, sizeof(maps)));
	EXPECT_NE(NULL, strstr(maps, "/tsc_clock_page (deleted)")) TH_LOG("%s", maps);
	if (unshare(CLONE_NEWTIME)) {
		munmap((void *)p, PAGE);
		SKIP(return, "unshare(CLONE_NEWTIME): %s", strerror(errno));
	}
	f = fopen("/proc/self/timens_offsets", "w");
	ASSERT_NE(NULL, f);
	fputs("monotonic 1000 0\nboottime 2000 0\n", f);
	ASSERT_EQ(0, fclose(f));
	/* The caller stays where it was, and still maps the page. */
	own = map_page(_metadata);
	EXPECT_NE(NULL, own);
	if (own)
		munmap((void *)own, PAGE);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(in_time_namespace(_metadata, p));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("status %#x", status);
	munmap((void *)p, PAGE);
	if (WEXITSTATUS(status) == NS_NO_TSC && !clocksource_is_tsc())
		SKIP(return, "mmap() refused; the clocks do not read the TSC: nothing to compare");
	EXPECT_EQ(NS_OK, WEXITSTATUS(status))
		TH_LOG("%d: 1 mmap() not refused with EOPNOTSUPP, 2 read() failed, 4-8 a clock of read() off the namespace's, 9 the inherited mapping not the initial namespace's",
		       WEXITSTATUS(status));
}

/* A mapping is of the page, not of the module: after rmmod it reads GONE. */
TEST_F(module, mapping_outlives_the_module)
{
	const volatile struct tscfk_clock_page *old, *p;
	uint16_t flags;
	uint64_t ns, sum = 0;

	ASSERT_EQ(0, module_load(""));
	old = map_page(_metadata);
	ASSERT_NE(NULL, old);
	ASSERT_EQ(0, module_unload());
	EXPECT_EQ(0, page_read(old, MONO, &ns, &flags));
	EXPECT_EQ(TSCFK_CLOCK_GONE, flags);
	EXPECT_EQ(1, old->seq & 1);
	EXPECT_EQ(TSCFK_CLOCK_PAGE_VERSION, old->version);
	/* Every byte still mapped: a fault would kill the test. */
	for (size_t i = 0; i < PAGE; i++)
		sum += ((const volatile unsigned char *)old)[i];
	TH_LOG("the old page's bytes add up to %llu", (unsigned long long)sum);
	/* A new module, a new page; the old one stays gone. */
	ASSERT_EQ(0, module_load(""));
	p = map_page(_metadata);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(clocksource_is_tsc(), page_read(p, MONO, &ns, &flags));
	EXPECT_EQ(0, page_read(old, MONO, &ns, &flags));
	EXPECT_EQ(TSCFK_CLOCK_GONE, flags);
	munmap((void *)old, PAGE);
	munmap((void *)p, PAGE);
}

/* c's bounded readings until its count is above was, for up to 3 s: its terms then. */
static void counted_within_3s(struct __test_metadata *_metadata, const struct tsc_sysclock *c,
			      uint32_t was, struct tsc_bound_terms *t)
{
	struct tsc_time_bound b;

	for (int i = 0; i < 300; i++) {
		tsc_sysclock_realtime_bounded(c, &b);
		if (b.disruptions != was)
			break;
		usleep(10000);
	}
	ASSERT_EQ(0, tsc_sysclock_bound_terms(c, t));
}

/*
 * libtsc's bounded clock across a reload: the unload is one change of
 * path (to clock_gettime()), counted by the first reading after it; the
 * clock stays there when the module is back, and counts the load, at its
 * next refresh; a clock set up after the load reads the new page, and
 * goes on from the old page's clock, which reads the same clock through
 * clock_gettime(): nothing more.  The bound is unknown from the unload
 * on: no daemon spoke since.
 */
TEST_F(module, a_bounded_clock_counts_a_reload)
{
	TSC_SYSCLOCK(c);
	TSC_SYSCLOCK(again);
	TSC_BOUND_TERMS(t0);
	TSC_BOUND_TERMS(t);
	TSC_BOUND_TERMS(t1);
	struct tsc_time_bound b;

	ASSERT_EQ(0, module_load(""));
	if (!clocksource_is_tsc())
		SKIP(return, "the clocksource is not tsc: the library does not read the page");
	ASSERT_EQ(0, tsc_sysclock_init(&c, NULL)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_KERNEL, c.path) TH_LOG("%s", c.why);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&c, &t0));
	EXPECT_EQ(1u, t0.reading_ns) TH_LOG("read on the page");
	ASSERT_EQ(0, module_unload());
	tsc_sysclock_realtime_bounded(&c, &b);
	EXPECT_EQ(t0.disruptions + 1, b.disruptions) TH_LOG("the unload not counted at once");
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&c, &t));
	EXPECT_EQ(t0.by_cause[TSC_DISRUPTION_CLOCKSOURCE] + 1, t.by_cause[TSC_DISRUPTION_CLOCKSOURCE]);
	EXPECT_EQ(0u, t.reading_ns) TH_LOG("clock_gettime() since");
	EXPECT_TRUE(t.flags & TSC_BOUND_DISRUPTED) TH_LOG("the daemon spoke of the clock read another way");

	ASSERT_EQ(0, module_load(""));
	counted_within_3s(_metadata, &c, t.disruptions, &t1);
	EXPECT_EQ(t.disruptions + 1, t1.disruptions) TH_LOG("the load, seen through clock_gettime()");
	EXPECT_EQ(t.by_cause[TSC_DISRUPTION_CLOCKSOURCE] + 1, t1.by_cause[TSC_DISRUPTION_CLOCKSOURCE]);
	EXPECT_EQ(0u, t1.reading_ns) TH_LOG("the old page's clock stays on clock_gettime()");
	t = t1;
	for (int i = 0; i < 1000; i++) {
		tsc_sysclock_realtime_bounded(&c, &b);
		ASSERT_EQ(t.disruptions, b.disruptions) TH_LOG("the old page's clock counted again");
	}
	ASSERT_EQ(0, tsc_sysclock_init(&again, NULL)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_KERNEL, again.path) TH_LOG("%s", again.why);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&again, &t1));
	EXPECT_EQ(1u, t1.reading_ns) TH_LOG("the new page");
	EXPECT_EQ(t.disruptions, t1.disruptions)
		TH_LOG("a new page's clock goes on from the old page's, which saw the load");
	EXPECT_EQ(t.by_cause[TSC_DISRUPTION_CLOCKSOURCE], t1.by_cause[TSC_DISRUPTION_CLOCKSOURCE]);
	EXPECT_TRUE(t1.flags & TSC_BOUND_DISRUPTED) TH_LOG("the old page's disruption goes on");
}

/*
 * A switch of the clocksource away from tsc and back, as libtsc's bounded
 * clocks count it: one on the module's page sees its page withdrawn and
 * back at once; one through clock_gettime() (a sysfs root with the
 * kernel's clocksource directory and no page) reads the clocksource at
 * its next refresh.  Each counts two changes, no more, and has no bound
 * since (no daemon spoke).
 */
TEST_F(module, a_bounded_clock_counts_a_clocksource_switch)
{
	TSC_SYSCLOCK_OPTS(o, .sysfs_root = no_page_root());
	TSC_SYSCLOCK(c);
	TSC_SYSCLOCK(n);
	TSC_BOUND_TERMS(c0);
	TSC_BOUND_TERMS(n0);
	TSC_BOUND_TERMS(t);
	char other[32];

	ASSERT_EQ(0, module_load(""));
	other_clocksource(other, sizeof(other));
	if (!clocksource_is_tsc() || !other[0])
		SKIP(return, "the clocksource is not tsc, or there is no other: no switch to make");
	ASSERT_NE(NULL, o.sysfs_root) TH_LOG("a root without the page: %s", strerror(errno));
	ASSERT_EQ(0, tsc_sysclock_init(&c, NULL)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_KERNEL, c.path) TH_LOG("%s", c.why);
	ASSERT_EQ(0, tsc_sysclock_init(&n, &o)) TH_LOG("%s", tsc_last_error());
	ASSERT_NE(TSC_SYSCLOCK_KERNEL, n.path) TH_LOG("%s", n.why);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&c, &c0));
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&n, &n0));

	for (int leg = 1; leg <= 2; leg++) {
		const char *to = leg == 1 ? other : "tsc";

		ASSERT_LT(0, write_file(CS_DIR "current_clocksource", to, strlen(to)));
		ASSERT_EQ(0, tsc_sysclock_bound_terms(&c, &t));
		EXPECT_EQ(c0.disruptions + leg, t.disruptions) TH_LOG("the page's clock, to %s", to);
		EXPECT_EQ(c0.by_cause[TSC_DISRUPTION_CLOCKSOURCE] + leg,
			  t.by_cause[TSC_DISRUPTION_CLOCKSOURCE]);
		EXPECT_TRUE(t.flags & TSC_BOUND_DISRUPTED);
		counted_within_3s(_metadata, &n, n0.disruptions + leg - 1, &t);
		EXPECT_EQ(n0.disruptions + leg, t.disruptions)
			TH_LOG("clock_gettime()'s clock, to %s", to);
		EXPECT_EQ(n0.by_cause[TSC_DISRUPTION_CLOCKSOURCE] + leg,
			  t.by_cause[TSC_DISRUPTION_CLOCKSOURCE]);
		EXPECT_TRUE(t.flags & TSC_BOUND_DISRUPTED);
	}
	/* A refresh more, nothing moved: nothing more counted. */
	usleep(1100000);
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&n, &t));
	EXPECT_EQ(n0.disruptions + 2, t.disruptions);
	tsc_sysclock_fini(&n);
	tsc_sysclock_fini(&c);
}

/*
 * Only the core timekeeper writes the page: the auxiliary clocks of 6.17
 * and later have timekeepers of their own, whose updates must not reach
 * it.  Enable auxiliary clock 0, step it by a day and slew it by 500 ppm:
 * the page's generation and rate stay the core's.  (Debian's kernels are
 * built without CONFIG_POSIX_AUX_CLOCKS; the test skips there.)
 */
#define AUX_ENABLE	"/sys/kernel/time/aux_clocks/0/aux_clock_enable"
#define CLOCK_AUX0	16	/* CLOCK_AUX, MAX_CLOCKS in <linux/time.h> */

TEST_F(module, auxiliary_clocks_do_not_reach_the_page)
{
	const volatile struct tscfk_clock_page *p;
	struct timex tx = { .modes = ADJ_FREQUENCY, .freq = 500L << 16 };
	struct timespec ts;
	uint32_t gen;
	uint64_t interval, ntp_tick;

	if (access(AUX_ENABLE, W_OK))
		SKIP(return, "no auxiliary clocks in this kernel (CONFIG_POSIX_AUX_CLOCKS, 6.17 on)");
	ASSERT_EQ(0, module_load(""));
	p = map_page(_metadata);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(1, write_file(AUX_ENABLE, "1", 1));
	usleep(100000);
	gen = p->generation;
	interval = p->cycle_interval;
	ntp_tick = p->ntp_tick;
	ASSERT_EQ(0, clock_gettime(CLOCK_AUX0, &ts)) TH_LOG("%s", strerror(errno));
	ts.tv_sec += 86400;
	EXPECT_EQ(0, clock_settime(CLOCK_AUX0, &ts)) TH_LOG("%s", strerror(errno));
	EXPECT_LE(0, clock_adjtime(CLOCK_AUX0, &tx)) TH_LOG("%s", strerror(errno));
	usleep(300000);	/* updates of both timekeepers */
	EXPECT_EQ(gen, p->generation);
	EXPECT_EQ(interval, p->cycle_interval);
	EXPECT_EQ(ntp_tick, p->ntp_tick);
	write_file(AUX_ENABLE, "0", 1);
	munmap((void *)p, PAGE);
}

/*
 * The mapping a forked child inherited and never touched, whose parent,
 * the last other user of the page, has exited: after rmmod and
 * drop_caches it still reads the page, GONE, and libtsc's clock, reading
 * clock_gettime() then, is never 0.  (With the page in a page cache and
 * only page tables holding it, drop_caches freed it, and the child read a
 * fresh page of zeros: version 0, an even seq, a clock at 0.)
 */
TEST_F(module, an_orphaned_mapping_survives_eviction)
{
	int go[2], result[2];
	pid_t parent;
	int status;

	ASSERT_EQ(0, module_load(""));
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(result));
	parent = fork();
	ASSERT_LE(0, parent);
	if (parent == 0) {
		TSC_SYSCLOCK(clock);
		uint64_t t;

		if (tsc_sysclock_init(&clock, NULL) || !clock.page)
			_exit(1);
		t = tsc_sysclock_realtime(&clock);	/* the parent reads it */
		if (!t || fork() != 0)
			_exit(t ? 0 : 1);
		/* The child: waits, then reports what it reads. */
		uint64_t r[4];
		char c;

		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		r[0] = clock.page->version;
		r[1] = clock.page->flags;
		r[2] = tsc_sysclock_realtime(&clock);
		r[3] = now_ns(CLOCK_REALTIME);
		_exit(write(result[1], r, sizeof(r)) == sizeof(r) ? 0 : 1);
	}
	close(go[0]);
	close(result[1]);
	ASSERT_EQ(parent, waitpid(parent, &status, 0));
	ASSERT_EQ(0, status) TH_LOG("the parent could not map the page and read its clock");
	ASSERT_EQ(0, module_unload());
	sync();
	ASSERT_EQ(1, write_file("/proc/sys/vm/drop_caches", "3", 1));

	uint64_t r[4];

	ASSERT_EQ(1, write(go[1], "x", 1));
	ASSERT_EQ((ssize_t)sizeof(r), read(result[0], r, sizeof(r)));
	TH_LOG("the child read version %llu, flags %#llx, realtime %llu against %llu",
	       (unsigned long long)r[0], (unsigned long long)r[1],
	       (unsigned long long)r[2], (unsigned long long)r[3]);
	EXPECT_EQ(TSCFK_CLOCK_PAGE_VERSION, r[0]);
	EXPECT_EQ(TSCFK_CLOCK_GONE, r[1]);
	/* clock_gettime() after it, a second at most: a 0 is 56 years off. */
	EXPECT_LE(r[2], r[3]);
	EXPECT_GT(r[2] + 1000000000ULL, r[3]);
	close(go[1]);
	close(result[0]);
}

TEST_HARNESS_MAIN
