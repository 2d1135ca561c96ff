// SPDX-License-Identifier: GPL-2.0
/*
 * CPU hotplug: an offlined CPU keeps its files, which read as unmeasured
 * (numbers: ENODATA, reason: offline); brought back, it alone is measured
 * again without anyone asking, the others' results and measured_since_ns
 * untouched.  Every change bumps the generation.  Needs
 * the module loaded, root, two CPUs and a hot-pluggable one.  And the
 * kernel makes the CPU's topology directory anew (a new inode), which
 * libtsc's own skew measurement relies on to see that a CPU left
 * (tsc_realtime_bounded(3)).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "../testlib/harness.h"
#include "tscfk_test.h"

/* The highest CPU that can go offline and is not the reference. */
static int pick_victim(int ref)
{
	int cpus[MAX_CPUS], n = list_cpus(cpus, MAX_CPUS);

	for (int i = n - 1; i >= 0; i--)
		if (cpus[i] != ref && cpu_is_online(cpus[i]) && cpu_can_go_offline(cpus[i]))
			return cpus[i];
	return -1;
}

static void expect_status(struct __test_metadata *_metadata, int cpu,
			  const char *want)
{
	char path[128], buf[32];

	ASSERT_LT(0, read_file(cpu_path(path, sizeof(path), cpu, "tsc/status"),
			       buf, sizeof(buf)));
	EXPECT_STREQ(want, buf) TH_LOG("cpu%d", cpu);
}

/* What a measurement of a CPU leaves: its interval and probe count. */
struct cpu_numbers {
	int64_t lo, hi;
	uint64_t rounds;
};

static void read_numbers(struct __test_metadata *_metadata, int cpu,
			 struct cpu_numbers *c)
{
	char path[128];

	c->lo = READ_S64(cpu_path(path, sizeof(path), cpu, "tsc/offset_min_ticks"));
	c->hi = READ_S64(cpu_path(path, sizeof(path), cpu, "tsc/offset_max_ticks"));
	c->rounds = READ_U64(cpu_path(path, sizeof(path), cpu, "tsc/rounds"));
}

/* Poll until 'cpu' is no longer pending, for up to 60 s. */
static void wait_judged(int cpu)
{
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + 60000000000ull;

	while (!strcmp(read_reason(cpu), "pending\n") &&
	       now_ns(CLOCK_MONOTONIC) < deadline)
		usleep(10000);
}

TEST(offline_then_online)
{
	static const char * const numbers[] = {
		"tsc/offset_ticks", "tsc/offset_min_ticks",
		"tsc/offset_max_ticks", "tsc/rounds", "tsc/consistent",
	};
	int cpus[MAX_CPUS], n;
	struct cpu_numbers others[MAX_CPUS];
	int64_t ref, victim;
	uint64_t gen, since;
	char path[128], buf[64];
	struct stat before, after;

	REQUIRE_MODULE();
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "one CPU online: nothing to unplug");
	ref = READ_S64(TSC_DIR "/reference_cpu");
	victim = pick_victim((int)ref);
	if (victim < 0)
		SKIP(return, "no CPU other than the reference can go offline");
	expect_status(_metadata, (int)victim, "measured\n");

	ASSERT_EQ(0, stat(cpu_path(path, sizeof(path), (int)victim, "topology"), &before));
	gen = READ_U64(TSC_DIR "/generation");
	ASSERT_EQ(0, set_online((int)victim, false));
	EXPECT_LT(gen, READ_U64(TSC_DIR "/generation")) TH_LOG("offline is a change");
	expect_status(_metadata, (int)victim, "unmeasured\n");
	EXPECT_STREQ("offline\n", read_reason((int)victim));
	for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
		EXPECT_EQ(-ENODATA, read_file(cpu_path(path, sizeof(path),
						       (int)victim, numbers[i]),
					      buf, sizeof(buf)))
			TH_LOG("cpu%" PRId64 "/%s", victim, numbers[i]);
	}

	/* The others' numbers, to show that they are not measured again. */
	n = list_cpus(cpus, MAX_CPUS);
	for (int i = 0; i < n; i++)
		others[i].rounds = 0;
	for (int i = 0; i < n; i++)
		if (cpus[i] != ref && cpu_is_online(cpus[i]))
			read_numbers(_metadata, cpus[i], &others[i]);

	gen = READ_U64(TSC_DIR "/generation");
	since = READ_U64(TSC_DIR "/measured_since_ns");
	ASSERT_EQ(0, set_online((int)victim, true));
	ASSERT_EQ(0, stat(cpu_path(path, sizeof(path), (int)victim, "topology"), &after));
	EXPECT_NE(before.st_ino, after.st_ino) TH_LOG("the same topology directory: libtsc misses it");
	/* The module measures on its own after onlining; give it 60 s. */
	wait_judged((int)victim);
	EXPECT_LT(gen, READ_U64(TSC_DIR "/generation"));
	expect_status(_metadata, (int)victim, "measured\n");
	EXPECT_LE(8u, READ_U64(cpu_path(path, sizeof(path), (int)victim, "tsc/rounds")));
	EXPECT_EQ(ref, READ_S64(TSC_DIR "/reference_cpu"));
	/* Measured alone: the skew still rests on the reference's older run. */
	EXPECT_EQ(since, READ_U64(TSC_DIR "/measured_since_ns"));
	for (int i = 0; i < n; i++) {
		struct cpu_numbers now;

		if (!others[i].rounds || !cpu_is_online(cpus[i]))
			continue;
		read_numbers(_metadata, cpus[i], &now);
		EXPECT_EQ(0, memcmp(&now, &others[i], sizeof(now)))
			TH_LOG("cpu%d was measured again when cpu%" PRId64 " came online",
			       cpus[i], victim);
	}
}

struct trigger_loop {
	atomic_bool stop;
	unsigned long runs, errors;
};

static void *trigger_loop(void *arg)
{
	struct trigger_loop *t = arg;

	while (!atomic_load(&t->stop)) {
		if (write_file(TSC_DIR "/remeasure", "1", 1) == 1)
			t->runs++;
		else
			t->errors++;
	}
	return NULL;
}

/*
 * CPUs going away and coming back while measurements run back to back:
 * nothing hangs (each step has a deadline), no write fails, and once the
 * churn stops every online CPU is measured again.  The churn goes round
 * every CPU that can go offline except the reference, one at a time.
 */
#define CHURN 30

TEST(offline_online_during_remeasure)
{
	struct trigger_loop t = { .stop = false };
	int cpus[MAX_CPUS], n, ref, victims[MAX_CPUS], nvictims = 0;
	uint64_t start = now_ns(CLOCK_MONOTONIC);
	pthread_t thread;
	char path[128], buf[32];

	REQUIRE_MODULE();
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "one CPU online: nothing to unplug");
	ref = (int)READ_S64(TSC_DIR "/reference_cpu");
	n = list_cpus(cpus, MAX_CPUS);
	for (int i = 0; i < n; i++)
		if (cpus[i] != ref && cpu_is_online(cpus[i]) && cpu_can_go_offline(cpus[i]))
			victims[nvictims++] = cpus[i];
	if (nvictims == 0)
		SKIP(return, "no CPU other than the reference can go offline");

	ASSERT_EQ(0, pthread_create(&thread, NULL, trigger_loop, &t));
	for (int i = 0; i < CHURN; i++) {
		int victim = victims[i % nvictims];

		EXPECT_EQ(0, set_online(victim, false)) TH_LOG("cpu%d", victim);
		EXPECT_EQ(0, set_online(victim, true)) TH_LOG("cpu%d", victim);
	}
	atomic_store(&t.stop, true);
	pthread_join(thread, NULL);
	TH_LOG("%d offline/online cycles over %d CPUs during %lu measurements, %.1f s",
	       CHURN, nvictims, t.runs, (now_ns(CLOCK_MONOTONIC) - start) / 1e9);
	EXPECT_EQ(0u, t.errors);
	EXPECT_LT(0u, t.runs);

	/* A last measurement that starts after the churn covers everyone. */
	ASSERT_EQ(1, write_file(TSC_DIR "/remeasure", "1", 1));
	n = list_cpus(cpus, MAX_CPUS);
	for (int i = 0; i < n; i++) {
		if (!cpu_is_online(cpus[i]))
			continue;
		ASSERT_LT(0, read_file(cpu_path(path, sizeof(path), cpus[i], "tsc/status"),
				       buf, sizeof(buf)));
		EXPECT_STRNE("unmeasured\n", buf) TH_LOG("cpu%d", cpus[i]);
	}
}

TEST_HARNESS_MAIN
