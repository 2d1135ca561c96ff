// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc_freq_get(): the best source wins, the skipped ones are explained,
 * a forced source is used alone, verification catches a wrong value, and
 * options from a smaller (older) struct are read with defaults.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "fake_sysfs.h"
#include "../../testlib/harness.h"
#include "libtsc.h"

TEST(sysfs_wins_when_present)
{
	char dir[64];
	struct tsc_freq f;
	TSC_OPTS(o, .sysfs_root = dir);

	fake_root(_metadata, dir, sizeof(dir), 2600002);
	ASSERT_EQ(0, tsc_freq_get(&f, &o)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(TSC_SOURCE_SYSFS, f.source);
	EXPECT_EQ(2600002000u, f.num / f.den);
	EXPECT_STREQ("", tsc_last_error());
	remove_root(dir);
}

/* Without the file the next source answers, and detail says why. */
TEST(falls_back_and_says_why)
{
	char dir[64];
	struct tsc_freq f;
	TSC_OPTS(o, .sysfs_root = dir, .calibrate_max_ms = 50);

	fake_root(_metadata, dir, sizeof(dir), 0);
	ASSERT_EQ(0, tsc_freq_get(&f, &o)) TH_LOG("%s", tsc_last_error());
	TH_LOG("%s: %s", tsc_source_name(f.source), f.detail);
	EXPECT_NE(TSC_SOURCE_SYSFS, f.source);
	EXPECT_NE(NULL, strstr(f.detail, "skipped"));
	EXPECT_NE(NULL, strstr(f.detail, "tsc_freq_khz: No such file"));
	remove_root(dir);
}

/* A bad file is never believed, even when it is the only file there. */
TEST(bad_file_is_skipped)
{
	char dir[64];
	struct tsc_freq f;
	TSC_OPTS(o, .sysfs_root = dir, .calibrate_max_ms = 50);

	fake_root(_metadata, dir, sizeof(dir), 999);	/* 999 kHz: below 1 MHz */
	ASSERT_EQ(0, tsc_freq_get(&f, &o));
	EXPECT_NE(TSC_SOURCE_SYSFS, f.source);
	EXPECT_NE(NULL, strstr(f.detail, "not within"));
	remove_root(dir);
}

/*
 * A value the kernel may never have refined (the module says the TSC is
 * unstable) gives way to every other source, and says so; forced, it is
 * used, stated good to 1%.
 */
TEST(unrefined_sysfs_is_the_last_resort)
{
	char dir[64], path[128];
	struct tsc_freq f;
	TSC_OPTS(o, .sysfs_root = dir);
	TSC_OPTS(forced, .sysfs_root = dir, .source = TSC_SOURCE_SYSFS);
	FILE *u;

	fake_root(_metadata, dir, sizeof(dir), 2598022);
	snprintf(path, sizeof(path), "%s/devices/system/cpu/tsc", dir);
	ASSERT_EQ(0, mkdir(path, 0755));
	snprintf(path, sizeof(path), "%s/devices/system/cpu/tsc/unstable", dir);
	u = fopen(path, "w");
	ASSERT_NE(NULL, u);
	fputs("1\n", u);
	ASSERT_EQ(0, fclose(u));

	ASSERT_EQ(0, tsc_freq_get(&f, &o)) TH_LOG("%s", tsc_last_error());
	TH_LOG("%s: %s", tsc_source_name(f.source), f.detail);
	EXPECT_NE(TSC_SOURCE_SYSFS, f.source);
	EXPECT_NE(NULL, strstr(f.detail, "2598022 kHz, maybe not refined"));

	ASSERT_EQ(0, tsc_freq_get(&f, &forced)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(TSC_SOURCE_SYSFS, f.source);
	EXPECT_EQ(2598022000u, f.num);
	EXPECT_EQ(10000.0, f.precision_ppm);
	remove_root(dir);
}

TEST(forced_source_alone)
{
	char dir[64];
	struct tsc_freq f;
	TSC_OPTS(o, .sysfs_root = dir, .source = TSC_SOURCE_SYSFS);

	fake_root(_metadata, dir, sizeof(dir), 0);
	EXPECT_EQ(-ENOENT, tsc_freq_get(&f, &o));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "module loaded?"));
	o.source = TSC_SOURCE_CALIBRATION;
	o.calibrate_max_ms = 30;
	ASSERT_EQ(0, tsc_freq_get(&f, &o));
	EXPECT_EQ(TSC_SOURCE_CALIBRATION, f.source);
	o.source = (enum tsc_source)99;
	EXPECT_EQ(-EINVAL, tsc_freq_get(&f, &o));
	remove_root(dir);
}

/*
 * Verification: a file that agrees with a calibration passes, one that is
 * 1000 ppm off fails with ERANGE, and the message has both numbers.
 */
TEST(verify)
{
	struct tsc_freq cal, f;
	char dir[64];

	ASSERT_EQ(0, tsc_freq_calibrate(&cal, 0.1, 1000));
	fake_root(_metadata, dir, sizeof(dir), (cal.num / cal.den + 500) / 1000);
	{
		TSC_OPTS(o, .sysfs_root = dir, .verify = true);

		ASSERT_EQ(0, tsc_freq_get(&f, &o)) TH_LOG("%s", tsc_last_error());
		EXPECT_EQ(TSC_SOURCE_SYSFS, f.source);
	}
	remove_root(dir);

	fake_root(_metadata, dir, sizeof(dir), (uint64_t)(cal.hz * 1.001 / 1000));
	{
		TSC_OPTS(o, .sysfs_root = dir, .verify = true);

		EXPECT_EQ(-ERANGE, tsc_freq_get(&f, &o));
		TH_LOG("%s", tsc_last_error());
		EXPECT_NE(NULL, strstr(tsc_last_error(), "ppm apart"));
		EXPECT_EQ(TSC_SOURCE_SYSFS, f.source);	/* still filled in */
		/* A looser threshold lets it through. */
		o.verify_ppm = 2000;
		EXPECT_EQ(0, tsc_freq_get(&f, &o));
		/* One that no difference could exceed is refused, not obeyed. */
		o.verify_ppm = NAN;
		EXPECT_EQ(-EINVAL, tsc_freq_get(&f, &o));
		EXPECT_NE(NULL, strstr(tsc_last_error(), "verify_ppm")) TH_LOG("%s", tsc_last_error());
		o.verify_ppm = -1;
		EXPECT_EQ(-EINVAL, tsc_freq_get(&f, &o));
		o.verify_ppm = INFINITY;
		EXPECT_EQ(-EINVAL, tsc_freq_get(&f, &o));
	}
	remove_root(dir);

	/* As far below: refused too, whichever side the file errs on. */
	fake_root(_metadata, dir, sizeof(dir), (uint64_t)(cal.hz * 0.999 / 1000));
	{
		TSC_OPTS(o, .sysfs_root = dir, .verify = true);

		EXPECT_EQ(-ERANGE, tsc_freq_get(&f, &o));
		EXPECT_NE(NULL, strstr(tsc_last_error(), "ppm apart")) TH_LOG("%s", tsc_last_error());
	}
	remove_root(dir);
}

/* An older caller's smaller struct: the fields it lacks are defaults. */
TEST(options_struct_sizes)
{
	struct tsc_opts o = { .sz = offsetof(struct tsc_opts, source),
			      .sysfs_root = "/nonexistent",
			      .source = TSC_SOURCE_SYSFS, .verify = true };
	struct tsc_freq f;

	o.calibrate_max_ms = 30;	/* past sz: must be ignored too */
	o.calibrate_ppm = 0;
	/* source is past sz: the best source is used, not sysfs alone. */
	EXPECT_EQ(0, tsc_freq_get(&f, &o)) TH_LOG("%s", tsc_last_error());
	EXPECT_NE(TSC_SOURCE_SYSFS, f.source);
	o.sz = 0;
	EXPECT_EQ(-EINVAL, tsc_freq_get(&f, &o));
	EXPECT_EQ(0, tsc_freq_get(&f, NULL));
}

/*
 * A newer caller's larger struct: fields past this library's are fine
 * while zero, and refused, not ignored, once set.  Every version's fields
 * start past the last one's padding, so the size tells them apart.
 */
TEST(options_from_a_newer_header)
{
	struct {
		struct tsc_opts o;
		uint64_t newer;
	} n = { .o = { .sz = sizeof(n), .source = TSC_SOURCE_CALIBRATION,
		       .calibrate_max_ms = 20, .calibrate_ppm = 1000 } };
	struct tsc_freq f;

	EXPECT_EQ(0, tsc_freq_get(&f, &n.o)) TH_LOG("%s", tsc_last_error());
	n.newer = 1;
	EXPECT_EQ(-EINVAL, tsc_freq_get(&f, &n.o));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "built against a newer libtsc.h"))
		TH_LOG("%s", tsc_last_error());
}

TEST(diff_ppm)
{
	struct tsc_freq a = { .num = 1000001, .den = 1 };
	struct tsc_freq b = { .num = 1000000, .den = 1 };
	struct tsc_freq c = { .num = 3000000, .den = 3 };

	EXPECT_GT(1e-9, fabs(tsc_freq_diff_ppm(&a, &b) - 1.0));
	EXPECT_GT(1e-9, fabs(tsc_freq_diff_ppm(&b, &a) + 1.0 / 1.000001));
	EXPECT_EQ(0.0, tsc_freq_diff_ppm(&b, &c));
	/* A zeroed struct has no rate: NaN, whichever side, never a number. */
	{
		struct tsc_freq none = { 0 };

		EXPECT_TRUE(isnan(tsc_freq_diff_ppm(&a, &none)));
		EXPECT_TRUE(isnan(tsc_freq_diff_ppm(&none, &a)));
	}
}

TEST_HARNESS_MAIN
