// SPDX-License-Identifier: GPL-2.0
/*
 * The module under stress, loaded and unloaded by the test itself: readers
 * hammering every file while the module comes and goes, files held open
 * across an unload, random parameters, and the IRQ-off bound at its
 * limits.  Each leaves no file behind, and the runner's dmesg_clean then
 * checks that the kernel said nothing bad (WARN, BUG, lockup, RCU stall).
 * Environment as lifecycle_test: $TSCFK_KO, $TSCFK_CYCLES (default 200),
 * and $TSCFK_OVERCOMMITTED in guests with more vCPUs than host CPUs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>

#include "../testlib/harness.h"
#include "tscfk_test.h"
#include "module_fixture.h"

#define MAX_FILES	1024
#define MAX_READERS	64

static char files[MAX_FILES][PATH_MAX];
static int nfiles;

struct reader {
	atomic_bool *stop;
	unsigned int first;
	unsigned long good, gone, bad;
	char last_bad[PATH_MAX + 64];
};

/*
 * A file of a module that comes and goes reads well, or is gone: ENOENT
 * before open, ENODEV when it went between open and read.
 */
static void *hammer(void *arg)
{
	struct reader *r = arg;

	/*
	 * At nice 19: the readers take every moment the loader leaves, but
	 * the loader is not made to queue behind them for the CPU.  What
	 * is tested is the module under concurrent reads, not CFS.
	 */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);

	for (unsigned int i = r->first; !atomic_load(r->stop); i++) {
		const char *path = files[i % nfiles];
		char buf[64];
		int n = read_file(path, buf, sizeof(buf));

		if (n == -ENOENT || n == -ENODEV) {
			r->gone++;
		} else if (value_well_formed(path, n, buf)) {
			r->good++;
		} else {
			r->bad++;
			snprintf(r->last_bad, sizeof(r->last_bad), "%s: %s",
				 path, n < 0 ? strerror(-n) : buf);
		}
	}
	return NULL;
}

/*
 * Four readers per CPU, each through every file in turn, while the module
 * is loaded and unloaded $TSCFK_CYCLES times.  Under TCG they make a cycle
 * up to twice as slow, hence the long timeout.  In a guest with more vCPUs
 * than host CPUs they all run on the reference CPU: spread out, they keep
 * every vCPU busy, the two a measurement needs seldom get host CPUs at
 * once, and a cycle took 1.1-2.1 s instead of 0.1 s (4 vCPUs on 2 host
 * CPUs); on any other one CPU, still 0.7 s.
 */
TEST_F_TIMEOUT(module, readers_during_load_unload, 900)
{
	static struct reader readers[MAX_READERS];
	pthread_t threads[MAX_READERS];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int n = cpus * 4 < MAX_READERS ? (int)cpus * 4 : MAX_READERS;
	unsigned long good = 0, gone = 0;
	uint64_t start = now_ns(CLOCK_MONOTONIC), load_ns = 0, unload_ns = 0;
	atomic_bool stop = false;
	pthread_attr_t attr;
	int i;

	ASSERT_EQ(0, pthread_attr_init(&attr));
	/* The file list of a loaded module, read while it is loaded. */
	ASSERT_EQ(0, module_load(""));
	nfiles = module_files(files, MAX_FILES);
	ASSERT_LT(0, nfiles);
	if (getenv("TSCFK_OVERCOMMITTED")) {
		int ref = (int)READ_S64(TSC_DIR "/reference_cpu");
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(ref, &one);
		ASSERT_EQ(0, pthread_attr_setaffinity_np(&attr, sizeof(one), &one));
		TH_LOG("%s: the readers share cpu%d, the reference", getenv("TSCFK_OVERCOMMITTED"),
		       ref);
	}
	for (i = 0; i < n; i++) {
		readers[i] = (struct reader){ .stop = &stop, .first = i * 7 };
		ASSERT_EQ(0, pthread_create(&threads[i], &attr, hammer, &readers[i]));
	}
	for (i = 0; i < load_cycles(); i++) {
		uint64_t t0 = now_ns(CLOCK_MONOTONIC), t1;

		if (i > 0)
			ASSERT_EQ(0, module_load("")) TH_LOG("cycle %d", i);
		t1 = now_ns(CLOCK_MONOTONIC);
		load_ns += t1 - t0;
		ASSERT_LE(1u, READ_U64(TSC_DIR "/generation"));
		t0 = now_ns(CLOCK_MONOTONIC);
		ASSERT_EQ(0, module_unload()) TH_LOG("cycle %d", i);
		unload_ns += now_ns(CLOCK_MONOTONIC) - t0;
	}
	atomic_store(&stop, true);
	for (i = 0; i < n; i++) {
		pthread_join(threads[i], NULL);
		good += readers[i].good;
		gone += readers[i].gone;
		EXPECT_EQ(0u, readers[i].bad) TH_LOG("reader %d: %s", i,
						     readers[i].last_bad);
	}
	expect_no_files(_metadata);
	TH_LOG("%d cycles, %d readers of %d files: %lu good reads, %lu of a file gone",
	       load_cycles(), n, nfiles, good, gone);
	TH_LOG("per cycle: %.1f ms, of which load %.1f ms, unload %.1f ms",
	       (now_ns(CLOCK_MONOTONIC) - start) / 1e6 / (load_cycles() ? load_cycles() : 1),
	       load_ns / 1e6 / (load_cycles() ? load_cycles() : 1),
	       unload_ns / 1e6 / (load_cycles() ? load_cycles() : 1));
	/*
	 * Both sides of the race were hit, or it was not a race: each is hit
	 * dozens of times a cycle, even under KASAN.
	 */
	if (load_cycles() >= 10) {
		EXPECT_LT(0u, good);
		EXPECT_LT(0u, gone);
	}
}

/*
 * An open file pins nothing: unload succeeds, and the old descriptors read
 * and write ENODEV, even once a new instance of the module has the same
 * paths again.
 */
TEST_F(module, files_held_open_across_unload)
{
	static int fds[MAX_FILES];
	char buf[64];
	int trigger, i;

	ASSERT_EQ(0, module_load(""));
	nfiles = module_files(files, MAX_FILES);
	ASSERT_LT(0, nfiles);
	for (i = 0; i < nfiles; i++) {
		int n;

		fds[i] = open(files[i], O_RDONLY);
		ASSERT_LE(0, fds[i]) TH_LOG("%s: %s", files[i], strerror(errno));
		n = (int)pread(fds[i], buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		EXPECT_TRUE(value_well_formed(files[i], n < 0 ? -errno : n, buf))
			TH_LOG("%s: '%s'", files[i], buf);
	}
	trigger = open(TSC_DIR "/remeasure", O_WRONLY);
	ASSERT_LE(0, trigger);

	ASSERT_EQ(0, module_unload());
	expect_no_files(_metadata);
	for (i = 0; i < nfiles; i++) {
		EXPECT_EQ(-1, pread(fds[i], buf, sizeof(buf), 0)) TH_LOG("%s", files[i]);
		EXPECT_EQ(ENODEV, errno) TH_LOG("%s", files[i]);
	}
	EXPECT_EQ(-1, write(trigger, "1", 1));
	EXPECT_EQ(ENODEV, errno);

	ASSERT_EQ(0, module_load(""));
	for (i = 0; i < nfiles; i++) {
		int n = read_file(files[i], buf, sizeof(buf));

		EXPECT_TRUE(value_well_formed(files[i], n, buf)) TH_LOG("%s", files[i]);
		EXPECT_EQ(-1, pread(fds[i], buf, sizeof(buf), 0)) TH_LOG("%s", files[i]);
		EXPECT_EQ(ENODEV, errno) TH_LOG("%s", files[i]);
		close(fds[i]);
	}
	EXPECT_EQ(-1, write(trigger, "1", 1));
	EXPECT_EQ(ENODEV, errno);
	close(trigger);
	ASSERT_EQ(0, module_unload());
	expect_no_files(_metadata);
}

/* Each parameter's valid range, as the module documents it. */
static const struct {
	const char *name;
	long long min, max;
} ranges[] = {
	{ "rounds", 8, 1000000 },
	{ "irqoff_max_us", 1, 1000 },
	{ "timeout_ms", 10, 60000 },
	{ "reference_cpu", -1, MAX_CPUS },
};

/*
 * Values a hostile or careless modprobe.d could hold.  No valid rounds here
 * exceeds 10000, so that no load takes long (rounds=1000000 is
 * lifecycle_test's, with a short timeout).
 */
static const char *const values[] = {
	"", "0", "-0", "1", "-1", "-2", "4", "5", "7", "8", "9", "10", "11",
	"100", "1000", "9999", "10000", "10001", "60001", "1000001",
	"2147483647", "2147483648", "4294967295", "4294967296", "-2147483649",
	"18446744073709551615", "18446744073709551616", "99999999999999999999999",
	"0x10", "010", "+8", "1e3", "8.5", "abc", "8abc", "\"8\"", "8,9", "\"\"",
	"%s%s%n", "'8'", "\\x38",
};

/*
 * Every value once, each given to the next parameter in turn; then random
 * strings of one to three (a fixed seed: failures reproduce), as many as
 * the load/unload cycles, up to 100.  Every load either fails with EINVAL
 * or ERANGE, or succeeds with every parameter in its range and a complete
 * measurement.
 */
TEST_F_TIMEOUT(module, random_parameters, 900)
{
	const int sweep = ARRAY_SIZE(values);
	const int loads = sweep + (load_cycles() < 100 ? load_cycles() : 100);
	int loaded = 0, refused = 0;
	unsigned int seed = 20261122;

	for (int i = 0; i < loads; i++) {
		char params[512] = "";
		size_t len = 0;
		int nparams = i < sweep ? 1 : 1 + rand_r(&seed) % 3, ret;

		for (int p = 0; p < nparams && len < sizeof(params); p++) {
			const char *name = ranges[i < sweep ? i % ARRAY_SIZE(ranges) :
					   rand_r(&seed) % ARRAY_SIZE(ranges)].name;
			const char *val = values[i < sweep ? i : rand_r(&seed) % sweep];

			len += snprintf(params + len, sizeof(params) - len, "%s%s=%s",
					p ? " " : "", name, val);
		}
		ret = module_load(params);
		if (ret == -EINVAL || ret == -ERANGE) {
			refused++;
			expect_no_files(_metadata);
			continue;
		}
		ASSERT_EQ(0, ret) TH_LOG("'%s': %s", params, strerror(-ret));
		loaded++;
		for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
			char path[128];
			int64_t v;

			snprintf(path, sizeof(path), MODULE_DIR "/parameters/%s",
				 ranges[r].name);
			v = READ_S64(path);
			EXPECT_LE(ranges[r].min, v) TH_LOG("'%s': %s", params, path);
			EXPECT_GE(ranges[r].max, v) TH_LOG("'%s': %s", params, path);
		}
		EXPECT_LE(1u, READ_U64(TSC_DIR "/generation")) TH_LOG("'%s'", params);
		ASSERT_EQ(0, module_unload());
	}
	TH_LOG("%d parameter strings (%d of each value once, then random): %d loaded, %d refused",
	       loads, sweep, loaded, refused);
	EXPECT_LT(0, loaded);
	EXPECT_LT(0, refused);
}

/*
 * The IRQ-off window bound holds at its limits and in between, within 1 ms
 * (SMIs and the like), in the best of three measurements
 * (irqoff_best_of_three()).  That slack is wide enough to hide a bound
 * that is ignored (a pair's natural window is well under 1 ms), so the
 * bound must also be obeyed: the longest window at 10000 us is longer
 * than twice the one at 1 us.  Measured under TCG, best of three: 382 to
 * 584 us against 1.8 to 23 us, where the host's noise put all three
 * windows at 1 us at 23-59 us once; a constant bound, whatever its value,
 * gives about 1x.  In an overcommitted guest the host deschedules vCPUs
 * all the time; there the figures are only logged, and the test says it
 * skipped.
 */
TEST_F(module, irqoff_bound_at_limits)
{
	static const int bounds[] = { 1, 100, 1000 };
	const int nbounds = ARRAY_SIZE(bounds);
	const char *overcommitted = getenv("TSCFK_OVERCOMMITTED");
	uint64_t best[ARRAY_SIZE(bounds)];

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "one CPU online: no IRQ-off windows to measure");
	for (int i = 0; i < nbounds; i++) {
		uint64_t ns[3];
		char params[64];

		snprintf(params, sizeof(params), "irqoff_max_us=%d", bounds[i]);
		ASSERT_EQ(0, module_load(params));
		best[i] = irqoff_best_of_three(ns);
		ASSERT_LT(0u, best[i]);
		TH_LOG("irqoff_max_us=%d: longest window per measurement %" PRIu64
		       ", %" PRIu64 ", %" PRIu64 " ns", bounds[i], ns[0], ns[1], ns[2]);
		if (!overcommitted)
			EXPECT_GE((bounds[i] + 1000) * 1000ull, best[i]);
		ASSERT_EQ(0, module_unload());
	}
	if (overcommitted)
		SKIP(return, "bound not asserted: %s", overcommitted);
	EXPECT_LT(2 * best[0], best[nbounds - 1])
		TH_LOG("the bound is not obeyed: %" PRIu64 " ns at %d us, %" PRIu64 " ns at %d us",
		       best[0], bounds[0], best[nbounds - 1], bounds[nbounds - 1]);
}

TEST_HARNESS_MAIN
