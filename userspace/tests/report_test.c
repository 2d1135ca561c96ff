// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Cross-CPU reliability: the claims log of the userspace probe decodes to
 * the true offsets; the module's files are read as one measurement and
 * contradictions refused; the verdict follows the facts; and the real
 * probe on this machine gives a result that agrees with itself.
 */
#include <errno.h>

#include "fake_sysfs.h"
#include "internal.h"
#include "../../testlib/harness.h"

/*
 * A synthetic race: CPUs take turns in a random order; each stamps its
 * claim with its TSC (true time plus its offset) a few ticks after the
 * previous claim.
 */
static size_t synth(struct tsc__event *log, size_t n, const int64_t *off,
		    unsigned int ncpu, uint64_t seed, int64_t jump_at, int64_t jump)
{
	uint64_t now = 1000000;

	for (size_t i = 0; i < n; i++) {
		unsigned int cpu;
		int64_t o;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		cpu = (unsigned int)(seed >> 33) % ncpu;
		now += 50 + (seed >> 20) % 100;	/* more than any two offsets differ */
		o = off[cpu] + ((int64_t)i >= jump_at && cpu == 1 ? jump : 0);
		log[i] = (struct tsc__event){ cpu, now + (uint64_t)o };
	}
	return n;
}

TEST(cpu_lists)
{
	unsigned int n = 0;

	EXPECT_EQ(0, tsc__parse_cpulist_count("0\n", 2, &n));
	EXPECT_EQ(1u, n);
	EXPECT_EQ(0, tsc__parse_cpulist_count("0-3,8,10-11\n", 12, &n));
	EXPECT_EQ(12u, n);
	EXPECT_EQ(-ENODATA, tsc__parse_cpulist_count("\n", 1, &n));
	EXPECT_EQ(-EINVAL, tsc__parse_cpulist_count("0-", 2, &n));
	EXPECT_EQ(-EINVAL, tsc__parse_cpulist_count("a", 1, &n));
	EXPECT_EQ(-EINVAL, tsc__parse_cpulist_count("0;1", 3, &n));
	EXPECT_EQ(-ERANGE, tsc__parse_cpulist_count("0-99999", 7, &n));
}

TEST(decode_finds_the_offsets)
{
	static const int64_t off[] = { 0, 25, -10, 7 };
	static struct tsc__event log[20000];
	struct tscfk_offset_est est[4];
	struct tscfk_offset_result r;
	bool warp = false;

	for (int i = 0; i < 4; i++)
		tscfk_offset_init(&est[i]);
	tsc__probe_decode(log, synth(log, 20000, off, 4, 1, -1, 0) > 0 ? 20000 : 0,
			  0, est, &warp);
	EXPECT_EQ(0u, est[0].rounds);	/* the reference has no probes */
	for (int i = 1; i < 4; i++) {
		ASSERT_TRUE(tscfk_offset_result(&est[i], &r));
		EXPECT_TRUE(r.consistent);
		EXPECT_LE(r.min, off[i]);
		EXPECT_GE(r.max, off[i]);
		TH_LOG("cpu%d: true %lld, [%lld, %lld] from %u probes", i,
		       (long long)off[i], (long long)r.min, (long long)r.max, r.rounds);
	}
	/* Offsets smaller than the gaps: nobody sees time go back. */
	EXPECT_FALSE(warp);
}

TEST(decode_flags_backward_steps_and_jumps)
{
	static const int64_t off[] = { 0, 0 };
	static struct tsc__event log[10000];
	struct tscfk_offset_est est[2];
	struct tscfk_offset_result r;
	bool warp = false;

	tscfk_offset_init(&est[0]);
	tscfk_offset_init(&est[1]);
	/* cpu1 jumps back 5000 ticks halfway: far more than any gap. */
	tsc__probe_decode(log, synth(log, 10000, off, 2, 9, 5000, -5000), 0, est, &warp);
	EXPECT_TRUE(warp);
	ASSERT_TRUE(tscfk_offset_result(&est[1], &r));
	EXPECT_FALSE(r.consistent);
	EXPECT_LE(r.min, -5000);
	EXPECT_GE(r.max, 0);
}

/* A fake sysfs with the module's files. */
FIXTURE(module) {
	char dir[64];
};

FIXTURE_SETUP(module)
{
	static const char *const files[][2] = {
		{ "/devices/system/cpu/possible", "0-1\n" },
		{ "/devices/system/cpu/tsc/unstable", "0\n" },
		{ "/devices/system/cpu/tsc/generation", "3\n" },
		{ "/devices/system/cpu/tsc/reference_cpu", "0\n" },
		{ "/devices/system/cpu/tsc/max_skew_ticks", "250\n" },
		{ "/devices/system/cpu/tsc/monotonic_vs_reference", "1\n" },
		{ "/devices/system/cpu/cpu0/tsc/status", "reference\n" },
		{ "/devices/system/cpu/cpu0/tsc/offset_ticks", "0\n" },
		{ "/devices/system/cpu/cpu0/tsc/offset_min_ticks", "0\n" },
		{ "/devices/system/cpu/cpu0/tsc/offset_max_ticks", "0\n" },
		{ "/devices/system/cpu/cpu0/tsc/rounds", "0\n" },
		{ "/devices/system/cpu/cpu0/tsc/consistent", "1\n" },
		{ "/devices/system/cpu/cpu1/tsc/status", "measured\n" },
		{ "/devices/system/cpu/cpu1/tsc/offset_ticks", "-40\n" },
		{ "/devices/system/cpu/cpu1/tsc/offset_min_ticks", "-150\n" },
		{ "/devices/system/cpu/cpu1/tsc/offset_max_ticks", "100\n" },
		{ "/devices/system/cpu/cpu1/tsc/rounds", "1000\n" },
		{ "/devices/system/cpu/cpu1/tsc/consistent", "1\n" },
		{ "/devices/system/clocksource/clocksource0/current_clocksource", "tsc\n" },
	};

	strcpy(self->dir, "/tmp/libtsc-report.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		fake_put(_metadata, self->dir, files[i][0], files[i][1]);
}

FIXTURE_TEARDOWN(module)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", self->dir);
	if (system(cmd))
		TH_LOG("could not remove %s", self->dir);
}

TEST_F(module, read_as_the_module_wrote_it)
{
	struct tsc_report r;
	TSC_REPORT_OPTS(o, .sysfs_root = self->dir);

	ASSERT_EQ(0, tsc_report_get(&r, &o)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(TSC_OFFSETS_MODULE, r.offsets_source);
	EXPECT_EQ(0, r.kernel_unstable);
	EXPECT_STREQ("tsc", r.clocksource);
	EXPECT_EQ(0, r.reference_cpu);
	EXPECT_EQ(250u, r.max_skew_ticks);
	EXPECT_TRUE(r.monotonic);
	ASSERT_LE(2u, r.ncpus);
	EXPECT_EQ(TSC_CPU_REFERENCE, r.cpus[0].status);
	EXPECT_EQ(TSC_CPU_MEASURED, r.cpus[1].status);
	EXPECT_EQ(-40, r.cpus[1].offset);
	EXPECT_EQ(-150, r.cpus[1].min);
	EXPECT_EQ(100, r.cpus[1].max);
	EXPECT_EQ(1000u, r.cpus[1].rounds);
	EXPECT_TRUE(r.cpus[1].consistent);
	/* Trustworthy exactly when the CPU promises an invariant TSC. */
	EXPECT_EQ(r.invariant_tsc, r.trustworthy);
	TH_LOG("%s", r.verdict);
	tsc_report_free(&r);
	EXPECT_EQ(NULL, r.cpus);
}

TEST_F(module, the_kernel_distrusting_it_means_no)
{
	struct tsc_report r;
	TSC_REPORT_OPTS(o, .sysfs_root = self->dir);

	fake_put(_metadata, self->dir, "/devices/system/cpu/tsc/unstable", "1\n");
	fake_put(_metadata, self->dir, "/devices/system/cpu/tsc/monotonic_vs_reference", "0\n");
	fake_put(_metadata, self->dir, "/devices/system/cpu/cpu1/tsc/consistent", "0\n");
	fake_put(_metadata, self->dir,
	    "/devices/system/clocksource/clocksource0/current_clocksource", "hpet\n");
	ASSERT_EQ(0, tsc_report_get(&r, &o));
	EXPECT_FALSE(r.trustworthy);
	TH_LOG("%s", r.verdict);
	EXPECT_EQ(0, strncmp(r.verdict, "no: ", 4));
	EXPECT_NE(NULL, strstr(r.verdict, "marked the TSC unstable"));
	EXPECT_NE(NULL, strstr(r.verdict, "1 CPU(s) showed offsets that moved"));
	EXPECT_NE(NULL, strstr(r.verdict, "clocksource is hpet"));
	tsc_report_free(&r);
}

/*
 * The kernel's word alone: offsets that never moved and stayed monotonic
 * (the module measured when the TSC still looked right, say, before the
 * clocksource watchdog found it drifting) do not outvote it.
 */
TEST_F(module, the_kernel_distrusting_it_alone_means_no)
{
	struct tsc_report r;
	TSC_REPORT_OPTS(o, .sysfs_root = self->dir);

	fake_put(_metadata, self->dir, "/devices/system/cpu/tsc/unstable", "1\n");
	ASSERT_EQ(0, tsc_report_get(&r, &o)) TH_LOG("%s", tsc_last_error());
	TH_LOG("%s", r.verdict);
	EXPECT_TRUE(r.monotonic);
	EXPECT_FALSE(r.trustworthy);
	EXPECT_EQ(0, strncmp(r.verdict, "no: ", 4));
	EXPECT_NE(NULL, strstr(r.verdict, "marked the TSC unstable"));
	tsc_report_free(&r);
}

/* Loaded, not measured yet: no reference, and the verdict says so. */
TEST_F(module, before_the_first_measurement)
{
	struct tsc_report r;
	TSC_REPORT_OPTS(o, .sysfs_root = self->dir);

	fake_put(_metadata, self->dir, "/devices/system/cpu/tsc/reference_cpu", "-1\n");
	fake_put(_metadata, self->dir, "/devices/system/cpu/tsc/monotonic_vs_reference", "0\n");
	fake_put(_metadata, self->dir, "/devices/system/cpu/cpu0/tsc/status", "unmeasured\n");
	fake_put(_metadata, self->dir, "/devices/system/cpu/cpu1/tsc/status", "unmeasured\n");
	ASSERT_EQ(0, tsc_report_get(&r, &o)) TH_LOG("%s", tsc_last_error());
	TH_LOG("%s", r.verdict);
	EXPECT_FALSE(r.trustworthy);
	EXPECT_NE(NULL, strstr(r.verdict, "no CPU measured against a reference yet"));
	tsc_report_free(&r);
}

/* A CPU gone offline reads ENODATA: unmeasured, not an error. */
TEST_F(module, offline_cpu_is_unmeasured)
{
	struct tsc_report r;
	TSC_REPORT_OPTS(o, .sysfs_root = self->dir);

	fake_put(_metadata, self->dir, "/devices/system/cpu/cpu1/tsc/status", "unmeasured\n");
	ASSERT_EQ(0, tsc_report_get(&r, &o));
	EXPECT_EQ(TSC_CPU_UNMEASURED, r.cpus[1].status);
	tsc_report_free(&r);
}

/* The reference went offline since: counted no more, and no error. */
TEST_F(module, reference_gone_offline)
{
	struct tsc_report r;
	TSC_REPORT_OPTS(o, .sysfs_root = self->dir);

	fake_put(_metadata, self->dir, "/devices/system/cpu/cpu0/tsc/status", "unmeasured\n");
	ASSERT_EQ(0, tsc_report_get(&r, &o)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(0, r.reference_cpu);
	EXPECT_EQ(TSC_CPU_UNMEASURED, r.cpus[0].status);
	TH_LOG("%s", r.verdict);
	EXPECT_NE(NULL, strstr(r.verdict, " 1 CPUs within 250 ticks")) TH_LOG("%s", r.verdict);
	tsc_report_free(&r);
}

TEST_F(module, bad_files_are_refused)
{
	static const char *const bad[][2] = {
		{ "/devices/system/cpu/cpu1/tsc/offset_ticks", "-40 \n" },
		{ "/devices/system/cpu/cpu1/tsc/offset_min_ticks", "--150\n" },
		{ "/devices/system/cpu/cpu1/tsc/offset_max_ticks", "-160\n" },	/* < min */
		{ "/devices/system/cpu/cpu1/tsc/rounds", "-1\n" },
		{ "/devices/system/cpu/cpu1/tsc/consistent", "2\n" },
		{ "/devices/system/cpu/tsc/max_skew_ticks", "\n" },
		{ "/devices/system/cpu/tsc/generation", "99999999999999999999999\n" },
		/* No such CPU; and one that reads "measured" against itself. */
		{ "/devices/system/cpu/tsc/reference_cpu", "5000000000\n" },
		{ "/devices/system/cpu/tsc/reference_cpu", "2\n" },
		{ "/devices/system/cpu/tsc/reference_cpu", "-2\n" },
		{ "/devices/system/cpu/tsc/reference_cpu", "1\n" },
	};
	struct tsc_report r;
	TSC_REPORT_OPTS(o, .sysfs_root = self->dir);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char good[64] = "";
		char path[256];
		FILE *f;

		snprintf(path, sizeof(path), "%s%s", self->dir, bad[i][0]);
		f = fopen(path, "r");
		ASSERT_NE(NULL, f);
		ASSERT_NE(NULL, fgets(good, sizeof(good), f));
		ASSERT_EQ(0, fclose(f));
		fake_put(_metadata, self->dir, bad[i][0], bad[i][1]);
		EXPECT_GT(0, tsc_report_get(&r, &o)) TH_LOG("%s: '%s'", bad[i][0], bad[i][1]);
		TH_LOG("%s", tsc_last_error());
		EXPECT_EQ(NULL, r.cpus);
		fake_put(_metadata, self->dir, bad[i][0], good);
	}
	ASSERT_EQ(0, tsc_report_get(&r, &o));
	tsc_report_free(&r);
}

/*
 * Every flag the module writes is 0 or 1.  A 2 is no answer: not "yes",
 * not "no", and not a sign that the module is absent (tsc/unstable once
 * made the library measure in userspace as if it were).  EINVAL, naming
 * the file.
 */
TEST_F(module, a_flag_other_than_0_or_1_is_refused)
{
	static const char *const flags[] = {
		"/devices/system/cpu/tsc/unstable",
		"/devices/system/cpu/tsc/monotonic_vs_reference",
		"/devices/system/cpu/cpu0/tsc/consistent",
		"/devices/system/cpu/cpu1/tsc/consistent",
	};
	struct tsc_report r;
	TSC_REPORT_OPTS(o, .sysfs_root = self->dir);

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		char good[64] = "", path[256], want[300];
		FILE *f;

		snprintf(path, sizeof(path), "%s%s", self->dir, flags[i]);
		f = fopen(path, "r");
		ASSERT_NE(NULL, f);
		ASSERT_NE(NULL, fgets(good, sizeof(good), f));
		ASSERT_EQ(0, fclose(f));
		fake_put(_metadata, self->dir, flags[i], "2\n");
		EXPECT_EQ(-EINVAL, tsc_report_get(&r, &o)) TH_LOG("%s: 2", flags[i]);
		snprintf(want, sizeof(want), "%s: 2, not 0 or 1", path);
		EXPECT_STREQ(want, tsc_last_error());
		EXPECT_EQ(NULL, r.cpus);
		fake_put(_metadata, self->dir, flags[i], good);
	}
	ASSERT_EQ(0, tsc_report_get(&r, &o)) TH_LOG("%s", tsc_last_error());
	tsc_report_free(&r);
}

/*
 * Without the module, a fake sysfs whose CPUs 0 to last are possible, and
 * online as given; this thread's CPUs as given (NULL: as they are).
 */
static void fake_report(struct __test_metadata *_metadata, unsigned int last,
			const char *online, const cpu_set_t *mask, struct tsc_report *r)
{
	char dir[64] = "/tmp/libtsc-report.XXXXXX";
	TSC_REPORT_OPTS(o, .sysfs_root = dir, .max_ms = 100);
	char cmd[128], list[32];

	ASSERT_NE(NULL, mkdtemp(dir));
	snprintf(list, sizeof(list), "0-%u\n", last);
	fake_put(_metadata, dir, "/devices/system/cpu/possible", list);
	fake_put(_metadata, dir, "/devices/system/cpu/online", online);
	if (mask)
		ASSERT_EQ(0, sched_setaffinity(0, sizeof(*mask), mask));
	ASSERT_EQ(0, tsc_report_get(r, &o)) TH_LOG("%s", tsc_last_error());
	TH_LOG("online %.*s: %s", (int)strcspn(online, "\n"), online, r->verdict);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ASSERT_EQ(0, system(cmd));
}

/* The first CPU this thread may run on, and the last. */
static void my_cpus(unsigned int *first, unsigned int *last, unsigned int *count)
{
	cpu_set_t set;

	*first = *last = *count = 0;
	if (sched_getaffinity(0, sizeof(set), &set))
		return;
	*count = (unsigned int)CPU_COUNT(&set);
	for (unsigned int c = CPU_SETSIZE; c-- > 0;)
		if (CPU_ISSET(c, &set)) {
			*first = c;
			if (!*last)
				*last = c;
		}
}

/* Pinned to one CPU of four or more online: the others are unreachable. */
TEST(online_cpus_outside_the_affinity_mean_no)
{
	unsigned int me, last, count, cpus;
	struct tsc_report r;
	cpu_set_t one;
	char online[32], want[64];

	my_cpus(&me, &last, &count);
	cpus = me + 1 > 4 ? me + 1 : 4;
	snprintf(online, sizeof(online), "0-%u\n", cpus - 1);
	CPU_ZERO(&one);
	CPU_SET(me, &one);
	fake_report(_metadata, cpus - 1, online, &one, &r);
	EXPECT_EQ(TSC_OFFSETS_USERSPACE, r.offsets_source);
	EXPECT_EQ((int)me, r.reference_cpu);
	EXPECT_EQ(TSC_CPU_REFERENCE, r.cpus[me].status);
	/* At zero from itself, as when the others are measured. */
	EXPECT_TRUE(r.cpus[me].consistent);
	for (unsigned int i = 0; i < r.ncpus; i++)
		if (i != me)
			EXPECT_EQ(TSC_CPU_UNMEASURED, r.cpus[i].status);
	EXPECT_FALSE(r.monotonic);
	EXPECT_FALSE(r.trustworthy);
	EXPECT_EQ(0, strncmp(r.verdict, "no: ", 4));
	snprintf(want, sizeof(want), "%u online CPU(s) outside this thread's CPU affinity",
		 cpus - 1);
	EXPECT_NE(NULL, strstr(r.verdict, want)) TH_LOG("want \"%s\"", want);
	tsc_report_free(&r);
}

/*
 * Every CPU of this thread's measured, one more online beyond them:
 * measured, yet neither monotonic nor trustworthy, since one is not.
 */
TEST(measured_but_one_online_cpu_left_out)
{
	unsigned int first, last, count;
	struct tsc_report r;
	char online[32];

	my_cpus(&first, &last, &count);
	if (count < 2)
		SKIP(return, "one CPU in this thread's affinity: nothing to measure");
	snprintf(online, sizeof(online), "0-%u\n", last + 1);
	fake_report(_metadata, last + 1, online, NULL, &r);
	EXPECT_EQ(TSC_OFFSETS_USERSPACE, r.offsets_source);
	EXPECT_EQ(TSC_CPU_UNMEASURED, r.cpus[last + 1].status);
	EXPECT_FALSE(r.monotonic);
	EXPECT_FALSE(r.trustworthy);
	EXPECT_NE(NULL, strstr(r.verdict, "1 online CPU(s) outside this thread's CPU affinity"));
	tsc_report_free(&r);
}

/* One CPU online of four possible: nothing to compare, and nothing left out. */
TEST(one_cpu_online_has_nothing_to_compare)
{
	unsigned int me, last, count;
	struct tsc_report r;
	cpu_set_t one;
	char online[32];

	my_cpus(&me, &last, &count);
	snprintf(online, sizeof(online), "%u\n", me);
	CPU_ZERO(&one);
	CPU_SET(me, &one);
	fake_report(_metadata, me + 1 > 4 ? me : 3, online, &one, &r);
	EXPECT_EQ(TSC_OFFSETS_NONE, r.offsets_source);
	EXPECT_EQ(NULL, strstr(r.verdict, "outside"));
	EXPECT_NE(NULL, strstr(r.verdict, "a single CPU"));
	EXPECT_EQ(r.invariant_tsc, r.trustworthy);
	tsc_report_free(&r);
}

/* The real probe on this machine: a result that agrees with itself. */
TEST(userspace_probe_here)
{
	struct tsc_report r;
	TSC_REPORT_OPTS(o, .userspace = true, .sysfs_root = "/nonexistent");
	unsigned int measured = 0;

	ASSERT_EQ(0, tsc_report_get(&r, &o)) TH_LOG("%s", tsc_last_error());
	TH_LOG("%s", r.verdict);
	EXPECT_EQ(-1, r.kernel_unstable);
	for (unsigned int i = 0; i < r.ncpus; i++) {
		struct tsc_cpu_offset *c = &r.cpus[i];

		if (c->status == TSC_CPU_UNMEASURED)
			continue;
		EXPECT_LE(c->min, c->offset);
		EXPECT_LE(c->offset, c->max);
		if (c->status == TSC_CPU_MEASURED) {
			measured++;
			EXPECT_LE(256u, c->rounds);
		}
		TH_LOG("cpu%d: %lld in [%lld, %lld], %u probes", c->cpu,
		       (long long)c->offset, (long long)c->min, (long long)c->max, c->rounds);
	}
	if (sysconf(_SC_NPROCESSORS_ONLN) > 1) {
		EXPECT_EQ(TSC_OFFSETS_USERSPACE, r.offsets_source);
		EXPECT_LT(0u, measured);
	}
	/*
	 * Each interval is certain to hold the true offset: a second,
	 * independent measurement's must overlap the first's, CPU by CPU.
	 */
	{
		struct tsc_report again;

		ASSERT_EQ(0, tsc_report_get(&again, &o)) TH_LOG("%s", tsc_last_error());
		ASSERT_EQ(r.ncpus, again.ncpus);
		for (unsigned int i = 0; i < r.ncpus; i++) {
			struct tsc_cpu_offset *a = &r.cpus[i], *b = &again.cpus[i];

			if (a->status != TSC_CPU_MEASURED || b->status != TSC_CPU_MEASURED ||
			    r.reference_cpu != again.reference_cpu)
				continue;
			EXPECT_LE(a->min, b->max) TH_LOG("cpu%d", a->cpu);
			EXPECT_LE(b->min, a->max) TH_LOG("cpu%d", a->cpu);
		}
		tsc_report_free(&again);
	}
	tsc_report_free(&r);
}

TEST_HARNESS_MAIN
