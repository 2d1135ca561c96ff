// SPDX-License-Identifier: GPL-2.0
/*
 * The module's files, as a reader sees them: exact format, modes, and
 * values checked against what the kernel says elsewhere (dmesg, the
 * clocksource, /proc/cpuinfo) and against an independent calibration.
 * Needs the module loaded.
 */
#include <sys/stat.h>
#include <sys/wait.h>
#include <math.h>
#include <regex.h>

#include "../testlib/harness.h"
#include "tscfk_test.h"

static const char * const global_ro[] = {
	"unstable", "constant_tsc", "nonstop_tsc", "tsc_known_freq",
	"tsc_reliable", "tsc_adjust", "reference_cpu", "generation",
	"last_measured_ns", "max_irqoff_ns", "max_skew_ticks", "measured_since_ns",
	"monotonic_vs_reference", "reference_irqoff_ns",
	"timekeeper_freq_millihz", "clock_page", "clock_steps", "clock_resumes",
	"clocksource_changes",
};

static const char * const per_cpu_ro[] = {
	"tsc_freq_khz", "tsc/status", "tsc/unmeasured_reason",
	"tsc/offset_ticks", "tsc/offset_min_ticks", "tsc/offset_max_ticks",
	"tsc/rounds", "tsc/consistent", "tsc/clean_rounds", "tsc/adjust_ticks",
};

static inline uint64_t rdtsc_ordered(void)
{
	uint32_t lo, hi;

	/* lfence, not a locked op: only lfence orders rdtsc on AMD too. */
	asm volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi) :: "memory");
	return ((uint64_t)hi << 32) | lo;
}

TEST(freq_format)
{
	regex_t re;
	char buf[64];
	int n;

	n = read_file(FREQ_FILE, buf, sizeof(buf));
	ASSERT_LT(0, n) TH_LOG("%s: %s", FREQ_FILE, strerror(-n));
	ASSERT_EQ(0, regcomp(&re, "^[1-9][0-9]*\n$", REG_EXTENDED | REG_NOSUB));
	EXPECT_EQ(0, regexec(&re, buf, 0, NULL, 0)) TH_LOG("content: '%s'", buf);
	regfree(&re);
	/* Below 20 GHz and above 1 MHz, or the unit is wrong. */
	EXPECT_LT(1000u, READ_U64(FREQ_FILE));
	EXPECT_GT(20000000u, READ_U64(FREQ_FILE));
}

/*
 * The kernel prints the value it settled on, to the kHz: the refined
 * calibration if it refined it, else the one detected at boot.
 */
TEST(freq_equals_kernel_message)
{
	uint64_t khz = READ_U64(FREQ_FILE), kernel;
	char msg[512];

	kernel = kernel_khz_from_log(msg, sizeof(msg));
	if (!kernel)
		SKIP(return, "the kernel log no longer holds the TSC calibration");
	TH_LOG("kernel said: %s", msg);
	EXPECT_EQ(kernel, khz);
}

/* Every CPU device has the file, with cpu0's content: tsc_khz is global. */
TEST(freq_on_every_cpu)
{
	int cpus[MAX_CPUS], n = list_cpus(cpus, MAX_CPUS);
	char want[64], got[64], path[128];

	ASSERT_LT(0, read_file(FREQ_FILE, want, sizeof(want)));
	ASSERT_LT(0, n);
	for (int c = 0; c < n; c++) {
		ASSERT_LT(0, read_file(cpu_path(path, sizeof(path), cpus[c],
						"tsc_freq_khz"), got, sizeof(got)))
			TH_LOG("cpu%d", cpus[c]);
		EXPECT_STREQ(want, got) TH_LOG("cpu%d", cpus[c]);
	}
}

/* Bracketed sample: a clock read between two ordered TSC reads. */
struct sample {
	uint64_t tsc, ns, width;
};

static struct sample take_sample(void)
{
	struct sample best = { .width = UINT64_MAX };

	for (int i = 0; i < 50; i++) {
		uint64_t a = rdtsc_ordered();
		uint64_t ns = now_ns(CLOCK_MONOTONIC_RAW);
		uint64_t b = rdtsc_ordered();

		if (b - a < best.width)
			best = (struct sample){ a + (b - a) / 2, ns, b - a };
	}
	return best;
}

/*
 * An independent calibration against CLOCK_MONOTONIC_RAW agrees: to 0.1%
 * with the TSC as the clocksource, else to the kernel's own 1% (the value
 * may never have been refined; see khz_calibration_limit()).
 */
TEST(freq_equals_calibration)
{
	uint64_t khz = READ_U64(FREQ_FILE);
	double measured, limit = khz_calibration_limit();
	struct sample a, b;

	a = take_sample();
	usleep(500000);
	b = take_sample();
	measured = (double)(b.tsc - a.tsc) * 1e6 / (double)(b.ns - a.ns);
	TH_LOG("file %" PRIu64 " kHz, calibrated %.1f kHz (%+.1f ppm, limit %.0f)", khz,
	       measured, (measured / khz - 1) * 1e6, limit * 1e6);
	EXPECT_GT(limit, fabs(measured / (double)khz - 1));
}

static void expect_mode(struct __test_metadata *_metadata, const char *path,
			mode_t mode)
{
	struct stat st;

	ASSERT_EQ(0, stat(path, &st)) TH_LOG("%s: %s", path, strerror(errno));
	EXPECT_EQ(mode, st.st_mode & 07777) TH_LOG("%s is %o", path,
						   st.st_mode & 07777);
}

TEST(modes)
{
	int cpus[MAX_CPUS], n = list_cpus(cpus, MAX_CPUS);
	char path[256], file[64];

	expect_mode(_metadata, FREQ_FILE, 0444);
	for (size_t i = 0; i < ARRAY_SIZE(global_ro); i++) {
		snprintf(path, sizeof(path), TSC_DIR "/%s", global_ro[i]);
		expect_mode(_metadata, path, 0444);
	}
	expect_mode(_metadata, TSC_DIR "/remeasure", 0200);
	ASSERT_LT(0, n);
	for (int c = 0; c < n; c++)
		for (size_t i = 0; i < ARRAY_SIZE(per_cpu_ro); i++) {
			snprintf(file, sizeof(file), "%s", per_cpu_ro[i]);
			expect_mode(_metadata, cpu_path(path, sizeof(path),
							cpus[c], file), 0444);
		}
}

/* Even root cannot write a read-only file. */
TEST(read_only_files_refuse_writes)
{
	char path[256];

	EXPECT_GT(0, write_file(FREQ_FILE, "1", 1));
	for (size_t i = 0; i < ARRAY_SIZE(global_ro); i++) {
		snprintf(path, sizeof(path), TSC_DIR "/%s", global_ro[i]);
		EXPECT_GT(0, write_file(path, "1", 1)) TH_LOG("%s", path);
	}
}

/* The trigger is root's: anyone else is refused at open(). */
TEST(non_root_cannot_trigger)
{
	int status;
	pid_t pid;

	if (geteuid() != 0)
		SKIP(return, "needs root to switch to an unprivileged user");
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(2);
		_exit(write_file(TSC_DIR "/remeasure", "1", 1) == -EACCES ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

static bool cpuinfo_has_flag(const char *flag)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[8192];
	bool found = false;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *tok, *save;

		if (strncmp(line, "flags", 5))
			continue;
		for (tok = strtok_r(strchr(line, ':') + 1, " \n", &save); tok;
		     tok = strtok_r(NULL, " \n", &save))
			found |= !strcmp(tok, flag);
		break;	/* the boot CPU's line is enough */
	}
	fclose(f);
	return found;
}

TEST(feature_flags_match_cpuinfo)
{
	static const char * const flags[] = {
		"constant_tsc", "nonstop_tsc", "tsc_known_freq",
		"tsc_reliable", "tsc_adjust",
	};
	char path[256];

	for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
		snprintf(path, sizeof(path), TSC_DIR "/%s", flags[i]);
		EXPECT_EQ((uint64_t)cpuinfo_has_flag(flags[i]), READ_U64(path))
			TH_LOG("%s", flags[i]);
	}
}

/*
 * The kernel never keeps an unstable TSC as its clocksource, and says so
 * when it marks the TSC unstable: the file must agree with both.
 */
TEST(unstable_matches_kernel)
{
	uint64_t unstable = READ_U64(TSC_DIR "/unstable");
	char cs[64] = "", msg[512];
	bool marked;

	read_file(CPU_SYS "/../clocksource/clocksource0/current_clocksource",
		  cs, sizeof(cs));
	marked = kmsg_last("Marking TSC unstable", msg, sizeof(msg));
	TH_LOG("unstable=%" PRIu64 ", clocksource %.*s, %s", unstable,
	       (int)strcspn(cs, "\n"), cs, marked ? msg : "never marked unstable");
	ASSERT_GE(1u, unstable);
	if (!strcmp(cs, "tsc\n"))
		EXPECT_EQ(0u, unstable);
	if (marked)
		EXPECT_EQ(1u, unstable);
}

/* Every CPU's files are well formed and agree with each other. */
TEST(per_cpu_results)
{
	int cpus[MAX_CPUS], n = list_cpus(cpus, MAX_CPUS);
	int64_t ref = READ_S64(TSC_DIR "/reference_cpu");
	uint64_t max_rounds = READ_U64(MODULE_DIR "/parameters/rounds");
	bool has_adjust = READ_U64(TSC_DIR "/tsc_adjust") == 1;
	char path[256], status[32], buf[64];
	int references = 0;

	for (int c = 0; c < n; c++) {
		int cpu = cpus[c];
		int64_t off, lo, hi;

		ASSERT_LT(0, read_file(cpu_path(path, sizeof(path), cpu, "tsc/status"),
				       status, sizeof(status)));
		if (!cpu_is_online(cpu)) {
			EXPECT_STREQ("unmeasured\n", status) TH_LOG("cpu%d", cpu);
			EXPECT_STREQ("offline\n", read_reason(cpu)) TH_LOG("cpu%d", cpu);
			EXPECT_EQ(-ENODATA, read_file(cpu_path(path, sizeof(path), cpu,
							       "tsc/adjust_ticks"), buf, sizeof(buf)));
			continue;
		}
		if (strcmp(status, "unmeasured\n") == 0)
			TH_LOG("cpu%d: unmeasured: %s", cpu, read_reason(cpu));
		else
			EXPECT_STREQ("ENODATA", read_reason(cpu)) TH_LOG("cpu%d", cpu);
		if (cpu == ref) {
			references++;
			EXPECT_STREQ("reference\n", status);
		} else {
			EXPECT_STREQ("measured\n", status) TH_LOG("cpu%d", cpu);
		}
		if (strcmp(status, "unmeasured\n") == 0)
			continue;
		off = READ_S64(cpu_path(path, sizeof(path), cpu, "tsc/offset_ticks"));
		lo = READ_S64(cpu_path(path, sizeof(path), cpu, "tsc/offset_min_ticks"));
		hi = READ_S64(cpu_path(path, sizeof(path), cpu, "tsc/offset_max_ticks"));
		EXPECT_LE(lo, off);
		EXPECT_LE(off, hi);
		EXPECT_GE(1u, READ_U64(cpu_path(path, sizeof(path), cpu, "tsc/consistent")));
		/* Read on the CPU itself, where the CPU has the MSR. */
		if (has_adjust)
			READ_S64(cpu_path(path, sizeof(path), cpu, "tsc/adjust_ticks"));
		else
			EXPECT_EQ(-EOPNOTSUPP, read_file(cpu_path(path, sizeof(path), cpu,
								  "tsc/adjust_ticks"),
							 buf, sizeof(buf))) TH_LOG("cpu%d", cpu);
		if (cpu == ref) {
			EXPECT_EQ(0, lo);
			EXPECT_EQ(0, hi);
			/* At zero from itself: no probe can say otherwise. */
			EXPECT_EQ(1u, READ_U64(cpu_path(path, sizeof(path), cpu,
							"tsc/consistent")));
			EXPECT_EQ(0u, READ_U64(cpu_path(path, sizeof(path), cpu,
							"tsc/clean_rounds")));
		} else {
			uint64_t rounds = READ_U64(cpu_path(path, sizeof(path), cpu, "tsc/rounds"));
			uint64_t clean = READ_U64(cpu_path(path, sizeof(path), cpu,
							   "tsc/clean_rounds"));

			EXPECT_LE(8u, rounds);
			EXPECT_GE(max_rounds, rounds);
			/* The fastest probe is clean by definition. */
			EXPECT_LE(1u, clean) TH_LOG("cpu%d", cpu);
			EXPECT_GE(rounds, clean) TH_LOG("cpu%d", cpu);
			TH_LOG("cpu%d: %" PRIu64 " of %" PRIu64 " probes clean", cpu, clean, rounds);
		}
		TH_LOG("cpu%d: %s offset %" PRId64 " in [%" PRId64 ", %" PRId64 "]",
		       cpu, strtok(status, "\n"), off, lo, hi);
	}
	EXPECT_EQ(1, references);
}

/*
 * The summary is what the per-CPU files imply: the skew bound is the
 * envelope of the intervals, and monotonic means every interval of a
 * consistent CPU contains zero (no probe saw time go backwards).
 */
TEST(summary_matches_per_cpu)
{
	int cpus[MAX_CPUS], n = list_cpus(cpus, MAX_CPUS);
	int64_t env_lo = 0, env_hi = 0;
	bool monotonic = true;
	char path[256];

	for (int c = 0; c < n; c++) {
		int64_t lo, hi;

		if (!cpu_is_online(cpus[c]))
			continue;
		lo = READ_S64(cpu_path(path, sizeof(path), cpus[c], "tsc/offset_min_ticks"));
		hi = READ_S64(cpu_path(path, sizeof(path), cpus[c], "tsc/offset_max_ticks"));
		env_lo = lo < env_lo ? lo : env_lo;
		env_hi = hi > env_hi ? hi : env_hi;
		if (!READ_U64(cpu_path(path, sizeof(path), cpus[c], "tsc/consistent")) ||
		    lo > 0 || hi < 0)
			monotonic = false;
	}
	EXPECT_EQ((uint64_t)(env_hi - env_lo), READ_U64(TSC_DIR "/max_skew_ticks"));
	EXPECT_EQ((uint64_t)monotonic, READ_U64(TSC_DIR "/monotonic_vs_reference"));
}

/*
 * The last measurement is in the past, and the IRQ-off windows bounded by
 * irqoff_max_us plus 1 ms for SMIs and the like, in the best of three
 * measurements (irqoff_best_of_three()).  A guest with more vCPUs than its
 * host has CPUs loses whole host time slices inside its windows: the
 * harness says so in $TSCFK_OVERCOMMITTED and the bound is not held.
 */
TEST(measurement_summary)
{
	const char *overcommitted = getenv("TSCFK_OVERCOMMITTED");
	uint64_t gen = READ_U64(TSC_DIR "/generation");
	uint64_t when = READ_U64(TSC_DIR "/last_measured_ns");
	uint64_t since = READ_U64(TSC_DIR "/measured_since_ns");
	uint64_t irqoff = READ_U64(TSC_DIR "/max_irqoff_ns");
	uint64_t bound_us = READ_U64(MODULE_DIR "/parameters/irqoff_max_us");
	uint64_t ref_irqoff = READ_U64(TSC_DIR "/reference_irqoff_ns");
	long online = sysconf(_SC_NPROCESSORS_ONLN);

	EXPECT_LE(1u, gen);
	EXPECT_LT(0u, when);
	EXPECT_GE(now_ns(CLOCK_MONOTONIC), when);
	/* The results began to be measured before the last measurement ended. */
	EXPECT_LT(0u, since);
	EXPECT_GT(when, since);
	TH_LOG("generation %" PRIu64 ", longest IRQ-off window %" PRIu64
	       " ns (bound %" PRIu64 " us), %ld CPUs online", gen, irqoff,
	       bound_us, online);
	TH_LOG("the reference CPU's windows: %" PRIu64 " ns of the measurement's %" PRIu64,
	       ref_irqoff, when - since);
	if (online == 1) {
		EXPECT_EQ(0u, irqoff);	/* nothing to measure against */
		EXPECT_EQ(0u, ref_irqoff);
	} else {
		uint64_t ns[3], best;

		EXPECT_LT(0u, irqoff);
		/* Some windows, and no more than the measurement lasted. */
		EXPECT_LT(0u, ref_irqoff);
		EXPECT_GE(when - since, ref_irqoff);
		best = irqoff_best_of_three(ns);
		ASSERT_LT(0u, best);
		TH_LOG("longest window per measurement %" PRIu64 ", %" PRIu64 ", %" PRIu64
		       " ns", ns[0], ns[1], ns[2]);
		if (overcommitted)
			TH_LOG("bound not asserted: %s", overcommitted);
		else
			EXPECT_GE((bound_us + 1000) * 1000, best);
	}
}

TEST_HARNESS_MAIN
