// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc_clock_check(): a clock that is right passes; each way of being
 * wrong is caught, with its own errno and reason: the TSC before the
 * anchor, a suspend since it, a rate off CLOCK_MONOTONIC_RAW's, the kernel
 * having dropped tsc or switched away from it.  Each case takes a clock
 * that is right and changes the one thing it is about.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_sysfs.h"
#include "internal.h"
#include "../../testlib/harness.h"

/* A sysfs root whose clocksource files say 'available' and 'current'. */
static void fake_clocksources(struct __test_metadata *_metadata, char *dir, size_t size,
			      const char *available, const char *current)
{
	static const char *const names[] = { "available_clocksource", "current_clocksource" };
	const char *values[] = { available, current };
	char path[256];

	fake_root(_metadata, dir, size, 0);
	snprintf(path, sizeof(path), "mkdir -p %s/devices/system/clocksource/clocksource0", dir);
	ASSERT_EQ(0, system(path));
	for (int i = 0; i < 2; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/devices/system/clocksource/clocksource0/%s",
			 dir, names[i]);
		f = fopen(path, "w");
		ASSERT_NE(NULL, f);
		fprintf(f, "%s\n", values[i]);
		ASSERT_EQ(0, fclose(f));
	}
	ASSERT_EQ(0, setenv("TSC_SYSFS_ROOT", dir, 1));
}

FIXTURE(check) {
	struct tsc_clock clk;
	char dir[64];
};

/*
 * A clock that is right: its frequency calibrated against the clock it is
 * checked against, the kernel's files saying tsc throughout.
 */
FIXTURE_SETUP(check)
{
	TSC_OPTS(o, .source = TSC_SOURCE_CALIBRATION, .calibrate_max_ms = 100);

	fake_clocksources(_metadata, self->dir, sizeof(self->dir), "tsc hpet acpi_pm", "tsc");
	self->clk.sz = sizeof(self->clk);
	ASSERT_EQ(0, tsc_clock_init(&self->clk, &o)) TH_LOG("%s", tsc_last_error());
	EXPECT_STREQ("tsc", self->clk.clocksource);
}

FIXTURE_TEARDOWN(check)
{
	unsetenv("TSC_SYSFS_ROOT");
	remove_root(self->dir);
}

static void expect_fails(struct __test_metadata *_metadata, const struct tsc_clock *clk,
			 int err, const char *why)
{
	EXPECT_EQ(err, tsc_clock_check(clk));
	EXPECT_NE(NULL, strstr(tsc_last_error(), why)) TH_LOG("%s", tsc_last_error());
}

TEST_F(check, a_right_clock_passes)
{
	struct timespec ms50 = { 0, 50000000 };

	EXPECT_EQ(0, tsc_clock_check(&self->clk)) TH_LOG("%s", tsc_last_error());
	nanosleep(&ms50, NULL);
	EXPECT_EQ(0, tsc_clock_check(&self->clk)) TH_LOG("%s", tsc_last_error());
	EXPECT_STREQ("", tsc_last_error());
}

TEST_F(check, tsc_before_the_anchor)
{
	self->clk.base_ticks = tsc_ticks_unordered() + (1ull << 40);
	expect_fails(_metadata, &self->clk, -ERANGE, "before the clock's anchor");
}

/* As if CLOCK_BOOTTIME had gained 2 s on CLOCK_MONOTONIC since the anchor. */
TEST_F(check, a_suspend)
{
	self->clk.base_boot_ns -= 2000000000;
	expect_fails(_metadata, &self->clk, -ESTALE, "suspended for 2.0");
}

/* On bare metal a suspend resets the TSC too: the cause is what is said. */
TEST_F(check, a_suspend_that_reset_the_tsc)
{
	self->clk.base_boot_ns -= 2000000000;
	self->clk.base_ticks = tsc_ticks_unordered() + (1ull << 40);
	expect_fails(_metadata, &self->clk, -ESTALE, "suspended for 2.0");
}

/*
 * As if CLOCK_MONOTONIC_RAW had run 1 ms behind the clock since the
 * anchor: caught; 10 us is within the slack and passes.
 */
TEST_F(check, a_rate_off)
{
	self->clk.base_raw_ns += 10000;
	EXPECT_EQ(0, tsc_clock_check(&self->clk)) TH_LOG("%s", tsc_last_error());
	self->clk.base_raw_ns += 990000;
	expect_fails(_metadata, &self->clk, -ERANGE, "from CLOCK_MONOTONIC_RAW");
}

/*
 * A clock as exact as the perf page's (0.001 ppm claimed) still parts
 * from CLOCK_MONOTONIC_RAW, which runs at the clocksource's rounded mult:
 * up to 0.24 ppm, allowed 0.5.  As if anchored 400 s ago: 0.45 ppm apart
 * (180 us, beyond the 100 us slack) passes, 2 ppm (800 us) is a rate error.
 */
TEST_F(check, raw_rounding_is_no_rate_error)
{
	const uint64_t span = 400000000000ull;
	uint64_t ticks = tsc_ns_to_ticks(&self->clk.conv, span);

	if (self->clk.base_ticks < ticks)
		SKIP(return, "the TSC has not counted 400 s since it started");
	self->clk.freq.precision_ppm = 0.001;
	self->clk.base_ticks -= ticks;
	self->clk.base_mono_ns -= span;
	self->clk.base_real_ns -= span;
	self->clk.base_boot_ns -= span;
	self->clk.base_raw_ns -= span + 180000;
	EXPECT_EQ(0, tsc_clock_check(&self->clk)) TH_LOG("%s", tsc_last_error());
	self->clk.base_raw_ns -= 620000;
	expect_fails(_metadata, &self->clk, -ERANGE, "from CLOCK_MONOTONIC_RAW");
}

TEST_F(check, the_kernel_dropped_tsc)
{
	char dir[64];

	fake_clocksources(_metadata, dir, sizeof(dir), "hpet acpi_pm", "hpet");
	expect_fails(_metadata, &self->clk, -ENODEV, "marked the TSC unstable");
	remove_root(dir);
}

TEST_F(check, the_kernel_switched_away_from_tsc)
{
	char dir[64];

	fake_clocksources(_metadata, dir, sizeof(dir), "tsc hpet acpi_pm", "hpet");
	expect_fails(_metadata, &self->clk, -ENODEV, "was tsc at the clock's anchor and is hpet now");
	/* Anchored on kvm-clock, with tsc still offered: nothing wrong. */
	snprintf(self->clk.clocksource, sizeof(self->clk.clocksource), "kvm-clock");
	EXPECT_EQ(0, tsc_clock_check(&self->clk)) TH_LOG("%s", tsc_last_error());
	remove_root(dir);
}

/*
 * A short suspend is one all the same: 1 ms, ten times the slack, is
 * caught; the slack is for preemption, not for suspends.
 */
TEST_F(check, a_short_suspend)
{
	self->clk.base_boot_ns -= 1000000;
	expect_fails(_metadata, &self->clk, -ESTALE, "suspended for 0.001");
}

/*
 * Anchored on tsc, then the kernel's files unreadable (a sandbox without
 * /sys, say): they say nothing either way, and the clock passes.
 */
TEST_F(check, unreadable_clocksource_files_say_nothing)
{
	char dir[64];

	fake_root(_metadata, dir, sizeof(dir), 0);
	ASSERT_EQ(0, setenv("TSC_SYSFS_ROOT", dir, 1));
	EXPECT_EQ(0, tsc_clock_check(&self->clk)) TH_LOG("%s", tsc_last_error());
	remove_root(dir);
}

TEST_HARNESS_MAIN
