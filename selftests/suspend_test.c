// SPDX-License-Identifier: GPL-2.0
/*
 * tsc_clock_check() across a real suspend to RAM: a clock anchored before
 * it is found wrong after it (a suspend since the anchor, or a TSC that
 * restarted below the anchor), and a clock anchored after it is right.
 *
 * Run as root, from the guest's tmpfs and linked statically (make
 * vm-suspend): the guest's 9p shares do not come back from a suspend to
 * RAM, so nothing may be read from them after it.  The RTC's alarm wakes
 * the guest; QEMU wakes a guest from S3 on it (not from s2idle, which it
 * never left within a minute here: QEMU raises the RTC's ACPI wake event
 * only for a guest it suspended itself, and an ACPI machine's RTC alarm is
 * no wake interrupt of its own).  The timekeeper takes the same path out
 * of either, timekeeping_suspend() and timekeeping_resume() with the time
 * asleep added to BOOTTIME, and that is what the module's page follows.
 * With the module loaded, the exact system clocks are checked across it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "libtsc.h"
#include "sysclock_pair.h"

static int put(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, value, strlen(value));
	if (n < 0)
		n = -errno;
	close(fd);
	return n < 0 ? (int)n : 0;
}

static bool offers(const char *path, const char *word)
{
	char buf[256] = "";
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return false;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = '\0';
	close(fd);
	return strstr(buf, word) != NULL;
}

static bool can_suspend(struct __test_metadata *_metadata)
{
	if (geteuid() != 0)
		SKIP(return false, "not root: cannot suspend");
	if (access("/sys/class/rtc/rtc0/wakealarm", W_OK))
		SKIP(return false, "no RTC alarm to wake up with");
	if (!offers("/sys/power/mem_sleep", "deep"))
		SKIP(return false, "no suspend to RAM (mem_sleep has no 'deep')");
	return true;
}

/*
 * Suspend to RAM; the RTC wakes us 2-3 s after the write (it counts whole
 * seconds), of which getting to sleep takes up to a second under TCG: at
 * least half a second asleep.  *step: what failed.
 */
static int suspend(const char **step)
{
	static const char *const writes[][2] = {
		{ "/sys/power/mem_sleep", "deep" },
		{ "/sys/class/rtc/rtc0/wakealarm", "0" },
		{ "/sys/class/rtc/rtc0/wakealarm", "+3" },
		{ "/sys/power/state", "mem" },
	};
	int err = 0;

	for (size_t i = 0; !err && i < sizeof(writes) / sizeof(writes[0]); i++) {
		*step = writes[i][0];
		err = put(writes[i][0], writes[i][1]);
	}
	return err;
}

TEST(check_sees_a_suspend)
{
	TSC_OPTS(o, .calibrate_max_ms = 100);
	TSC_CLOCK(before);
	TSC_CLOCK(after);
	const char *step;
	int err;

	if (!can_suspend(_metadata))
		return;
	ASSERT_EQ(0, tsc_clock_init(&before, &o)) TH_LOG("%s", tsc_last_error());
	TH_LOG("clock from %s: %s", tsc_source_name(before.freq.source), before.freq.detail);
	ASSERT_EQ(0, tsc_clock_check(&before)) TH_LOG("%s", tsc_last_error());
	err = suspend(&step);
	ASSERT_EQ(0, err) TH_LOG("%s: %s", step, strerror(-err));

	err = tsc_clock_check(&before);
	TH_LOG("after the suspend: %d, %s", err, tsc_last_error());
	EXPECT_TRUE(err == -ESTALE || err == -ERANGE);
	EXPECT_TRUE(strstr(tsc_last_error(), "suspended for") ||
		    strstr(tsc_last_error(), "before the clock's anchor"));
	ASSERT_EQ(0, tsc_clock_init(&after, &o)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(0, tsc_clock_check(&after)) TH_LOG("%s", tsc_last_error());
}

struct sampler {
	const struct tsc_sysclock *s;
	atomic_bool stop;
	unsigned long samples, bad[3];
	uint64_t first[3][3];	/* the first violation of each clock */
	uint64_t widest[3];	/* the widest bracket of each clock */
};

/*
 * clock_gettime() between two library reads, each clock in turn, until
 * told to stop.  The freezer stops this thread anywhere in the loop, most
 * likely inside a bracket: the widest then spans the suspend (the time
 * asleep, but for MONOTONIC, which does not count it).
 */
static void *sample(void *arg)
{
	struct sampler *sm = arg;

	while (!atomic_load(&sm->stop)) {
		for (int c = 0; c < 3; c++) {
			uint64_t v[3];

			if (!sysclock_bracket(sm->s, c, v) && !sm->bad[c]++)
				memcpy(sm->first[c], v, sizeof(v));
			if (v[2] - v[0] > sm->widest[c])
				sm->widest[c] = v[2] - v[0];
		}
		sm->samples++;
	}
	return NULL;
}

/* BOOTTIME - MONOTONIC: the time spent asleep since boot. */
static uint64_t asleep_since_boot(void)
{
	uint64_t boot = sysclock_sys(SYSCLOCK_BOOT);

	return boot - sysclock_sys(SYSCLOCK_MONO);
}

/*
 * The module's page across a suspend to RAM: every clock_gettime() of
 * REALTIME, MONOTONIC and BOOTTIME lies between library reads around it,
 * in a thread from before the suspend to a second after it, and in this
 * one for a bracket certain to span the suspend; BOOTTIME gained the time
 * asleep that MONOTONIC did not; the page's generation changed.
 */
TEST(exact_across_a_suspend)
{
	TSC_SYSCLOCK(s);
	struct sampler sm = { .s = &s };
	uint64_t asleep, before[3], after[3], now[3];
	const char *step;
	uint32_t gen;
	pthread_t t;
	int err;

	if (!can_suspend(_metadata))
		return;
	if (access("/sys/devices/system/cpu/tsc/clock_page", R_OK))
		SKIP(return, "no clock_page: the module is not loaded");
	ASSERT_EQ(0, tsc_sysclock_init(&s, NULL)) TH_LOG("%s", tsc_last_error());
	if (s.path != TSC_SYSCLOCK_KERNEL)
		SKIP(return, "%s", s.why);
	gen = s.page->generation;
	asleep = asleep_since_boot();
	ASSERT_EQ(0, pthread_create(&t, NULL, sample, &sm));
	usleep(500000);
	for (int c = 0; c < 3; c++)
		before[c] = sysclock_lib(&s, c);
	err = suspend(&step);
	for (int c = 0; c < 3; c++) {
		now[c] = sysclock_sys(c);
		after[c] = sysclock_lib(&s, c);
	}
	sleep(1);
	atomic_store(&sm.stop, true);
	pthread_join(t, NULL);
	ASSERT_EQ(0, err) TH_LOG("%s: %s", step, strerror(-err));
	asleep = asleep_since_boot() - asleep;

	TH_LOG("%lu samples per clock; asleep %.3f s; generation %u -> %u",
	       sm.samples, asleep / 1e9, gen, s.page->generation);
	TH_LOG("widest brackets: REALTIME %.3f s, MONOTONIC %.3f s, BOOTTIME %.3f s",
	       sm.widest[0] / 1e9, sm.widest[1] / 1e9, sm.widest[2] / 1e9);
	for (int c = 0; c < 3; c++) {
		EXPECT_EQ(0, sm.bad[c])
			TH_LOG("%s: library %llu, clock_gettime %llu, library %llu",
			       sysclock_names[c], (unsigned long long)sm.first[c][0],
			       (unsigned long long)sm.first[c][1], (unsigned long long)sm.first[c][2]);
		EXPECT_TRUE(before[c] <= now[c] && now[c] <= after[c])
			TH_LOG("%s across the suspend: library %llu, clock_gettime %llu, library %llu",
			       sysclock_names[c], (unsigned long long)before[c],
			       (unsigned long long)now[c], (unsigned long long)after[c]);
	}
	EXPECT_LE(1000, sm.samples);
	EXPECT_LE(500000000ull, asleep);
	EXPECT_LE(asleep, after[SYSCLOCK_BOOT] - before[SYSCLOCK_BOOT]);
	EXPECT_NE(gen, s.page->generation);
	/* Still the TSC: the flags change only with the clocksource. */
	EXPECT_EQ(TSC_TIMEPAGE_TSC, s.page->flags);
	tsc_sysclock_fini(&s);
}

TEST_HARNESS_MAIN
