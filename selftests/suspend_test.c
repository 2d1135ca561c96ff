// SPDX-License-Identifier: GPL-2.0
/*
 * tsc_clock_check() across a real suspend, to RAM and to idle: a clock
 * anchored before it is found wrong after it (a suspend since the anchor,
 * or a TSC that restarted below the anchor), and a clock anchored after it
 * is right.  With the module loaded, the exact system clocks are checked
 * across it; and a disciplined clock, which reads no MONOTONIC ahead of
 * the system's after it.
 *
 * Run as root, from the guest's tmpfs and linked statically (make
 * vm-suspend): the guest's 9p shares do not come back from a suspend, so
 * nothing may be read from them after it.  What wakes the guest:
 *
 *  - from RAM (S3), the RTC's alarm: QEMU wakes a guest it suspended on it;
 *  - from idle (s2idle), the ACPI power button, which the harness presses
 *    when asked (run-in-vm.sh --power-button).  QEMU raises the RTC's ACPI
 *    wake event only for a guest it suspended itself, which a guest in
 *    s2idle is not (it never woke within a minute here), and an ACPI
 *    machine's RTC alarm is no wake interrupt of its own.  The power
 *    button is a fixed ACPI event on the SCI, which s2idle keeps armed.
 *
 * The timekeeper takes the same path out of either, timekeeping_suspend()
 * and timekeeping_resume() with the time asleep added to BOOTTIME (s2idle:
 * once the last CPU is idle), and that is what the module's page follows.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../testlib/harness.h"
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

/* The module's count in tsc/NAME (clock_steps, clock_resumes). */
static unsigned long long module_count(const char *name)
{
	char path[128], buf[32] = "";
	int fd;

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/tsc/%s", name);
	fd = open(path, O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
		buf[0] = 0;
	if (fd >= 0)
		close(fd);
	return buf[0] ? strtoull(buf, NULL, 10) : ~0ull;
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

/* How to suspend, and what wakes the guest. */
FIXTURE(suspend) {};
FIXTURE_VARIANT(suspend) {
	const char *state;	/* written to /sys/power/state */
	bool rtc;		/* woken by the RTC's alarm, else the power button */
};
FIXTURE_VARIANT_ADD(suspend, to_ram) { .state = "mem", .rtc = true };
FIXTURE_VARIANT_ADD(suspend, to_idle) { .state = "freeze", .rtc = false };
FIXTURE_SETUP(suspend) {}
FIXTURE_TEARDOWN(suspend) {}

/*
 * The ACPI power button, with its driver bound (modprobe button): an ACPI
 * driver until the button became a platform driver (7.2 and 7.3 here).
 */
#define POWER_BUTTON "/sys/bus/acpi/drivers/button/LNXPWRBN:00"
#define POWER_BUTTON_PLATFORM "/sys/bus/platform/drivers/acpi-button/LNXPWRBN:00"

static bool can_suspend(struct __test_metadata *_metadata,
			const FIXTURE_VARIANT(suspend) *v)
{
	if (geteuid() != 0)
		SKIP(return false, "not root: cannot suspend");
	if (!offers("/sys/power/state", v->state))
		SKIP(return false, "/sys/power/state offers no '%s'", v->state);
	if (v->rtc && access("/sys/class/rtc/rtc0/wakealarm", W_OK))
		SKIP(return false, "no RTC alarm to wake up with");
	if (v->rtc && !offers("/sys/power/mem_sleep", "deep"))
		SKIP(return false, "no suspend to RAM (mem_sleep has no 'deep')");
	if (!v->rtc && access(POWER_BUTTON, F_OK) && access(POWER_BUTTON_PLATFORM, F_OK))
		SKIP(return false, "no ACPI power button (%s or %s) to wake up with",
		     POWER_BUTTON, POWER_BUTTON_PLATFORM);
	return true;
}

/*
 * To RAM: the RTC wakes us 2-3 s after the write (it counts whole
 * seconds), of which getting to sleep takes up to a second under TCG: at
 * least half a second asleep.
 */
static int suspend_to_ram(const char **step)
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

/*
 * To idle: the harness presses the power button 3 s after we ask, of which
 * getting to sleep takes up to a second under TCG.  A press that comes
 * before the guest sleeps is a wake-up event that aborts the suspend
 * (EBUSY): then ask again, up to three times.
 */
static int suspend_to_idle(const char **step)
{
	int err = -EBUSY;

	*step = "/sys/power/state";
	for (int i = 0; i < 3 && err == -EBUSY; i++) {
		printf("vmrun: press the power button in 3 s\n");
		fflush(stdout);
		err = put("/sys/power/state", "freeze");
	}
	return err;
}

static int suspend(const FIXTURE_VARIANT(suspend) *v, const char **step)
{
	return v->rtc ? suspend_to_ram(step) : suspend_to_idle(step);
}

/* The kernel's count of suspends that succeeded; -1 if it has none. */
static long suspends(void)
{
	char buf[32] = "";
	int fd = open("/sys/power/suspend_stats/success", O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? strtol(buf, NULL, 10) : -1;
}

/*
 * Did the kernel suspend its timekeeping?  It always does for S3.  For
 * s2idle it does only where the last CPU to idle enters a cpuidle state
 * that can freeze the tick; where none can (a guest with no cpuidle
 * driver, as here), its clocks run on through it and nothing of them is
 * missed.  What the TSC counted and CLOCK_MONOTONIC did not tells, from
 * outside the library's own test of BOOTTIME against MONOTONIC.
 */
#define MISSED_NS	100000000	/* far above a preempted read */

TEST_F(suspend, check_sees_it)
{
	TSC_OPTS(o, .calibrate_max_ms = 100);
	TSC_CLOCK(before);
	TSC_CLOCK(after);
	uint64_t tsc0, tsc1, mono0, mono1;
	const char *step;
	int64_t missed;
	long n;
	int err;

	if (!can_suspend(_metadata, variant))
		return;
	ASSERT_EQ(0, tsc_clock_init(&before, &o)) TH_LOG("%s", tsc_last_error());
	TH_LOG("clock from %s: %s", tsc_source_name(before.freq.source), before.freq.detail);
	ASSERT_EQ(0, tsc_clock_check(&before)) TH_LOG("%s", tsc_last_error());
	n = suspends();
	tsc0 = tsc_clock_now(&before);
	mono0 = sysclock_sys(SYSCLOCK_MONO);
	err = suspend(variant, &step);
	ASSERT_EQ(0, err) TH_LOG("%s: %s", step, strerror(-err));
	tsc1 = tsc_clock_now(&before);
	mono1 = sysclock_sys(SYSCLOCK_MONO);
	missed = (int64_t)(tsc1 - tsc0) - (int64_t)(mono1 - mono0);
	if (n >= 0)
		EXPECT_EQ(n + 1, suspends());

	err = tsc_clock_check(&before);
	TH_LOG("after %.3f s in the suspend, by the TSC (%.3f s of it missed by CLOCK_MONOTONIC): %d, %s",
	       (double)(tsc1 - tsc0) / 1e9, (double)missed / 1e9, err, tsc_last_error());
	if (variant->rtc || llabs(missed) > MISSED_NS) {
		EXPECT_TRUE(err == -ESTALE || err == -ERANGE);
		EXPECT_TRUE(strstr(tsc_last_error(), "suspended for") ||
			    strstr(tsc_last_error(), "before the clock's anchor"));
	} else {
		/* The kernel's clocks ran on, and so is the anchored clock right. */
		EXPECT_EQ(0, err);
		EXPECT_LE(1000000000, (int64_t)(mono1 - mono0));
	}
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
 * The module's page across a suspend: every clock_gettime() of
 * REALTIME, MONOTONIC and BOOTTIME lies between library reads around it,
 * in a thread from before the suspend to a second after it, and in this
 * one for a bracket certain to span the suspend; BOOTTIME gained the time
 * asleep that MONOTONIC did not; the page's generation changed.
 */
TEST_F(suspend, exact_across_it)
{
	TSC_SYSCLOCK(s);
	TSC_BOUND_TERMS(t0);
	TSC_BOUND_TERMS(t1);
	struct sampler sm = { .s = &s };
	unsigned long long steps, resumes;
	uint64_t asleep0, before[3], after[3], now[3];
	int64_t asleep;
	const char *step;
	uint32_t gen;
	pthread_t t;
	long n;
	int err;

	if (!can_suspend(_metadata, variant))
		return;
	if (access("/sys/devices/system/cpu/tsc/clock_page", R_OK))
		SKIP(return, "no clock_page: the module is not loaded");
	ASSERT_EQ(0, tsc_sysclock_init(&s, NULL)) TH_LOG("%s", tsc_last_error());
	if (s.path != TSC_SYSCLOCK_KERNEL)
		SKIP(return, "%s", s.why);
	gen = s.page->generation;
	steps = module_count("clock_steps");
	resumes = module_count("clock_resumes");
	ASSERT_NE(~0ull, resumes) TH_LOG("no tsc/clock_resumes");
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&s, &t0));
	asleep0 = asleep_since_boot();
	n = suspends();
	ASSERT_EQ(0, pthread_create(&t, NULL, sample, &sm));
	usleep(500000);
	for (int c = 0; c < 3; c++)
		before[c] = sysclock_lib(&s, c);
	err = suspend(variant, &step);
	for (int c = 0; c < 3; c++) {
		now[c] = sysclock_sys(c);
		after[c] = sysclock_lib(&s, c);
	}
	sleep(1);
	atomic_store(&sm.stop, true);
	pthread_join(t, NULL);
	ASSERT_EQ(0, err) TH_LOG("%s: %s", step, strerror(-err));
	ASSERT_EQ(0, tsc_sysclock_bound_terms(&s, &t1));
	/* Two clock_gettime() calls: a few ns either way if none. */
	asleep = (int64_t)(asleep_since_boot() - asleep0);

	TH_LOG("%lu samples per clock; asleep %.3f s; generation %u -> %u",
	       sm.samples, (double)asleep / 1e9, gen, s.page->generation);
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
	if (n >= 0)
		EXPECT_EQ(n + 1, suspends());
	EXPECT_LE(asleep, (int64_t)(after[SYSCLOCK_BOOT] - before[SYSCLOCK_BOOT]));
	if (variant->rtc || llabs(asleep) > MISSED_NS) {
		/*
		 * The timekeeper was suspended and resumed: the page followed;
		 * the module and the library each counted one resume, and
		 * no step (REALTIME and BOOTTIME both counted the time asleep).
		 */
		EXPECT_LE(500000000, asleep);
		EXPECT_NE(gen, s.page->generation);
		EXPECT_EQ(resumes + 1, module_count("clock_resumes"));
		EXPECT_EQ(steps, module_count("clock_steps"));
		EXPECT_EQ(t0.by_cause[TSC_DISRUPTION_RESUME] + 1, t1.by_cause[TSC_DISRUPTION_RESUME]);
		EXPECT_EQ(t0.by_cause[TSC_DISRUPTION_STEP], t1.by_cause[TSC_DISRUPTION_STEP]);
		EXPECT_TRUE(t1.flags & TSC_BOUND_DISRUPTED);
	} else {
		/* It ran on through an s2idle without a tick to freeze. */
		TH_LOG("the kernel kept its clocks running through the suspend to idle");
		EXPECT_LE(1000000000ull, after[SYSCLOCK_MONO] - before[SYSCLOCK_MONO]);
		EXPECT_EQ(resumes, module_count("clock_resumes"));
		EXPECT_EQ(t0.by_cause[TSC_DISRUPTION_RESUME], t1.by_cause[TSC_DISRUPTION_RESUME]);
	}
	/* Still the TSC: the flags change only with the clocksource. */
	EXPECT_EQ(TSC_TIMEPAGE_TSC, s.page->flags);
	tsc_sysclock_fini(&s);
}

struct ahead {
	const struct tsc_sysclock *s;
	sem_t go;
	atomic_bool stop;
	unsigned long samples, back;	/* back: readings below the one before */
	int64_t most;		/* the furthest a reading was ahead of clock_gettime() after it */
};

/*
 * Once told to go, the disciplined MONOTONIC, then clock_gettime()'s,
 * until told to stop.
 */
static void *sample_ahead(void *arg)
{
	struct ahead *a = arg;
	int64_t last = 0;

	while (sem_wait(&a->go))
		;
	while (!atomic_load(&a->stop)) {
		int64_t v = (int64_t)tsc_sysclock_monotonic(a->s);
		int64_t b = (int64_t)sysclock_sys(SYSCLOCK_MONO);

		if (v - b > a->most)
			a->most = v - b;
		if (v < last)
			a->back++;
		last = v;
		a->samples++;
	}
	return NULL;
}

/*
 * A disciplined clock with its helper, across a suspend: its MONOTONIC
 * never goes back, and is never ahead of clock_gettime()'s by more than
 * the helper's lease (1.25 s).  The TSC counts through the suspend here
 * and MONOTONIC does not: a reader that took the page after it would read
 * ahead by the time asleep (2.4 s here, without the lease).  With the
 * lease, readers past it are held at the page's value at its end, and the
 * helper's sync, which the resume wakes at once, holds the clock still
 * there until the system's catches up: ahead by what was left of the
 * lease when the system went to sleep, which the freeze may leave at up
 * to 1.25 s.  The clock is disciplined by pointing it at a sysfs
 * without the module's page.
 *
 * The reader must run after the thaw before the helper does, which on
 * this guest's one CPU takes a reader thawed first (the freezer thaws
 * threads in the order they were made: this one is made before the
 * clock's helper) that is SCHED_FIFO, as the library's users often are,
 * so that nothing runs beside it but in the scheduler's 5% for the rest.
 */
#define DISCIPLINED_HOLD_NS	1261000000	/* the lease, and the clock's own error */
/* A sysfs root with no page (made on the guest's tmpfs), each directory in turn. */
#define NO_PAGE_ROOT	"/tmp/suspend-no-page\0/tmp/suspend-no-page/devices\0" \
			"/tmp/suspend-no-page/devices/system\0" \
			"/tmp/suspend-no-page/devices/system/cpu\0"

TEST_F(suspend, disciplined_never_back)
{
	TSC_SYSCLOCK_OPTS(o, .sysfs_root = "/tmp/suspend-no-page",
			  .discipline = TSC_DISCIPLINE_HELPER);
	TSC_SYSCLOCK(s);
	struct ahead a = { .s = &s };
	uint64_t asleep0, mono0;
	struct sched_param fifo = { .sched_priority = 1 };
	const char *step, *dir;
	pthread_attr_t attr;
	pthread_t t;
	int err;

	if (!can_suspend(_metadata, variant))
		return;
	for (dir = NO_PAGE_ROOT; *dir; dir += strlen(dir) + 1) {
		ASSERT_TRUE(!mkdir(dir, 0755) || errno == EEXIST)
			TH_LOG("%s: %s", dir, strerror(errno));
	}
	ASSERT_EQ(0, sem_init(&a.go, 0, 0));
	ASSERT_EQ(0, pthread_attr_init(&attr));
	ASSERT_EQ(0, pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED));
	ASSERT_EQ(0, pthread_attr_setschedpolicy(&attr, SCHED_FIFO));
	ASSERT_EQ(0, pthread_attr_setschedparam(&attr, &fifo));
	ASSERT_EQ(0, pthread_create(&t, &attr, sample_ahead, &a));
	pthread_attr_destroy(&attr);
	ASSERT_EQ(0, tsc_sysclock_init(&s, &o)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_DISCIPLINED, s.path) TH_LOG("%s", s.why);
	/* Two seconds of syncs to converge on the system's clocks. */
	sleep(2);
	asleep0 = asleep_since_boot();
	mono0 = sysclock_sys(SYSCLOCK_MONO);
	ASSERT_EQ(0, sem_post(&a.go));
	usleep(500000);
	err = suspend(variant, &step);
	sleep(1);
	atomic_store(&a.stop, true);
	pthread_join(t, NULL);
	sem_destroy(&a.go);
	ASSERT_EQ(0, err) TH_LOG("%s: %s", step, strerror(-err));
	TH_LOG("%lu samples over %.3f s, %.3f s asleep by BOOTTIME: %lu back, the furthest ahead %lld ns",
	       a.samples, (double)(sysclock_sys(SYSCLOCK_MONO) - mono0) / 1e9,
	       (double)(int64_t)(asleep_since_boot() - asleep0) / 1e9, a.back, (long long)a.most);
	EXPECT_LE(1000, a.samples);
	EXPECT_EQ(0, a.back);
	EXPECT_GT(DISCIPLINED_HOLD_NS, a.most);
	tsc_sysclock_fini(&s);
}

TEST_HARNESS_MAIN
