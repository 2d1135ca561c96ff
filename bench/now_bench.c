// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Cost per call of libtsc's clock against the raw instructions and the
 * system clock, measured side by side in one run: the variants take turns
 * within every round, so machine noise hits them alike, and each variant's
 * median over the rounds is compared.
 *
 * Usage: now_bench [--quick]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#include "libtsc.h"
#include "../testlib/no_page_root.h"

static TSC_CLOCK(clk);

/*
 * The system clock's fast path on a page of this process's (the same
 * arithmetic as on the module's page, whatever this machine has), and on
 * the module's page where there is one.
 */
static struct tsc_timepage page __attribute__((aligned(64)));
static TSC_SYSCLOCK(page_clock);
static TSC_SYSCLOCK(sysclock);
/* Disciplined: on an empty sysfs root, so that the module's page is not used. */
static TSC_SYSCLOCK(disc_clock);
/* The same, synced by its readers: the front door's path where there is no page. */
static TSC_SYSCLOCK(readers_clock);
/*
 * On page's twin, a file in a sysfs root of the bench's own mapped as the
 * module's page is: a clock whose bounded reader takes its fast path
 * whatever this machine has.
 */
static TSC_SYSCLOCK(file_clock);
static char file_root[] = "/tmp/libtsc-bench-page.XXXXXX";
/* Its directories, each inside the one before, and the page in the last. */
static const char *const file_dirs[] = {
	"/devices", "/devices/system", "/devices/system/cpu", "/devices/system/cpu/tsc",
};
#define NDIRS (sizeof(file_dirs) / sizeof(file_dirs[0]))
#define FILE_PAGE "/devices/system/cpu/tsc/clock_page"

static void file_root_remove(void)
{
	char path[sizeof(file_root) + sizeof(FILE_PAGE)];

	snprintf(path, sizeof(path), "%s" FILE_PAGE, file_root);
	unlink(path);
	for (size_t i = NDIRS; i--;) {
		snprintf(path, sizeof(path), "%s%s", file_root, file_dirs[i]);
		rmdir(path);
	}
	rmdir(file_root);
}

/* A root holding p as its clock page: its path, or NULL. */
static const char *page_root(const struct tsc_timepage *p)
{
	char path[sizeof(file_root) + sizeof(FILE_PAGE)], page_buf[4096] = { 0 };
	ssize_t n;
	int fd;

	if (!mkdtemp(file_root) || atexit(file_root_remove))
		return NULL;
	for (size_t i = 0; i < NDIRS; i++) {
		snprintf(path, sizeof(path), "%s%s", file_root, file_dirs[i]);
		if (mkdir(path, 0755))
			return NULL;
	}
	snprintf(path, sizeof(path), "%s" FILE_PAGE, file_root);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		return NULL;
	memcpy(page_buf, p, sizeof(*p));
	n = write(fd, page_buf, sizeof(page_buf));
	close(fd);
	return n == (ssize_t)sizeof(page_buf) ? file_root : NULL;
}

static inline uint64_t rdtscp(void)
{
	uint32_t lo, hi, aux;

	__asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	return ((uint64_t)hi << 32) | lo;
}

/* The end stamp Intel's guide gives, for comparison with tsc_clock_now(). */
static inline uint64_t rdtscp_lfence(void)
{
	uint32_t lo, hi, aux;

	__asm__ __volatile__("rdtscp; lfence" : "=a"(lo), "=d"(hi), "=c"(aux) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}

static uint64_t ns_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * A bare rdtsc plus one load of a parameter: the floor for any clock that
 * keeps one in memory.  On silicon the load hides behind the rdtsc; under
 * emulation (QEMU's TCG) every load is paid in full, and this says so.
 */
static volatile uint64_t one_param;

/* Each loop consumes every result, so that none can be optimised away. */
#define LOOP(name, expr)						\
static uint64_t name(unsigned long n)					\
{									\
	uint64_t acc = 0;						\
									\
	for (unsigned long i = 0; i < n; i++)				\
		acc += (expr);						\
	return acc;							\
}

LOOP(loop_rdtsc, tsc_ticks_unordered())
LOOP(loop_rdtsc_lfence, tsc_rdtsc_ordered())
LOOP(loop_rdtscp, rdtscp())
LOOP(loop_now, tsc_clock_now_unordered(&clk))
LOOP(loop_now_ordered, tsc_clock_now(&clk))
LOOP(loop_clock_gettime, ns_now())
LOOP(loop_rdtsc_start, tsc_rdtsc_start())
LOOP(loop_now_start, tsc_now_start(&clk))
LOOP(loop_rdtscp_lfence, rdtscp_lfence())
LOOP(loop_page_clock, tsc_sysclock_monotonic(&page_clock))
LOOP(loop_sysclock, tsc_sysclock_monotonic(&sysclock))
LOOP(loop_disc_clock, tsc_sysclock_monotonic(&disc_clock))
LOOP(loop_sysclock_real, tsc_sysclock_realtime(&sysclock))
LOOP(loop_disc_real, tsc_sysclock_realtime(&disc_clock))
LOOP(loop_rdtsc_load, tsc_ticks_unordered() + one_param)

/*
 * The exact arithmetic alone, MONOTONIC = hi64(t * mult + frac) + off, its
 * parameters loaded before the read as the system clocks load them, and
 * no sequence count, staleness or page check: the floor for any exact
 * clock.  After an ordered read it is paid in full, since the next
 * iteration's lfence or rdtscp waits for this one's multiplication.
 */
static volatile struct {
	uint64_t mult, frac, off;
} exact_params;

static inline uint64_t exact(uint64_t (*read)(void))
{
	__extension__ unsigned __int128 x;
	uint64_t mult = exact_params.mult, frac = exact_params.frac;
	uint64_t off = exact_params.off;

	x = read();
	x = x * mult + frac;
	return (uint64_t)(x >> 64) + off;
}
LOOP(loop_page_clock_u, tsc_sysclock_monotonic_unordered(&page_clock))
LOOP(loop_sysclock_u, tsc_sysclock_monotonic_unordered(&sysclock))
LOOP(loop_disc_clock_u, tsc_sysclock_monotonic_unordered(&disc_clock))
LOOP(loop_exact_rdtsc, exact(tsc_ticks_unordered))
LOOP(loop_exact_lfence, exact(tsc_rdtsc_ordered))
LOOP(loop_exact_rdtscp, exact(tsc__rdtscp))
LOOP(loop_front, tsc_monotonic_ns())
LOOP(loop_front_u, tsc_monotonic_ns_unordered())
LOOP(loop_front_real, tsc_realtime_ns())
LOOP(loop_readers_clock, tsc_sysclock_monotonic(&readers_clock))
LOOP(loop_readers_clock_u, tsc_sysclock_monotonic_unordered(&readers_clock))

/*
 * A bounded reading, consumed as a program would (the interval, the flags;
 * now lies between the two): two additions deep, as the plain reads' one.
 */
static inline uint64_t used(const struct tsc_time_bound *b)
{
	return (b->earliest + b->latest) + (b->flags + b->disruptions);
}

static inline uint64_t file_bounded(void)
{
	struct tsc_time_bound b;

	tsc_sysclock_realtime_bounded(&file_clock, &b);
	return used(&b);
}

static inline uint64_t front_bounded(void)
{
	struct tsc_time_bound b;

	tsc_realtime_bounded(&b);
	return used(&b);
}

static uint64_t real_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
LOOP(loop_file_real, tsc_sysclock_realtime(&file_clock))
LOOP(loop_file_bounded, file_bounded())
LOOP(loop_front_bounded, front_bounded())
LOOP(loop_gettime_real, real_now())

static const struct variant {
	const char *name;
	uint64_t (*loop)(unsigned long n);
} variants[] = {
	{ "rdtsc", loop_rdtsc },
	{ "lfence;rdtsc", loop_rdtsc_lfence },
	{ "rdtscp", loop_rdtscp },
	{ "tsc_clock_now_unordered", loop_now },
	{ "tsc_clock_now", loop_now_ordered },
	{ "clock_gettime(MONOTONIC)", loop_clock_gettime },
	{ "lfence;rdtsc;lfence", loop_rdtsc_start },
	{ "tsc_now_start", loop_now_start },
	{ "rdtscp;lfence", loop_rdtscp_lfence },
	{ "tsc_sysclock_monotonic(page)", loop_page_clock },
	{ "tsc_sysclock_monotonic", loop_sysclock },
	{ "tsc_sysclock_monotonic(disc)", loop_disc_clock },
	{ "tsc_sysclock_realtime", loop_sysclock_real },
	{ "tsc_sysclock_realtime(disc)", loop_disc_real },
	{ "rdtsc + one load", loop_rdtsc_load },
	{ "..._monotonic_unordered(page)", loop_page_clock_u },
	{ "..._monotonic_unordered", loop_sysclock_u },
	{ "..._monotonic_unordered(disc)", loop_disc_clock_u },
	{ "rdtsc + exact arithmetic", loop_exact_rdtsc },
	{ "lfence;rdtsc + exact arithmetic", loop_exact_lfence },
	{ "rdtscp + exact arithmetic", loop_exact_rdtscp },
	{ "tsc_monotonic_ns", loop_front },
	{ "tsc_monotonic_ns_unordered", loop_front_u },
	{ "tsc_realtime_ns", loop_front_real },
	{ "tsc_sysclock_monotonic(readers)", loop_readers_clock },
	{ "..._monotonic_unordered(readers)", loop_readers_clock_u },
	{ "tsc_sysclock_realtime(file page)", loop_file_real },
	{ "..._realtime_bounded(file page)", loop_file_bounded },
	{ "tsc_realtime_bounded", loop_front_bounded },
	{ "clock_gettime(REALTIME)", loop_gettime_real },
};
#define NV (sizeof(variants) / sizeof(variants[0]))

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * tsc_clock_check(): clock_gettime() calls and sysfs reads, a cost to pay
 * now and then, not per reading; its median per call over rounds of 100.
 */
static void check_cost(unsigned int rounds, double gettime_ns)
{
	double per_call[21] = { 0 };
	int err = 0;

	for (unsigned int r = 0; r < rounds; r++) {
		uint64_t t0 = ns_now();

		for (int i = 0; i < 100; i++)
			err |= tsc_clock_check(&clk);
		per_call[r] = (double)(ns_now() - t0) / 100;
	}
	qsort(per_call, rounds, sizeof(double), cmp);
	printf("tsc_clock_check                %.2f us  (%.0fx clock_gettime; %s%s)\n",
	       per_call[rounds / 2] / 1e3, per_call[rounds / 2] / gettime_ns,
	       err ? "fails: " : "passes", err ? tsc_last_error() : "");
}

/*
 * A sync of the clock its readers sync, as the reader that finds one due
 * makes it (about once a second, in passing): tsc_sysclock_sync() on that
 * clock takes the same path.  The rare slow read, per call, the median
 * over rounds of 10.
 */
static void sync_cost(unsigned int rounds, double gettime_ns)
{
	double per_call[21] = { 0 };
	int err = 0, failed = 0;

	if (readers_clock.path != TSC_SYSCLOCK_DISCIPLINED) {
		printf("a reader's sync                none: no disciplined clock here\n");
		return;
	}
	for (unsigned int r = 0; r < rounds; r++) {
		uint64_t t0 = ns_now();

		for (int i = 0; i < 10; i++) {
			int e = tsc_sysclock_sync(&readers_clock);

			failed += e != 0;
			err = e ? e : err;
		}
		per_call[r] = (double)(ns_now() - t0) / 10;
	}
	qsort(per_call, rounds, sizeof(double), cmp);
	printf("a reader's sync                %.2f us  (%.0fx clock_gettime; once a second, by the reader that finds it due; %d of %u failed%s%s)\n",
	       per_call[rounds / 2] / 1e3, per_call[rounds / 2] / gettime_ns, failed, rounds * 10,
	       err ? ": " : "", err ? tsc_last_error() : "");
}

/*
 * clock_gettime(REALTIME) and adjtimex(): the time and the kernel's
 * maxerror without libtsc, a system call each time; per call, the median
 * over rounds of 1000.
 */
static volatile uint64_t adjtimex_sink;

static double gettime_adjtimex_cost(unsigned int rounds)
{
	double per_call[21] = { 0 };
	uint64_t sink = 0;

	for (unsigned int r = 0; r < rounds; r++) {
		uint64_t t0 = ns_now();

		for (int i = 0; i < 1000; i++) {
			struct timex tx = { .modes = 0 };

			sink += real_now() + (uint64_t)adjtimex(&tx) + (uint64_t)tx.maxerror;
		}
		per_call[r] = (double)(ns_now() - t0) / 1000;
	}
	adjtimex_sink = sink;
	qsort(per_call, rounds, sizeof(double), cmp);
	return per_call[rounds / 2];
}

int main(int argc, char **argv)
{
	bool quick = argc > 1 && !strcmp(argv[1], "--quick");
	unsigned int rounds = quick ? 3 : 21;
	unsigned long n = quick ? 200000 : 2000000;
	double per_call[NV][21], median[NV];
	volatile uint64_t sink = 0;

	if (tsc_clock_init(&clk, NULL)) {
		fprintf(stderr, "now_bench: %s\n", tsc_last_error());
		return 1;
	}
	printf("frequency %.0f Hz from %s\n", clk.freq.hz, tsc_source_name(clk.freq.source));
	/* The anchored clock's own line, as a page: MONOTONIC = hi64(t * mult) + off. */
	page = (struct tsc_timepage){ .version = 1, .flags = TSC_TIMEPAGE_TSC, .seq = 2,
				      .mult_ns = (uint32_t)clk.conv.ns_int,
				      .mult = clk.conv.ns_frac, .mono_off = -clk.mono_off };
	if (tsc_sysclock_init(&sysclock, NULL) || tsc_sysclock_init(&page_clock, NULL)) {
		fprintf(stderr, "now_bench: %s\n", tsc_last_error());
		return 1;
	}
	page_clock.page = &page;
	{
		struct tsc_timepage fp = page;
		const char *root;

		fp.real_off = -clk.real_off;
		fp.boot_off = -clk.mono_off;
		root = page_root(&fp);
		TSC_SYSCLOCK_OPTS(fo, .sysfs_root = root);

		if (!root || tsc_sysclock_init(&file_clock, &fo) ||
		    file_clock.path != TSC_SYSCLOCK_KERNEL) {
			fprintf(stderr, "now_bench: a clock on a page of its own: %s\n",
				root ? file_clock.why : "no root");
			return 1;
		}
	}
	/* What init sets for a layout-1 page without the kernel's mult. */
	page_clock.max_delta = INT64_MAX;
	exact_params.mult = page.mult;
	exact_params.off = page.mono_off;
	printf("tsc_sysclock: %s\n", sysclock.why);
	printf("ordered reads with %s (picked at init)\n",
	       sysclock.use_rdtscp ? "rdtscp" : "lfence; rdtsc");
	{
		const char *root = no_page_root();
		TSC_SYSCLOCK_OPTS(o, .sysfs_root = root, .discipline = TSC_DISCIPLINE_HELPER);
		TSC_SYSCLOCK_OPTS(ro, .sysfs_root = root, .discipline = TSC_DISCIPLINE_READERS);

		if (!root) {
			perror("now_bench: a sysfs root without a page");
			return 1;
		}
		if (tsc_sysclock_init(&disc_clock, &o) || tsc_sysclock_init(&readers_clock, &ro)) {
			fprintf(stderr, "now_bench: %s\n", tsc_last_error());
			return 1;
		}
		/* Refused where the kernel offers no TSC clocksource: measured as it is. */
		if (disc_clock.path != TSC_SYSCLOCK_DISCIPLINED)
			printf("disciplined: none: %s\n", disc_clock.why);
	}
	for (unsigned int r = 0; r < rounds; r++)
		for (size_t v = 0; v < NV; v++) {
			uint64_t t0 = ns_now();

			sink += variants[v].loop(n);
			per_call[v][r] = (double)(ns_now() - t0) / (double)n;
		}
	(void)sink;

	printf("%-30s %10s\n", "call", "ns (median)");
	for (size_t v = 0; v < NV; v++) {
		qsort(per_call[v], rounds, sizeof(double), cmp);
		median[v] = per_call[v][rounds / 2];
		printf("%-30s %10.2f\n", variants[v].name, median[v]);
	}
	printf("ratios (%u rounds of %lu calls each, side by side):\n", rounds, n);
	printf("  tsc_clock_now_unordered / rdtsc  %.3fx  (target <= 1.02)\n", median[3] / median[0]);
	printf("  tsc_clock_now_unordered / clock_gettime %.3fx  (target <= 0.45)\n",
	       median[3] / median[5]);
	printf("  rdtsc / clock_gettime            %.3fx  (the floor for any TSC clock)\n",
	       median[0] / median[5]);
	printf("  rdtsc + one load / rdtsc         %.3fx  (the floor for a clock with a parameter)\n",
	       median[14] / median[0]);
	printf("  tsc_clock_now / lfence;rdtsc     %.3fx\n", median[4] / median[1]);
	printf("  tsc_clock_now / rdtscp           %.3fx\n", median[4] / median[2]);
	printf("  tsc_clock_now / clock_gettime    %.3fx\n", median[4] / median[5]);
	printf("timed-section stamps: start tsc_now_start, end tsc_clock_now\n");
	printf("  tsc_now_start / lfence;rdtsc;lfence  %.3fx\n", median[7] / median[6]);
	printf("  tsc_now_start / rdtsc                %.3fx\n", median[7] / median[0]);
	printf("  tsc_clock_now / rdtscp;lfence        %.3fx  (the end stamp Intel's guide gives)\n",
	       median[4] / median[8]);
	printf("  start + end / clock_gettime          %.3fx  (one timed section)\n",
	       (median[7] + median[4]) / median[5]);
	bool disc = disc_clock.path == TSC_SYSCLOCK_DISCIPLINED;
	const char *none = "clock_gettime(): no disciplined clock here";

	{
		/*
		 * The ordered readers' floor: the exact arithmetic after the
		 * instruction each clock's init picked to order with (issue
		 * 39's; measured briefly, the picks may differ), and the
		 * cheaper of the two beside it.
		 */
#define FLOOR(c) median[(c).use_rdtscp ? 20 : 19]
		bool p = sysclock.use_rdtscp;
		const char *picked = p ? "rdtscp" : "lfence;rdtsc";
		double floor_ = FLOOR(sysclock), fence = median[1] < median[2] ? median[1] : median[2];

		printf("the system clocks (tsc_sysclock), ordered, against the exact arithmetic after the read each clock's init picked (%s for this machine's; the floor for any exact ordered clock):\n",
		       picked);
		printf("  on a page                            %.3fx  (target <= 1.03)\n",
		       median[9] / FLOOR(page_clock));
		printf("  this machine's                       %.3fx  (%s)\n", median[10] / floor_,
		       sysclock.path == TSC_SYSCLOCK_KERNEL ? "the module's page; target <= 1.03" :
		       "clock_gettime(): no page to read here");
		printf("  disciplined, its helper syncing      %.3fx  (%s)\n",
		       median[11] / FLOOR(disc_clock),
		       disc ? "the library's own page; target <= 1.03" : none);
		printf("  disciplined, its readers syncing     %.3fx  (%s)\n",
		       median[24] / FLOOR(readers_clock),
		       disc ? "the library's own page; target <= 1.03" : none);
		/* REALTIME takes another offset from the same cache line: the same cost. */
		printf("  realtime: this machine's             %.3fx  (%s)\n", median[12] / floor_,
		       sysclock.path == TSC_SYSCLOCK_KERNEL ? "target <= 1.03, as MONOTONIC's" :
		       "clock_gettime(): no page to read here");
		printf("  realtime: disciplined                %.3fx  (%s)\n",
		       median[13] / FLOOR(disc_clock), disc ? "target <= 1.03, as MONOTONIC's" : none);
#undef FLOOR
		printf("  that floor / %-13s           %.3fx  (what the arithmetic costs after the read)\n",
		       picked, floor_ / median[p ? 2 : 1]);
		printf("  on a page / the cheaper of lfence;rdtsc and rdtscp (%s here)  %.3fx\n",
		       median[1] < median[2] ? "lfence;rdtsc" : "rdtscp", median[9] / fence);
		printf("  on a page / clock_gettime            %.3fx\n", median[9] / median[5]);
	}
	printf("the system clocks, unordered (_unordered), against the exact arithmetic after rdtsc:\n");
	printf("  on a page                            %.3fx  (target <= 1.03)\n",
	       median[15] / median[18]);
	printf("  this machine's                       %.3fx  (%s)\n", median[16] / median[18],
	       sysclock.path == TSC_SYSCLOCK_KERNEL ? "the module's page; target <= 1.03" :
	       "clock_gettime(): no page to read here");
	printf("  disciplined, its helper syncing      %.3fx  (%s)\n", median[17] / median[18],
	       disc ? "the library's own page; target <= 1.03" : none);
	printf("  disciplined, its readers syncing     %.3fx  (%s)\n", median[25] / median[18],
	       disc ? "the library's own page; target <= 1.03" : none);
	printf("  that floor / rdtsc                   %.3fx  (what the arithmetic costs)\n",
	       median[18] / median[0]);
	{
		/*
		 * The front door against the struct readers on its own path:
		 * the module's page (this machine's clock), or disciplined by
		 * its readers; and both against the exact arithmetic.
		 */
		const char *why;
		bool kernel = tsc_time_path(&why) == TSC_SYSCLOCK_KERNEL;
		double fence = median[1] < median[2] ? median[1] : median[2];
		bool front_rdtscp = __atomic_load_n(&tsc__time.use_rdtscp, __ATOMIC_RELAXED);
		double exact_floor = median[front_rdtscp ? 20 : 19];
		double same = kernel ? median[10] : median[24], same_u = kernel ? median[16] : median[25];

		printf("the front door (tsc_monotonic_ns(): %s):\n", why);
		printf("  ordered / the struct reader on its path      %.3fx  (target <= 1.01)\n",
		       median[21] / same);
		printf("  unordered / the struct reader on its path    %.3fx  (target <= 1.01)\n",
		       median[22] / same_u);
		printf("  ordered / the exact arithmetic after %-7s %.3fx  (target <= 1.03; init's pick)\n",
		       front_rdtscp ? "rdtscp" : "lfence", median[21] / exact_floor);
		printf("  unordered / the exact arithmetic after rdtsc %.3fx  (target <= 1.03)\n",
		       median[22] / median[18]);
		printf("  tsc_realtime_ns / tsc_monotonic_ns           %.3fx  (the same cache line)\n",
		       median[23] / median[21]);
		printf("  ordered / clock_gettime                      %.3fx\n", median[21] / median[5]);
		printf("  ordered / %-13s                      %.3fx\n",
		       median[1] < median[2] ? "lfence;rdtsc" : "rdtscp", median[21] / fence);
	}
	{
		double with_adjtimex = gettime_adjtimex_cost(rounds);
		const char *why;

		(void)tsc_time_path(&why);
		printf("the bounded read (REALTIME and its bound), against the ordered read of REALTIME on its path:\n");
		printf("  on a page                            %.3fx  (target <= 1.15; %.2f vs %.2f ns)\n",
		       median[27] / median[26], median[27], median[26]);
		printf("  the front door                       %.3fx  (against tsc_realtime_ns(): %s)\n",
		       median[28] / median[23], why);
		printf("  on a page / clock_gettime(REALTIME)  %.3fx\n", median[27] / median[29]);
		printf("  clock_gettime() + adjtimex()         %.2f ns, %.1fx the bounded read on a page (what a program does without libtsc)\n",
		       with_adjtimex, with_adjtimex / median[27]);
	}
	check_cost(rounds, median[5]);
	sync_cost(rounds, median[5]);
	tsc_sysclock_fini(&readers_clock);
	tsc_sysclock_fini(&disc_clock);
	return 0;
}
