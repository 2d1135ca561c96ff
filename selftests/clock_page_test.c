// SPDX-License-Identifier: GPL-2.0
/*
 * tsc/clock_page and tsc/timekeeper_freq_millihz: the page maps read-only
 * and nothing else; where the clocks read the TSC, each clock computed
 * from the page at a TSC reading lies between the same computation just
 * before and just after clock_gettime() (0 violations); its generation
 * follows a step of the clock and a clocksource switch; a mapping outlives
 * the module and then says it is gone.  Loads the module itself, from
 * $TSCFK_KO; starts and ends with it unloaded.
 */
#define _GNU_SOURCE
#include <math.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "tscfk_test.h"
#include "module_fixture.h"
#include "tsc_clock_page.h"

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
 * Clock c at a TSC reading taken inside the page's sequence count, as a
 * reader of the ABI does it: 1 and the time in *ns; 0 if the page says
 * the clocks do not read the TSC (*flags says what it says).
 */
static int page_read(const volatile struct tscfk_clock_page *p, int c, uint64_t *ns,
		     uint16_t *flags)
{
	for (;;) {
		uint32_t seq = __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE);
		struct tscfk_clock_page s;
		struct tscfk_clock_map m;
		uint64_t t;

		/* Odd: being written, or, without TSC in flags, not to be used. */
		if (seq & 1) {
			*flags = p->flags;
			if (!(*flags & TSCFK_CLOCK_TSC))
				return 0;
			continue;
		}
		s = *p;
		t = rdtsc_fenced();
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&p->seq, __ATOMIC_RELAXED) != seq)
			continue;
		*flags = s.flags;
		if (!(s.flags & TSCFK_CLOCK_TSC))
			return 0;
		if (c == RAW) {
			m = s.raw;
		} else {
			m = (struct tscfk_clock_map){ s.mult_ns, s.mult, s.frac, 0 };
			m.off = c == REAL ? s.real_off : c == MONO ? s.mono_off :
				c == BOOT ? s.boot_off : s.tai_off;
		}
		*ns = tscfk_clock_ns(&m, s.cycle_last, t);
		return 1;
	}
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
	/* Dropped and faulted in again, it is the same page. */
	if (madvise(p, PAGE, MADV_DONTNEED) == 0) {
		EXPECT_EQ(TSCFK_CLOCK_PAGE_VERSION, ((struct tscfk_clock_page *)p)->version);
	} else {	/* A kernel without CONFIG_ADVISE_SYSCALLS, as the debug one. */
		EXPECT_EQ(ENOSYS, errno);
	}
	munmap(p, PAGE);
	/* read() gives the page as a mapping sees it: a whole page. */
	EXPECT_EQ(PAGE, pread(fd, buf, sizeof(buf), 0));
	EXPECT_EQ(TSCFK_CLOCK_PAGE_VERSION, ((struct tscfk_clock_page *)buf)->version);
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
	munmap((void *)p, PAGE);
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
	munmap((void *)p, PAGE);
}

/* A switch of the clocksource away from tsc and back. */
TEST_F(module, generation_follows_a_clocksource_switch)
{
	const volatile struct tscfk_clock_page *p;
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
	gen = p->generation;
	ASSERT_LT(0, write_file(CS_DIR "current_clocksource", other, strlen(other)));
	EXPECT_EQ(0, page_read(p, MONO, &ns, &flags)) TH_LOG("on %s", other);
	EXPECT_NE(gen, p->generation);
	gen = p->generation;
	ASSERT_LT(0, write_file(CS_DIR "current_clocksource", "tsc", 3));
	EXPECT_EQ(1, page_read(p, MONO, &ns, &flags));
	EXPECT_NE(gen, p->generation);
	EXPECT_EQ(0, violations(_metadata, p, MONO, 1000));
	munmap((void *)p, PAGE);
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

TEST_HARNESS_MAIN
