// SPDX-License-Identifier: GPL-2.0
/*
 * Loading and unloading: bad parameters fail the load with EINVAL and a
 * message naming them, parameters at their limits load, and load/unload
 * cycles leave nothing behind.  Loads the module itself through
 * finit_module(2), from $TSCFK_KO (uncompressed); starts and ends with it
 * unloaded.
 * $TSCFK_CYCLES sets the number of cycles (default 200).
 */
#include "harness.h"
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
		{ "irqoff_max_us=10001", "irqoff_max_us=10001 is out of range" },
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
		"irqoff_max_us=10000", "timeout_ms=10", "timeout_ms=60000",
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
 * A cycle takes 0.1 s in a guest of Debian's kernels and 2 to 4 s on the
 * debug kernel on an AMD host: the harness's 30 s would cut the latter.
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
