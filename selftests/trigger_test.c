// SPDX-License-Identifier: GPL-2.0
/*
 * The 'remeasure' trigger: "1" measures again and returns when done,
 * anything else is refused with EINVAL and changes nothing, concurrent
 * triggers are serialised, and readers never see a torn or malformed value
 * while a measurement runs.  Needs the module loaded, and root.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "../testlib/harness.h"
#include "tscfk_test.h"

#define TRIGGER TSC_DIR "/remeasure"

TEST(one_triggers_one_measurement)
{
	static const char * const ones[] = { "1", "1\n" };

	REQUIRE_MODULE();
	for (size_t i = 0; i < 2; i++) {
		uint64_t gen = READ_U64(TSC_DIR "/generation");
		uint64_t when = READ_U64(TSC_DIR "/last_measured_ns");
		uint64_t start = now_ns(CLOCK_MONOTONIC);
		size_t len = strlen(ones[i]);

		ASSERT_EQ((ssize_t)len, write_file(TRIGGER, ones[i], len));
		/* Done when write() returns: one run, started after we asked. */
		EXPECT_EQ(gen + 1, READ_U64(TSC_DIR "/generation"));
		EXPECT_LT(when, READ_U64(TSC_DIR "/last_measured_ns"));
		EXPECT_LE(start, READ_U64(TSC_DIR "/last_measured_ns"));
		/* Every online CPU's result, from that run. */
		EXPECT_LE(start, READ_U64(TSC_DIR "/measured_since_ns"));
		EXPECT_GT(READ_U64(TSC_DIR "/last_measured_ns"),
			  READ_U64(TSC_DIR "/measured_since_ns"));
	}
}

TEST(bad_writes_change_nothing)
{
	static const char * const bad[] = {
		"0", "2", "abc", "\n", "11", "1x", " 1", "+1", "01", "1\n1",
		"-1", "1 ",
	};
	static char junk[4096];
	uint64_t gen, when, since;

	REQUIRE_MODULE();
	gen = READ_U64(TSC_DIR "/generation");
	when = READ_U64(TSC_DIR "/last_measured_ns");
	since = READ_U64(TSC_DIR "/measured_since_ns");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-EINVAL, write_file(TRIGGER, bad[i], strlen(bad[i])))
			TH_LOG("write '%s'", bad[i]);
	}

	memset(junk, 'x', sizeof(junk));
	junk[0] = '1';	/* a valid start does not save a junk tail */
	EXPECT_EQ(-EINVAL, write_file(TRIGGER, junk, sizeof(junk)));
	memset(junk, '1', sizeof(junk));
	EXPECT_EQ(-EINVAL, write_file(TRIGGER, junk, sizeof(junk)));

	/* sysfs answers an empty write with 0 before the module sees it. */
	EXPECT_EQ(0, write_file(TRIGGER, "", 0));

	EXPECT_EQ(gen, READ_U64(TSC_DIR "/generation"));
	EXPECT_EQ(when, READ_U64(TSC_DIR "/last_measured_ns"));
	EXPECT_EQ(since, READ_U64(TSC_DIR "/measured_since_ns"));
}

/*
 * Writes of any length (up to three pages) and any bytes: each is refused
 * with EINVAL, unless it happens to be "1" or "1\n", and only those measure.
 * A fixed seed, so that a failure reproduces.
 */
TEST(random_writes)
{
	static unsigned char buf[3 * 4096];
	unsigned int seed = 20261122;
	int accepted = 0, refused = 0;
	uint64_t gen;

	REQUIRE_MODULE();
	gen = READ_U64(TSC_DIR "/generation");
	for (int i = 0; i < 300; i++) {
		/* Short writes are where a parser slips: favour them. */
		size_t len = 1 + rand_r(&seed) % (i % 2 ? 8 : sizeof(buf));
		bool one = false;
		ssize_t ret;

		for (size_t b = 0; b < len; b++)
			buf[b] = (unsigned char)rand_r(&seed);
		if (i % 3 == 0)
			buf[0] = '1';	/* a valid start, then junk */
		one = (len == 1 && buf[0] == '1') ||
		      (len == 2 && buf[0] == '1' && buf[1] == '\n');
		ret = write_file(TRIGGER, buf, len);
		if (one) {
			EXPECT_EQ((ssize_t)len, ret);
			accepted++;
		} else {
			EXPECT_EQ(-EINVAL, ret) TH_LOG("write %zu bytes", len);
			refused++;
		}
	}
	EXPECT_EQ(gen + accepted, READ_U64(TSC_DIR "/generation"));
	TH_LOG("300 random writes: %d measured, %d refused", accepted, refused);
}

static void *trigger_once(void *arg)
{
	*(ssize_t *)arg = write_file(TRIGGER, "1", 1);
	return NULL;
}

/* Eight at once: all succeed, measurements do not overlap or get lost. */
TEST(concurrent_triggers)
{
	pthread_t threads[8];
	ssize_t ret[8];
	uint64_t gen, after;

	REQUIRE_MODULE();
	gen = READ_U64(TSC_DIR "/generation");
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(0, pthread_create(&threads[i], NULL, trigger_once, &ret[i]));
	for (int i = 0; i < 8; i++) {
		pthread_join(threads[i], NULL);
		EXPECT_EQ(1, ret[i]);
	}
	after = READ_U64(TSC_DIR "/generation");
	/* Requests that arrive while a run is queued share the next run. */
	EXPECT_LE(gen + 1, after);
	EXPECT_GE(gen + 8, after);
	TH_LOG("8 triggers, %" PRIu64 " measurements", after - gen);
}

/*
 * Readers: 64, many per CPU; in an overcommitted guest (more vCPUs than
 * host CPUs, or the debug kernel's checkers in every window) 8, which keep
 * every vCPU as busy: with 64 there, the measurements' sides waited behind
 * them, and five took a minute on the KASAN kernel.
 */
#define READERS 64
#define READERS_OVERCOMMITTED 8

struct reader {
	atomic_bool *stop;
	unsigned long reads, bad;
	char last_bad[256];
};

/* Every readable file of the module, listed once the test starts. */
static char files[1024][PATH_MAX];
static int nfiles;

static void *read_loop(void *arg)
{
	struct reader *r = arg;
	unsigned int i = 0;

	while (!atomic_load(r->stop)) {
		const char *path = files[i++ % nfiles];
		char buf[64];
		int n = read_file(path, buf, sizeof(buf));

		r->reads++;
		if (!value_well_formed(path, n, buf)) {
			r->bad++;
			snprintf(r->last_bad, sizeof(r->last_bad), "%s: %s",
				 path, n < 0 ? strerror(-n) : buf);
		}
	}
	return NULL;
}

/*
 * Five measurements among eight busy readers take seconds on the debug
 * kernel under TCG, where the harness's default of 30 s was once too
 * short: this test's timeout is 120 s.
 */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 120
TEST(readers_during_remeasure)
{
	static struct reader readers[READERS];
	pthread_t threads[READERS];
	atomic_bool stop = false;
	unsigned long reads = 0;
	int n = getenv("TSCFK_OVERCOMMITTED") ? READERS_OVERCOMMITTED : READERS;

	REQUIRE_MODULE();
	nfiles = module_files(files, sizeof(files) / sizeof(files[0]));
	ASSERT_LT(0, nfiles);
	for (int i = 0; i < n; i++) {
		readers[i] = (struct reader){ .stop = &stop };
		ASSERT_EQ(0, pthread_create(&threads[i], NULL, read_loop, &readers[i]));
	}
	for (int i = 0; i < 5; i++)
		EXPECT_EQ(1, write_file(TRIGGER, "1", 1));
	atomic_store(&stop, true);
	for (int i = 0; i < n; i++) {
		pthread_join(threads[i], NULL);
		reads += readers[i].reads;
		EXPECT_EQ(0u, readers[i].bad) TH_LOG("reader %d: %s", i,
						     readers[i].last_bad);
	}
	TH_LOG("%d readers of %d files, %lu reads during 5 measurements", n,
	       nfiles, reads);
	EXPECT_LT((unsigned long)n, reads);
}

TEST_HARNESS_MAIN
