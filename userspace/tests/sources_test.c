// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Every way the frequency sources can lie: files that are missing, empty,
 * unreadable, zero, absurd, negative, with junk, or huge, read through a
 * fake sysfs root; and CPUID leaves with every field zero or absurd.  Each
 * is refused with its own errno and a reason.
 */
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../../testlib/harness.h"
#include "internal.h"
#include "kernel_mults.h"

/* A sysfs root in a temporary directory, with cpu0's directory in it. */
FIXTURE(root) {
	char dir[64], file[192];
};

FIXTURE_SETUP(root)
{
	char path[128];

	strcpy(self->dir, "/tmp/libtsc-test.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	snprintf(path, sizeof(path), "%s/devices", self->dir);
	ASSERT_EQ(0, mkdir(path, 0755));
	snprintf(path, sizeof(path), "%s/devices/system", self->dir);
	ASSERT_EQ(0, mkdir(path, 0755));
	snprintf(path, sizeof(path), "%s/devices/system/cpu", self->dir);
	ASSERT_EQ(0, mkdir(path, 0755));
	snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu0", self->dir);
	ASSERT_EQ(0, mkdir(path, 0755));
	snprintf(self->file, sizeof(self->file), "%s/tsc_freq_khz", path);
}

FIXTURE_TEARDOWN(root)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", self->dir);
	if (system(cmd))
		TH_LOG("could not remove %s", self->dir);
}

static void put(struct __test_metadata *_metadata, const char *path,
		const void *data, size_t len)
{
	FILE *f = fopen(path, "w");

	ASSERT_NE(NULL, f);
	ASSERT_EQ(len, fwrite(data, 1, len, f));
	ASSERT_EQ(0, fclose(f));
}

TEST_F(root, good_values)
{
	struct tsc_freq f;

	put(_metadata, self->file, "2600002\n", 8);
	ASSERT_EQ(0, tsc_freq_from_sysfs(&f, self->dir));
	EXPECT_EQ(TSC_SOURCE_SYSFS, f.source);
	EXPECT_EQ(2600002000u, f.num / f.den);
	EXPECT_NE(NULL, strstr(f.detail, "2600002 kHz"));
	/* The kernel's rounding of it into a mult of 2^22..2^23, a hard bound. */
	EXPECT_LT(0.5e6 / (1 << 23), f.precision_ppm);
	EXPECT_GT(0.5e6 / (1 << 22), f.precision_ppm);
	EXPECT_EQ(f.precision_ppm, f.bound_ppm);

	put(_metadata, self->file, "1000", 4);	/* no newline: fine */
	ASSERT_EQ(0, tsc_freq_from_sysfs(&f, self->dir));
	EXPECT_EQ(1000000u, f.num);
	put(_metadata, self->file, "20000000\n", 9);
	ASSERT_EQ(0, tsc_freq_from_sysfs(&f, self->dir));
}

/* Against real kernels' own mult: the bound is theirs, and holds. */
TEST_F(root, bound_of_the_kernels_rate)
{
	for (unsigned int i = 0; i < sizeof(kernel_mults) / sizeof(kernel_mults[0]); i++) {
		double truth = kernel_hz(i), off, u;
		struct tsc_freq f;
		char buf[32];

		snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)kernel_mults[i].khz);
		put(_metadata, self->file, buf, strlen(buf));
		ASSERT_EQ(0, tsc_freq_from_sysfs(&f, self->dir));
		off = fabs(f.hz - truth) / truth * 1e6;
		/* The kernel's own mult: half a unit of it, 0.75 where it halved it. */
		u = kernel_mults[i].units;
		EXPECT_GE(1e-12, fabs(f.bound_ppm / (u * 1e6 / (kernel_mults[i].mult - u)) - 1))
			TH_LOG("%s: bound %.9f ppm", buf, f.bound_ppm);
		EXPECT_GE(f.bound_ppm, off) TH_LOG("%s: %.9f ppm off, bound %.9f", buf, off, f.bound_ppm);
		EXPECT_EQ(TSC_REFERENCE_KERNEL, f.precision_of);
	}
}

TEST_F(root, bad_values)
{
	static const struct {
		const char *content;
		int err;
	} bad[] = {
		{ "", -ENODATA }, { "\n", -ENODATA },
		{ "0\n", -ERANGE }, { "999\n", -ERANGE },	/* < 1 MHz */
		{ "20000001\n", -ERANGE },			/* > 20 GHz */
		{ "99999999999999999999999\n", -ERANGE },	/* overflow */
		{ "-2600002\n", -EINVAL }, { "+2600002\n", -EINVAL },
		{ " 2600002\n", -EINVAL }, { "2600002 \n", -EINVAL },
		{ "2600002\n\n", -EINVAL }, { "2600002kHz\n", -EINVAL },
		{ "2.6e6\n", -EINVAL }, { "02600002\n", -EINVAL },
		{ "abc\n", -EINVAL }, { "2600002\0junk", -EINVAL },
	};
	struct tsc_freq f = { .source = TSC_SOURCE_NONE };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t len = strlen(bad[i].content);

		if (i == sizeof(bad) / sizeof(bad[0]) - 1)
			len = 12;	/* the one with a NUL inside */
		put(_metadata, self->file, bad[i].content, len);
		EXPECT_EQ(bad[i].err, tsc_freq_from_sysfs(&f, self->dir))
			TH_LOG("'%s': %s", bad[i].content, tsc_last_error());
		EXPECT_NE(NULL, strstr(tsc_last_error(), "tsc_freq_khz: "));
	}
	EXPECT_EQ(TSC_SOURCE_NONE, f.source);	/* never filled in */
}

/*
 * The module's tsc/unstable beside the value: 1 (or a file that cannot be
 * read as 0 or 1) means the kernel may never have refined its estimate,
 * which is then stated good to 1% and says why; 0 or no file, its step.
 */
TEST_F(root, unstable_tsc_means_unrefined)
{
	static const struct {
		const char *content;	/* NULL: no file */
		bool doubt;
		const char *why;
	} cases[] = {
		{ NULL, false, "" }, { "0\n", false, "" },
		{ "1\n", true, "the kernel marked the TSC unstable" },
		{ "2\n", true, "tsc/unstable reads 2, not 0 or 1" },
		{ "yes\n", true, "tsc/unstable unreadable" },
		{ "", true, "tsc/unstable unreadable" },
	};
	char dir[160], unstable[192];
	struct tsc_freq f;

	snprintf(dir, sizeof(dir), "%s/devices/system/cpu/tsc", self->dir);
	ASSERT_EQ(0, mkdir(dir, 0755));
	snprintf(unstable, sizeof(unstable), "%s/unstable", dir);
	put(_metadata, self->file, "2598022\n", 8);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool doubt = !cases[i].doubt;

		unlink(unstable);
		if (cases[i].content)
			put(_metadata, unstable, cases[i].content, strlen(cases[i].content));
		ASSERT_EQ(0, tsc__freq_from_sysfs(&f, self->dir, &doubt));
		TH_LOG("%s: %s", cases[i].content ? cases[i].content : "(none)", f.detail);
		EXPECT_EQ(cases[i].doubt, doubt);
		EXPECT_EQ(2598022000u, f.num);
		/* An estimate: 1% of the truth, no hard bound; else the kernel's rounding. */
		if (cases[i].doubt) {
			EXPECT_EQ(10000.0, f.precision_ppm);
			EXPECT_EQ(0.0, f.bound_ppm);
		} else {
			EXPECT_GT(0.5e6 / (1 << 22), f.precision_ppm);
			EXPECT_EQ(f.precision_ppm, f.bound_ppm);
		}
		EXPECT_NE(NULL, strstr(f.detail, cases[i].why));
		/* The public call gives the same, doubt stated in detail. */
		ASSERT_EQ(0, tsc_freq_from_sysfs(&f, self->dir));
		EXPECT_EQ(cases[i].doubt, strstr(f.detail, "maybe not refined") != NULL);
	}
}

/*
 * The module's tsc/tsc_known_freq: a rate the kernel took as known it
 * never estimated, so a TSC marked unstable casts no doubt on it; each
 * case says in detail how the kernel came by the rate, and what the
 * precision is of (the kernel's figure, or the true rate for a doubt).
 */
TEST_F(root, known_freq_is_never_an_estimate)
{
	static const struct {
		const char *known;	/* NULL: no file */
		bool doubt;
		const char *how;
	} cases[] = {
		{ "1\n", false, "taken by the kernel as known, never measured (tsc_known_freq)" },
		{ "0\n", true, "measured by the kernel at boot" },
		{ NULL, true, "how the kernel came by it unknown" },
		{ "7\n", true, "how the kernel came by it unknown" },
	};
	char dir[160], known[192];
	struct tsc_freq f;

	snprintf(dir, sizeof(dir), "%s/devices/system/cpu/tsc", self->dir);
	ASSERT_EQ(0, mkdir(dir, 0755));
	snprintf(known, sizeof(known), "%s/unstable", dir);
	put(_metadata, known, "1\n", 2);
	snprintf(known, sizeof(known), "%s/tsc_known_freq", dir);
	put(_metadata, self->file, "2598022\n", 8);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool doubt = !cases[i].doubt;

		unlink(known);
		if (cases[i].known)
			put(_metadata, known, cases[i].known, strlen(cases[i].known));
		ASSERT_EQ(0, tsc__freq_from_sysfs(&f, self->dir, &doubt));
		TH_LOG("%s: %s", cases[i].known ? cases[i].known : "(none)", f.detail);
		EXPECT_EQ(cases[i].doubt, doubt);
		EXPECT_EQ(cases[i].doubt ? TSC_REFERENCE_TRUE : TSC_REFERENCE_KERNEL, f.precision_of);
		if (!cases[i].doubt)
			EXPECT_NE(NULL, strstr(f.detail, cases[i].how));
		/* The reason to doubt replaces the account: the known case's stays. */
		EXPECT_EQ(!cases[i].doubt, strstr(f.detail, "maybe not refined") == NULL);
	}
	unlink(known);
	snprintf(known, sizeof(known), "%s/unstable", dir);
	put(_metadata, known, "0\n", 2);
	ASSERT_EQ(0, tsc_freq_from_sysfs(&f, self->dir));
	EXPECT_NE(NULL, strstr(f.detail, "2598022 kHz, how the kernel came by it unknown")) TH_LOG("%s", f.detail);
	EXPECT_EQ(TSC_REFERENCE_KERNEL, f.precision_of);
}

TEST_F(root, missing_huge_unreadable)
{
	char big[100000];
	struct tsc_freq f;

	EXPECT_EQ(-ENOENT, tsc_freq_from_sysfs(&f, self->dir));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "module loaded?"));

	memset(big, '1', sizeof(big));
	put(_metadata, self->file, big, sizeof(big));
	EXPECT_EQ(-EFBIG, tsc_freq_from_sysfs(&f, self->dir));

	/* A directory where the file should be: read() fails, EISDIR. */
	unlink(self->file);
	ASSERT_EQ(0, mkdir(self->file, 0755));
	EXPECT_EQ(-EISDIR, tsc_freq_from_sysfs(&f, self->dir));
	rmdir(self->file);

	/* Permissions stop only someone who is not root: be nobody. */
	put(_metadata, self->file, "2600002\n", 8);
	ASSERT_EQ(0, chmod(self->file, 0));
	ASSERT_EQ(0, chmod(self->dir, 0755));
	if (geteuid() == 0) {
		pid_t pid = fork();
		int status;

		ASSERT_LE(0, pid);
		if (pid == 0) {
			if (setgid(65534) || setuid(65534))
				_exit(2);
			_exit(tsc_freq_from_sysfs(&f, self->dir) == -EACCES ? 0 : 1);
		}
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		EXPECT_EQ(0, WEXITSTATUS(status));
	} else {
		EXPECT_EQ(-EACCES, tsc_freq_from_sysfs(&f, self->dir));
	}
}

/* TSC_SYSFS_ROOT stands in for "/sys" when no root is passed. */
TEST_F(root, root_from_environment)
{
	struct tsc_freq f;

	put(_metadata, self->file, "3000000\n", 8);
	ASSERT_EQ(0, setenv("TSC_SYSFS_ROOT", self->dir, 1));
	EXPECT_EQ(0, tsc_freq_from_sysfs(&f, NULL));
	EXPECT_EQ(3000000000u, f.num);
	unsetenv("TSC_SYSFS_ROOT");
}

TEST(signed_parser)
{
	int64_t v = 7;

	EXPECT_EQ(0, tsc__parse_s64("-40\n", 4, &v));
	EXPECT_EQ(-40, v);
	EXPECT_EQ(0, tsc__parse_s64("0", 1, &v));
	EXPECT_EQ(0, tsc__parse_s64("-9223372036854775808", 20, &v));
	EXPECT_EQ(INT64_MIN, v);
	EXPECT_EQ(-ERANGE, tsc__parse_s64("9223372036854775808", 19, &v));
	EXPECT_EQ(-EINVAL, tsc__parse_s64("-0", 2, &v));	/* found by value_fuzz */
	EXPECT_EQ(-EINVAL, tsc__parse_s64("-", 1, &v));
	EXPECT_EQ(-EINVAL, tsc__parse_s64("--1", 3, &v));
	EXPECT_EQ(-EINVAL, tsc__parse_s64("-01", 3, &v));
	EXPECT_EQ(-EINVAL, tsc__parse_u64("-1", 2, (uint64_t *)&v));
}

/* Every 64-bit value, the largest too; one more is out of range. */
TEST(unsigned_parser_range)
{
	uint64_t v = 7;

	EXPECT_EQ(0, tsc__parse_u64("18446744073709551615\n", 21, &v));
	EXPECT_EQ(UINT64_MAX, v);
	EXPECT_EQ(0, tsc__parse_u64("18446744073709551610", 20, &v));
	EXPECT_EQ(UINT64_MAX - 5, v);
	EXPECT_EQ(0, tsc__parse_u64("1844674407370955161", 19, &v));
	EXPECT_EQ(UINT64_MAX / 10, v);
	EXPECT_EQ(-ERANGE, tsc__parse_u64("18446744073709551616", 20, &v));
	EXPECT_EQ(-ERANGE, tsc__parse_u64("18446744073709551620", 20, &v));
	EXPECT_EQ(-ERANGE, tsc__parse_u64("184467440737095516150", 21, &v));
}

TEST(khz_parser)
{
	uint64_t khz = 7;

	EXPECT_EQ(0, tsc__parse_khz("1\n", 2, &khz));
	EXPECT_EQ(1u, khz);
	EXPECT_EQ(0, tsc__parse_khz("18446744073709551", 17, &khz));
	EXPECT_EQ(-ENODATA, tsc__parse_khz(NULL, 0, &khz));
	EXPECT_EQ(-EINVAL, tsc__parse_khz("\n\n", 2, &khz));
	EXPECT_EQ(-ERANGE, tsc__parse_khz("0", 1, &khz));
	/* Parsed; the sources judge the range (1 MHz..20 GHz). */
	EXPECT_EQ(0, tsc__parse_khz("18446744073709551615", 20, &khz));
	EXPECT_EQ(-ERANGE, tsc__parse_khz("18446744073709551616", 20, &khz));
}

TEST(cpuid_leaf_15)
{
	struct tsc__cpuid l15 = { .eax = 2, .ebx = 216, .ecx = 24000000 };
	struct tsc__cpuid l16 = { .eax = 2100 };	/* base 2100 MHz */
	struct tsc_freq f;

	/* Skylake-like: 24 MHz * 216 / 2 = 2.592 GHz, exactly, to the crystal's tolerance. */
	ASSERT_EQ(0, tsc__freq_from_leaf15(&f, &l15, NULL));
	EXPECT_EQ(TSC_SOURCE_CPUID, f.source);
	EXPECT_EQ(2592000000u, f.num / f.den);
	EXPECT_EQ(0u, f.num % f.den);
	EXPECT_EQ(TSC__CRYSTAL_PPM, f.precision_ppm);
	EXPECT_EQ(0.0, f.bound_ppm);			/* a rating, not a bound */
	EXPECT_EQ(TSC_REFERENCE_TRUE, f.precision_of);	/* a rated crystal's tolerance */
	EXPECT_STREQ("true", tsc_reference_name(f.precision_of));
	/* No crystal: no answer; leaf 0x16's base MHz is named, not taken. */
	l15.ecx = 0;
	EXPECT_EQ(-ENODATA, tsc__freq_from_leaf15(&f, &l15, &l16));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "base 2100 MHz is nominal"))
		TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(-ENODATA, tsc__freq_from_leaf15(&f, &l15, NULL));
	l16.eax = 0xffff0000;	/* only reserved bits */
	EXPECT_EQ(-ENODATA, tsc__freq_from_leaf15(&f, &l15, &l16));
	EXPECT_EQ(NULL, strstr(tsc_last_error(), "base"));
	/* Not enumerated at all. */
	l15 = (struct tsc__cpuid){ .eax = 0, .ebx = 216, .ecx = 24000000 };
	EXPECT_EQ(-ENODATA, tsc__freq_from_leaf15(&f, &l15, NULL));
	l15 = (struct tsc__cpuid){ .eax = 2, .ebx = 0, .ecx = 24000000 };
	EXPECT_EQ(-ENODATA, tsc__freq_from_leaf15(&f, &l15, NULL));
	/* Absurd: 4 GHz crystal * 2^32-1. */
	l15 = (struct tsc__cpuid){ .eax = 1, .ebx = UINT32_MAX, .ecx = UINT32_MAX };
	EXPECT_EQ(-ERANGE, tsc__freq_from_leaf15(&f, &l15, NULL));
	l15 = (struct tsc__cpuid){ .eax = UINT32_MAX, .ebx = 1, .ecx = 24000000 };
	EXPECT_EQ(-ERANGE, tsc__freq_from_leaf15(&f, &l15, NULL));
}

TEST(hypervisor_leaf)
{
	struct tsc__cpuid leaf = { .eax = 2600002 };
	struct tsc_freq f;

	ASSERT_EQ(0, tsc__freq_from_leaf40000010(&f, &leaf));
	EXPECT_EQ(TSC_SOURCE_HYPERVISOR, f.source);
	EXPECT_EQ(2600002000u, f.num / f.den);
	EXPECT_EQ(TSC_REFERENCE_HYPERVISOR, f.precision_of);
	EXPECT_EQ(500.0 / 2600002 * 1e3, f.precision_ppm);
	EXPECT_EQ(0.0, f.bound_ppm);	/* how it rounded its rate is its own */
	EXPECT_STREQ("hypervisor", tsc_reference_name(f.precision_of));
	leaf.eax = 0;
	EXPECT_EQ(-ENODATA, tsc__freq_from_leaf40000010(&f, &leaf));
	leaf.eax = 999;
	EXPECT_EQ(-ERANGE, tsc__freq_from_leaf40000010(&f, &leaf));
	leaf.eax = UINT32_MAX;
	EXPECT_EQ(-ERANGE, tsc__freq_from_leaf40000010(&f, &leaf));
}

/* On this machine: whatever CPUID says, it is refused or in range. */
TEST(real_cpuid_is_sane)
{
	struct tsc_freq f;
	int err = tsc_freq_from_cpuid(&f);

	TH_LOG("cpuid: %s", err ? tsc_last_error() : f.detail);
	if (!err) {
		EXPECT_TRUE(f.hz >= 1e6 && f.hz <= 2e10);
	} else {
		EXPECT_EQ(-ENODATA, err);
	}
	err = tsc_freq_from_hypervisor(&f);
	TH_LOG("hypervisor: %s", err ? tsc_last_error() : f.detail);
	if (!err) {
		EXPECT_TRUE(f.hz >= 1e6 && f.hz <= 2e10);
	} else {
		EXPECT_EQ(-ENODATA, err);
	}
}

TEST_HARNESS_MAIN
