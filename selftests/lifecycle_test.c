// SPDX-License-Identifier: GPL-2.0
/*
 * Loading and unloading: bad parameters fail the load with EINVAL and a
 * message naming them, parameters at their limits load, a reference_cpu
 * that goes offline hands over to the first online CPU and takes back
 * over when it returns, and load/unload cycles leave nothing behind.  Loads the module itself through
 * finit_module(2), from $TSCFK_KO (uncompressed); starts and ends with it
 * unloaded.
 * $TSCFK_CYCLES sets the number of cycles (default 200).
 */
#include "../testlib/harness.h"
#include "tscfk_test.h"
#include "module_fixture.h"

/* Out of range, unparsable or unknown CPU: EINVAL, and a message. */
TEST_F(module, bad_parameters)
{
	static const struct {
		const char *params, *message;
	} bad[] = {
		{ "rounds=0", "rounds=0 is out of range" },
		{ "rounds=7", "rounds=7 is out of range" },
		{ "rounds=1000001", "rounds=1000001 is out of range" },
		{ "irqoff_max_us=0", "irqoff_max_us=0 is out of range" },
		{ "irqoff_max_us=1001", "irqoff_max_us=1001 is out of range" },
		{ "timeout_ms=9", "timeout_ms=9 is out of range" },
		{ "timeout_ms=60001", "timeout_ms=60001 is out of range" },
		{ "reference_cpu=-2", "reference_cpu=-2 is not an online CPU" },
		{ "reference_cpu=100000", "reference_cpu=100000 is not an online CPU" },
		{ "rounds=abc", "invalid for parameter `rounds'" },
		{ "rounds=-1", "invalid for parameter `rounds'" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
		char rec[1024];
		bool said = false;
		ssize_t n;

		ASSERT_LE(0, fd);
		lseek(fd, 0, SEEK_END);	/* only what this load prints */
		EXPECT_EQ(-EINVAL, module_load(bad[i].params)) TH_LOG("%s", bad[i].params);
		while ((n = read(fd, rec, sizeof(rec) - 1)) > 0) {
			rec[n] = '\0';
			said |= strstr(rec, bad[i].message) != NULL;
		}
		close(fd);
		EXPECT_TRUE(said) TH_LOG("no '%s' in the kernel log", bad[i].message);
		expect_no_files(_metadata);
	}
}

/* Each name=value of params reads back from parameters/name as value. */
static void expect_read_back(struct __test_metadata *_metadata, const char *params)
{
	char copy[256], *save, *tok;

	snprintf(copy, sizeof(copy), "%s", params);
	for (tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '='), path[PATH_MAX], buf[64];
		int n;

		ASSERT_NE(NULL, eq) TH_LOG("'%s' in '%s'", tok, params);
		*eq = '\0';
		snprintf(path, sizeof(path), MODULE_DIR "/parameters/%s", tok);
		n = read_file(path, buf, sizeof(buf));
		ASSERT_LT(0, n) TH_LOG("%s: %s", path, strerror(-n));
		buf[strcspn(buf, "\n")] = '\0';
		EXPECT_STREQ(eq + 1, buf) TH_LOG("%s, loaded with '%s'", path, params);
	}
}

/* The limits themselves are valid, and are the values in use. */
TEST_F(module, parameters_at_limits)
{
	static const char * const good[] = {
		"rounds=8", "rounds=1000000 timeout_ms=10", "irqoff_max_us=1",
		"irqoff_max_us=1000", "timeout_ms=10", "timeout_ms=60000",
		"reference_cpu=-1", "reference_cpu=0", "measure_isolated=Y",
		"measure_isolated=N",
	};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ASSERT_EQ(0, module_load(good[i])) TH_LOG("%s", good[i]);
		EXPECT_EQ(0, access(FREQ_FILE, R_OK));
		expect_read_back(_metadata, good[i]);
		ASSERT_EQ(0, module_unload());
		expect_no_files(_metadata);
	}
}

/*
 * Each wait below is of 20 s at most, four of them within the test's
 * timeout: a test the harness kills skips its teardown, which brings the
 * CPU back online.
 */
#define WAIT_NS 20000000000ull

/* Poll until tsc/reference_cpu reads 'want'. */
static bool reference_becomes(int64_t want)
{
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + WAIT_NS;
	int64_t ref = -2;

	while (read_s64(TSC_DIR "/reference_cpu", &ref) == 0 && ref != want &&
	       now_ns(CLOCK_MONOTONIC) < deadline)
		usleep(10000);
	return ref == want;
}

/* Every online CPU but 'ref' measured against it. */
static void expect_all_against(struct __test_metadata *_metadata, int ref)
{
	int cpus[MAX_CPUS], n = list_cpus(cpus, MAX_CPUS);
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + WAIT_NS;
	char path[128], buf[32];

	for (int i = 0; i < n; i++) {
		if (!cpu_is_online(cpus[i]))
			continue;
		while (!strcmp(read_reason(cpus[i]), "pending\n") &&
		       now_ns(CLOCK_MONOTONIC) < deadline)
			usleep(10000);
		ASSERT_LT(0, read_file(cpu_path(path, sizeof(path), cpus[i], "tsc/status"),
				       buf, sizeof(buf)));
		EXPECT_STREQ(cpus[i] == ref ? "reference\n" : "measured\n", buf)
			TH_LOG("cpu%d, reference cpu%d", cpus[i], ref);
	}
}

/*
 * reference_cpu=N going offline: every CPU is measured again against the
 * first online one, and against N again once it is back, without anyone
 * asking, as tsc/reference_cpu's ABI says.
 */
TEST_F_TIMEOUT(module, the_reference_goes_offline_and_comes_back, 120)
{
	int cpus[MAX_CPUS], n = list_cpus(cpus, MAX_CPUS), ref = -1, first = -1;
	char params[32];

	for (int i = n - 1; i >= 0 && ref < 0; i--)
		if (cpu_is_online(cpus[i]) && cpu_can_go_offline(cpus[i]))
			ref = cpus[i];
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || ref < 0)
		SKIP(return, "no second online CPU that can go offline");
	snprintf(params, sizeof(params), "reference_cpu=%d", ref);
	ASSERT_EQ(0, module_load(params));
	ASSERT_EQ(ref, READ_S64(TSC_DIR "/reference_cpu"));

	ASSERT_EQ(0, take_offline(ref));
	for (int i = 0; i < n && first < 0; i++)
		if (cpu_is_online(cpus[i]))
			first = cpus[i];
	EXPECT_TRUE(reference_becomes(first)) TH_LOG("cpu%d offline: no cpu%d", ref, first);
	EXPECT_STREQ("offline\n", read_reason(ref));
	expect_all_against(_metadata, first);

	restore_cpus();
	EXPECT_TRUE(reference_becomes(ref)) TH_LOG("cpu%d back online", ref);
	expect_all_against(_metadata, ref);
}

/*
 * A cycle takes 0.1 s in a guest of Debian's kernels and several times
 * that on the debug kernels: the harness's 30 s would cut the latter.
 */
TEST_F_TIMEOUT(module, load_unload_cycles, 900)
{
	int cycles = load_cycles();
	uint64_t start = now_ns(CLOCK_MONOTONIC);

	for (int i = 0; i < cycles; i++) {
		ASSERT_EQ(0, module_load("")) TH_LOG("cycle %d", i);
		/* Loaded means measured: the files are complete at once. */
		ASSERT_LE(1u, READ_U64(TSC_DIR "/generation"));
		ASSERT_EQ(0, module_unload()) TH_LOG("cycle %d", i);
	}
	expect_no_files(_metadata);
	TH_LOG("%d cycles, %.1f ms per load+unload", cycles,
	       (now_ns(CLOCK_MONOTONIC) - start) / 1e6 / (cycles ? cycles : 1));
}

TEST_HARNESS_MAIN
