/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The fixture of the tests that load and unload the module themselves
 * (from $TSCFK_KO, uncompressed, through finit_module(2)): each test starts
 * with the module unloaded and leaves it unloaded.  Include after
 * harness.h and tscfk_test.h.
 */
#ifndef TSCFK_MODULE_FIXTURE_H
#define TSCFK_MODULE_FIXTURE_H

/* Nothing of the module may remain once it is gone. */
static inline void expect_no_files(struct __test_metadata *_metadata)
{
	int cpus[MAX_CPUS], n = list_cpus(cpus, MAX_CPUS);
	char path[128];

	EXPECT_NE(0, access(MODULE_DIR, F_OK));
	EXPECT_NE(0, access(TSC_DIR, F_OK));
	EXPECT_NE(0, access(FREQ_FILE, F_OK));
	for (int i = 0; i < n; i++) {
		EXPECT_NE(0, access(cpu_path(path, sizeof(path), cpus[i], "tsc"), F_OK))
			TH_LOG("cpu%d/tsc left behind", cpus[i]);
		EXPECT_NE(0, access(cpu_path(path, sizeof(path), cpus[i], "tsc_freq_khz"), F_OK))
			TH_LOG("cpu%d/tsc_freq_khz left behind", cpus[i]);
	}
}

/* Load/unload cycles for the tests that repeat them: $TSCFK_CYCLES, or 200. */
static inline int load_cycles(void)
{
	const char *env = getenv("TSCFK_CYCLES");

	return env ? atoi(env) : 200;
}

/* CPUs a test took offline; the teardown brings them back, whatever happened. */
static int offlined[MAX_CPUS], noffline;

static inline int take_offline(int cpu)
{
	int ret = set_online(cpu, false);

	if (!ret)
		offlined[noffline++] = cpu;
	return ret;
}

static inline void restore_cpus(void)
{
	while (noffline > 0)
		set_online(offlined[--noffline], true);
}

FIXTURE(module) {};

FIXTURE_SETUP(module)
{
	const char *ko = getenv("TSCFK_KO");

	if (!ko || access(ko, R_OK))
		SKIP(return, "set TSCFK_KO to the module to load");
	if (geteuid() != 0)
		SKIP(return, "loading modules needs root");
	if (access(MODULE_DIR, F_OK) == 0)
		ASSERT_EQ(0, module_unload()) TH_LOG("the module was loaded and will not go");
	/* A patched kernel's own file would make the checks below wrong. */
	if (access(FREQ_FILE, F_OK) == 0)
		SKIP(return, "the kernel itself provides cpu0/tsc_freq_khz");
}

FIXTURE_TEARDOWN(module)
{
	if (access(MODULE_DIR, F_OK) == 0)
		module_unload();
	restore_cpus();
}

#endif /* TSCFK_MODULE_FIXTURE_H */
