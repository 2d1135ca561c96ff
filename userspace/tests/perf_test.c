// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The perf page as a source: the rate its time_mult and time_shift imply,
 * exact, and within the hard bound stated of the tsc clocksource's rate;
 * on this machine, the page's rate or the reason there is none.
 */
#include <errno.h>
#include <grp.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "kernel_mults.h"
#include "../../testlib/harness.h"

/*
 * The kernel's cyc2ns scale for tsc_khz: ns = cycles * mult >> shift,
 * mult = (NSEC_PER_MSEC << shift) / khz, rounded to nearest
 * (clocks_calc_mult_shift()), then halved if shift came out 32.  Against
 * real kernels' clocks (kernel_mults.h), at every shift: within the hard
 * bound, which is no wider than the two roundings.
 */
TEST(rate_within_its_bound)
{
	for (unsigned int i = 0; i < sizeof(kernel_mults) / sizeof(kernel_mults[0]); i++)
		for (uint16_t shift = 24; shift <= 32; shift++) {
			uint64_t khz = kernel_mults[i].khz;
			uint64_t mult = ((1000000ull << shift) + khz / 2) / khz;
			uint16_t s = shift;
			double truth = kernel_hz(i), off;
			struct tsc_freq f;

			if (mult > UINT32_MAX)
				continue;
			if (s == 32) {
				s = 31;
				mult >>= 1;
			}
			ASSERT_EQ(0, tsc__freq_from_perf_mult(&f, (uint32_t)mult, s))
				TH_LOG("%s", tsc_last_error());
			EXPECT_EQ(TSC_SOURCE_PERF, f.source);
			EXPECT_EQ(TSC_REFERENCE_KERNEL, f.precision_of);
			/* Exactly 1e9 * 2^shift / mult. */
			EXPECT_EQ((unsigned __int128)f.num * mult,
				  ((unsigned __int128)1000000000 << s) * f.den);
			off = fabs(f.hz - truth) / truth * 1e6;
			EXPECT_EQ(f.precision_ppm, f.bound_ppm);
			EXPECT_GE(f.bound_ppm, off) {
				TH_LOG("%llu kHz, shift %u: %.6f ppm off the kernel's clocks, %.6f ppm claimed",
				       (unsigned long long)khz, s, off, f.bound_ppm);
			}
			EXPECT_GE(kernel_mults[i].units * 1e6 / (kernel_mults[i].mult - 1) + 1.01e6 / mult,
				  f.bound_ppm);
		}
}

/*
 * A mult too coarse to give tsc_khz back (no kernel's): no hard bound,
 * and a precision that covers the 0.5 kHz tsc_khz may lie anywhere in.
 */
TEST(coarse_mult_has_no_bound)
{
	static const uint64_t khz[] = { 600000, 2095077, 3699999 };

	for (size_t i = 0; i < sizeof(khz) / sizeof(khz[0]); i++)
		for (uint16_t shift = 11; shift <= 19; shift += 4) {
			uint64_t mult = ((1000000ull << shift) + khz[i] / 2) / khz[i];
			struct tsc_freq f;

			ASSERT_EQ(0, tsc__freq_from_perf_mult(&f, (uint32_t)mult, shift))
				TH_LOG("%s", tsc_last_error());
			EXPECT_EQ(0.0, f.bound_ppm);
			for (int end = -1; end <= 1; end += 2) {
				double truth = (double)khz[i] * 1e3 + end * 499.9;
				double err = fabs(f.hz - truth) / truth * 1e6;

				EXPECT_GE(f.precision_ppm, err) {
					TH_LOG("%llu kHz, shift %u, rate %.1f Hz: %.6f ppm off, %.6f ppm claimed",
					       (unsigned long long)khz[i], shift, truth, err,
					       f.precision_ppm);
				}
			}
		}
}

TEST(no_conversion_is_refused)
{
	struct tsc_freq f;

	EXPECT_EQ(-ERANGE, tsc__freq_from_perf_mult(&f, 0, 10));
	EXPECT_EQ(-ERANGE, tsc__freq_from_perf_mult(&f, 1, 64));
	/* 1e9 * 2^40 / 1 Hz is far above 20 GHz. */
	EXPECT_EQ(-ERANGE, tsc__freq_from_perf_mult(&f, 1, 40));
}

/*
 * The page read as the kernel writes it: nothing while its sequence count
 * is odd (an update under way), the conversion only with cap_user_time.
 */
TEST(page_read_by_its_sequence_count)
{
	struct perf_event_mmap_page pg = { .lock = 2, .time_mult = 825960967, .time_shift = 31 };
	uint32_t mult;
	uint16_t shift;

	EXPECT_EQ(-ENODATA, tsc__perf_read_page(&pg, &mult, &shift));
	pg.cap_user_time = 1;
	EXPECT_EQ(0, tsc__perf_read_page(&pg, &mult, &shift));
	EXPECT_EQ(825960967u, mult);
	EXPECT_EQ(31, shift);
	pg.lock = 3;
	EXPECT_EQ(-EAGAIN, tsc__perf_read_page(&pg, &mult, &shift));
}

/* A refusal names the paranoia level, the usual cause. */
TEST(refusal_says_why)
{
	EXPECT_EQ(-EACCES, tsc__perf_open_failed(EACCES));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "perf_event_paranoid is "));
	EXPECT_EQ(-ENOSYS, tsc__perf_open_failed(ENOSYS));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "perf: perf_event_open: "));
}

/*
 * Who opens which event: root binds one to its CPU, which flips no
 * static key; without privilege the CPU's event is refused and the
 * thread's is the way in, where perf_event_paranoid (1 or 2) allows it.
 * Debian's kernels refuse even that at 3 and the refusal names the
 * level.  Opened is opened, whether or not the page then offers the
 * conversion: the detail, or the reason, names the event.
 */
static const char *perf_event_named(int err, const struct tsc_freq *f)
{
	if (err && err != -ENODATA)
		return "none";
	if (strstr(err ? tsc_last_error() : f->detail, "of this CPU"))
		return "cpu";
	if (strstr(err ? tsc_last_error() : f->detail, "of this thread"))
		return "thread";
	return "none";
}

TEST(root_binds_to_its_cpu)
{
	struct tsc_freq f;
	int err;

	if (geteuid() != 0)
		SKIP(return, "not root");
	err = tsc_freq_from_perf(&f);
	if (err == -ENOENT || err == -ENOSYS)
		SKIP(return, "no perf events: %s", tsc_last_error());
	ASSERT_STREQ("cpu", perf_event_named(err, &f))
		TH_LOG("%d: %s", err, err ? tsc_last_error() : f.detail);
}

TEST(unprivileged_takes_the_threads_event)
{
	FILE *pf = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	char buf[16] = "", *end;
	int status = -1;
	long level;
	pid_t pid;

	if (!pf)
		SKIP(return, "no perf_event_paranoid: no perf events");
	ASSERT_NE(NULL, fgets(buf, sizeof(buf), pf));
	(void)fclose(pf);	/* read only */
	level = strtol(buf, &end, 10);
	ASSERT_NE((const char *)buf, (const char *)end) TH_LOG("perf_event_paranoid: %s", buf);
	if (level <= 0)
		SKIP(return, "perf_event_paranoid %ld lets anyone bind to a CPU", level);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct tsc_freq f;
		int err;

		if (geteuid() == 0 && (setgroups(0, NULL) || setgid(65534) || setuid(65534)))
			_exit(10);
		err = tsc_freq_from_perf(&f);
		if (err == -EACCES)
			_exit(level >= 3 && strstr(tsc_last_error(), "perf_event_paranoid is ") ? 0 : 11);
		if (err == -ENOENT || err == -ENOSYS)
			_exit(0);
		_exit(strcmp("thread", perf_event_named(err, &f)) ? 12 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	/* 10: could not drop root; 11: refused at level <3 or unnamed; 12: not the thread's */
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("perf_event_paranoid %ld: status %#x", level, status);
}

/*
 * Here: the page's rate, agreeing with a calibration, or a reason.  Where
 * the kernel offers the page (TCG guests with a stable TSC) libtsc_test
 * holds it to the kernel's own kHz.
 */
TEST(this_machine)
{
	struct tsc_freq f, cal;
	int err = tsc_freq_from_perf(&f);

	TH_LOG("%d: %s", err, err ? tsc_last_error() : f.detail);
	if (err) {
		/* Any errno perf_event_open() or mmap() gives, with the reason. */
		EXPECT_GT(0, err);
		EXPECT_EQ(0, strncmp(tsc_last_error(), "perf: ", 6));
		return;
	}
	ASSERT_EQ(0, tsc_freq_calibrate(&cal, 1, 100)) TH_LOG("%s", tsc_last_error());
	EXPECT_GT(100.0, fabs(tsc_freq_diff_ppm(&f, &cal)));
}

TEST_HARNESS_MAIN
