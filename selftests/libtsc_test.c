// SPDX-License-Identifier: GPL-2.0
/*
 * libtsc reading the module: with tsc_freq_khz loaded the library takes
 * its value, exactly; without it the library falls back, says why, and
 * its own calibration agrees with the kernel's value.  Run once with the
 * module loaded and once without (run_tests.sh does): each run tests the
 * case it finds and skips the other.
 */
#include <math.h>

#include "kselftest_harness.h"
#include "tscfk_test.h"
#include "tsc.h"

/* The kernel's clocksource: calibrations agree to a ppm only against tsc. */
static bool clocksource_is_tsc(void)
{
	char cs[32] = "";

	read_file(CPU_SYS "/../clocksource/clocksource0/current_clocksource",
		  cs, sizeof(cs));
	return !strcmp(cs, "tsc\n");
}

/*
 * A calibration against CLOCK_MONOTONIC_RAW agrees with the kernel's kHz
 * within 1 ppm when the TSC is the clocksource (the kernel's raw clock runs
 * on tsc_khz then), and within 100 ppm against another clocksource.
 */
static void expect_calibration_agrees(struct __test_metadata *_metadata,
				      uint64_t khz)
{
	struct tsc_freq cal, kernel = { .num = khz * 1000, .den = 1 };
	double limit = clocksource_is_tsc() ? 1.0 : 100.0;
	double diff;

	ASSERT_EQ(0, tsc_freq_calibrate(&cal, 0.05, 2000)) TH_LOG("%s", tsc_last_error());
	diff = tsc_freq_diff_ppm(&cal, &kernel);
	TH_LOG("calibrated %.3f Hz (+-%.3f ppm), kernel %llu kHz: %+.3f ppm (limit %.0f)",
	       cal.hz, cal.precision_ppm, (unsigned long long)khz, diff, limit);
	EXPECT_GT(limit, fabs(diff));
}

TEST(module_loaded_its_value_wins)
{
	struct tsc_freq f;
	uint64_t khz;

	if (access(TSC_DIR, F_OK))
		SKIP(return, "module not loaded (the other run tests that case)");
	khz = READ_U64(FREQ_FILE);
	ASSERT_EQ(0, tsc_freq_get(&f, NULL)) TH_LOG("%s", tsc_last_error());
	TH_LOG("%s: %s", tsc_source_name(f.source), f.detail);
	EXPECT_EQ(TSC_SOURCE_SYSFS, f.source);
	EXPECT_EQ(khz * 1000, f.num);
	EXPECT_EQ(1u, f.den);
	expect_calibration_agrees(_metadata, khz);
}

TEST(module_absent_library_falls_back)
{
	char msg[512];
	struct tsc_freq f;
	uint64_t khz;

	if (!access(TSC_DIR, F_OK))
		SKIP(return, "module loaded (the other run tests that case)");
	if (!access(FREQ_FILE, F_OK))
		SKIP(return, "the kernel itself provides %s", FREQ_FILE);
	ASSERT_EQ(0, tsc_freq_get(&f, NULL)) TH_LOG("%s", tsc_last_error());
	TH_LOG("%s: %s", tsc_source_name(f.source), f.detail);
	EXPECT_NE(TSC_SOURCE_SYSFS, f.source);
	EXPECT_NE(NULL, strstr(f.detail, "module loaded?"));
	khz = kernel_khz_from_log(msg, sizeof(msg));
	if (!khz)
		SKIP(return, "the kernel log no longer holds its TSC calibration");
	expect_calibration_agrees(_metadata, khz);
}

TEST_HARNESS_MAIN
