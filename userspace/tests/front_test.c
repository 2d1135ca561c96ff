// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The front door (tsc_realtime_ns() and kin), here without the module: a
 * sysfs root with no clock page ($TSC_SYSFS_ROOT), so the first read sets
 * up a clock its readers discipline.  It starts no thread, syncs only
 * when read, follows the system's clocks, never goes back across its
 * readers' syncs, reads in a signal handler with errno kept, and goes on
 * in a fork's child; asked, it is clock_gettime() or has a helper.  The
 * frequency and tick deltas come from the best source, here the fake
 * root's tsc_freq_khz.  The harness runs each test in a process of its
 * own, so each sets the front door up afresh.  (With the module, the
 * guests' sysclock_exact_test holds it to the kernel's clocks.)
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_sysfs.h"
#include "internal.h"

static int64_t now(clockid_t id)
{
	return tsc__ns_now(id);
}

/* This process's threads. */
static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

FIXTURE(front) {
	char dir[64];
};

FIXTURE_SETUP(front)
{
	fake_root(_metadata, self->dir, sizeof(self->dir), 0);
	ASSERT_EQ(0, setenv("TSC_SYSFS_ROOT", self->dir, 1));
}

FIXTURE_TEARDOWN(front)
{
	remove_root(self->dir);
}

/*
 * The largest distance, over n reads a ms apart, of each front door
 * clock from clock_gettime()'s around it (0 if within).
 */
static int64_t worst_error(int n)
{
	static const clockid_t ids[] = { CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME };
	int64_t worst = 0;

	for (int i = 0; i < n; i++) {
		for (int k = 0; k < 3; k++) {
			int64_t a = now(ids[k]);
			int64_t v = (int64_t)(k == 0 ? tsc_realtime_ns() : k == 1 ? tsc_monotonic_ns() :
					      tsc_boottime_ns());
			int64_t b = now(ids[k]);
			int64_t e = v < a ? a - v : v > b ? v - b : 0;

			if (e > worst)
				worst = e;
		}
		usleep(1000);
	}
	return worst;
}

/* Where the page the readers hold now starts: a sync moves it on. */
static uint64_t page_start(void)
{
	const volatile struct tsc_timepage *p = __atomic_load_n(&tsc__time.page, __ATOMIC_ACQUIRE);

	return p ? p->cycle_last : 0;
}

/*
 * Read, and the clock is set up: errno as it was (the set-up opens files
 * the fake root lacks), disciplined by its readers, no thread started,
 * within 100 us of the system's clocks over 2.8 s of reads, in which the
 * readers synced it twice at least.
 */
TEST_F(front, the_first_read_sets_a_clock_up_and_starts_no_thread)
{
	int before = threads(), syncs = 0;
	const char *why = NULL;
	uint64_t start;
	int64_t end;

	errno = EDOM;
	(void)tsc_monotonic_ns();
	EXPECT_EQ(EDOM, errno);
	EXPECT_EQ(TSC_SYSCLOCK_DISCIPLINED, tsc_time_path(&why));
	EXPECT_NE(NULL, strstr(why, "by its readers, no thread")) TH_LOG("%s", why);
	EXPECT_EQ(before, threads());
	start = page_start();
	end = now(CLOCK_MONOTONIC) + 2800000000;
	while (now(CLOCK_MONOTONIC) < end) {
		int64_t e = worst_error(10);

		EXPECT_GT(100000, e) TH_LOG("%lld ns off the system's", (long long)e);
		if (page_start() != start) {
			start = page_start();
			syncs++;
		}
	}
	TH_LOG("%d syncs in 2.8 s", syncs);
	EXPECT_LE(2, syncs);
	EXPECT_EQ(before, threads());
}

/*
 * Nobody reads: nobody syncs; a read past the bound syncs (or, where its
 * sample was too noisy, one of the reads of the next 100 ms).
 */
TEST_F(front, no_reader_no_sync)
{
	uint64_t start;
	int64_t end;

	(void)tsc_monotonic_ns();
	start = page_start();
	usleep(2500000);
	EXPECT_EQ(start, page_start());
	end = now(CLOCK_MONOTONIC) + 100000000;
	do
		(void)tsc_monotonic_ns();
	while (page_start() == start && now(CLOCK_MONOTONIC) < end);
	EXPECT_NE(start, page_start()) TH_LOG("reads past the bound did not sync");
	EXPECT_GT(100000, worst_error(10));
}

/* Asked for: clock_gettime() exactly, and why. */
TEST_F(front, exact_or_syscall)
{
	TSC_TIME_OPTS(o, .exact_or_syscall = true);
	const char *why;

	ASSERT_EQ(0, tsc_time_setup(&o)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(TSC_SYSCLOCK_SYSCALL, tsc_time_path(&why));
	EXPECT_NE(NULL, strstr(why, "module (1.1 or later) is not loaded")) TH_LOG("%s", why);
	EXPECT_EQ(0, worst_error(100));
}

/* Asked for: a helper thread, which is then the one thread more. */
TEST_F(front, a_helper_when_asked)
{
	TSC_TIME_OPTS(o, .helper = true);
	int before = threads();
	const char *why;

	ASSERT_EQ(0, tsc_time_setup(&o)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(TSC_SYSCLOCK_DISCIPLINED, tsc_time_path(&why));
	EXPECT_NE(NULL, strstr(why, "by a thread of the library's")) TH_LOG("%s", why);
	EXPECT_EQ(before + 1, threads());
	EXPECT_GT(100000, worst_error(100));
	/* Set up again, as by default: the helper goes. */
	ASSERT_EQ(0, tsc_time_setup(NULL)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(before, threads());
}

TEST_F(front, options)
{
	TSC_TIME_OPTS(both, .exact_or_syscall = true, .helper = true);
	struct {
		struct tsc_time_opts o;
		uint64_t newer;
	} n = { .o = { .sz = sizeof(n) }, .newer = 1 };	/* a field this library does not know */
	struct tsc_time_opts none = { .sz = 0 };

	EXPECT_EQ(-EINVAL, tsc_time_setup(&both));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "exact_or_syscall and helper"));
	EXPECT_EQ(-EINVAL, tsc_time_setup(&n.o));
	EXPECT_EQ(1u, n.newer);
	EXPECT_EQ(-EINVAL, tsc_time_setup(&none));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "TSC_TIME_OPTS()"));
	/* None of them set anything up: the first read does. */
	EXPECT_EQ(NULL, tsc__time.page);
	EXPECT_GT(100000, worst_error(1));
}

struct race {
	volatile bool stop;
	uint64_t latest;	/* the largest value any reader has returned */
	uint64_t back, reads;
};

static void *reader(void *arg)
{
	struct race *r = arg;
	uint64_t mine = 0, n = 0;

	for (; !r->stop; n++) {
		uint64_t seen = __atomic_load_n(&r->latest, __ATOMIC_ACQUIRE), v;

		v = tsc_monotonic_ns();
		if (v < seen || v < mine)
			__atomic_fetch_add(&r->back, 1, __ATOMIC_RELAXED);
		while (seen < v && !__atomic_compare_exchange_n(&r->latest, &seen, v, false,
								__ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
			;
		mine = v;
	}
	__atomic_fetch_add(&r->reads, n, __ATOMIC_RELAXED);
	return NULL;
}

/*
 * Three threads read for 3 s, each after seeing the latest any had; the
 * readers sync the clock among them: none sees it go back.
 */
TEST_F(front, never_back_across_its_readers_syncs)
{
	struct race r = { 0 };
	pthread_t t[3];
	uint64_t start = 0;
	int syncs = 0;
	int64_t end;

	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, reader, &r));
	end = now(CLOCK_MONOTONIC) + 3000000000;
	while (now(CLOCK_MONOTONIC) < end) {
		if (page_start() != start) {
			start = page_start();
			syncs++;
		}
		usleep(1000);
	}
	r.stop = true;
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	TH_LOG("%llu reads, %llu back, %d pages", (unsigned long long)r.reads,
	       (unsigned long long)r.back, syncs);
	EXPECT_EQ(0, r.back);
	EXPECT_LT(100000, r.reads);
	EXPECT_LE(3, syncs);
}

static struct {
	volatile sig_atomic_t reads, back, errno_lost;
	uint64_t last;
} handler_seen;

/* A signal handler reads, perhaps syncing: errno stays, MONOTONIC never goes back. */
static void on_alarm(int sig)
{
	uint64_t v;

	(void)sig;
	errno = EDOM;
	v = tsc_monotonic_ns();
	if (errno != EDOM)
		handler_seen.errno_lost++;
	if (v < handler_seen.last)
		handler_seen.back++;
	handler_seen.last = v;
	handler_seen.reads++;
}

/*
 * Only a signal handler reads, every millisecond for 2.8 s, so that its
 * reads make the syncs (in which a file of the sysfs root is opened, and
 * fails to here: ENOENT): errno stays as the handler left it, MONOTONIC
 * never goes back.
 */
TEST_F(front, reads_in_a_signal_handler)
{
	struct itimerval every_ms = { { 0, 1000 }, { 0, 1000 } }, off = { 0 };
	struct sigaction sa = { .sa_handler = on_alarm };
	uint64_t start;
	int syncs = 0;
	int64_t end;

	(void)tsc_monotonic_ns();	/* set up outside the handler */
	start = page_start();
	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	ASSERT_EQ(0, setitimer(ITIMER_REAL, &every_ms, NULL));
	end = now(CLOCK_MONOTONIC) + 2800000000;
	while (now(CLOCK_MONOTONIC) < end) {
		if (page_start() != start) {
			start = page_start();
			syncs++;
		}
	}
	ASSERT_EQ(0, setitimer(ITIMER_REAL, &off, NULL));
	TH_LOG("%d reads in the handler, %d syncs", (int)handler_seen.reads, syncs);
	EXPECT_LT(500, handler_seen.reads);
	EXPECT_EQ(0, handler_seen.back);
	EXPECT_EQ(0, handler_seen.errno_lost);
	EXPECT_LE(2, syncs);
}

/*
 * A fork's child: the clock its readers sync goes on there, synced by the
 * child's readers, and close to the child's clocks; one a helper syncs,
 * which the child has not, is clock_gettime() there.
 */
static void in_a_child(struct __test_metadata *_metadata, bool helper)
{
	TSC_TIME_OPTS(o, .helper = helper);
	int status;
	pid_t pid;

	ASSERT_EQ(0, tsc_time_setup(&o)) TH_LOG("%s", tsc_last_error());
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		uint64_t start = page_start();
		const char *why;
		int syncs = 0;

		if (helper) {
			/* No helper here: clock_gettime() itself, and why. */
			if (tsc_time_path(&why) != TSC_SYSCLOCK_SYSCALL || !strstr(why, "fork's child"))
				_exit(2);
			_exit(worst_error(100) ? 1 : 0);
		}
		for (int i = 0; i < 15; i++) {
			if (worst_error(100) > 100000)
				_exit(1);
			if (page_start() != start) {
				start = page_start();
				syncs++;
			}
		}
		_exit(tsc_time_path(NULL) != TSC_SYSCLOCK_DISCIPLINED ? 2 : syncs < 1 ? 3 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("the child: %s", !WIFEXITED(status) ? "killed" :
		       WEXITSTATUS(status) == 1 ? "off the system's clocks" :
		       WEXITSTATUS(status) == 2 ? "the wrong path" : "never synced");
}

TEST_F(front, goes_on_in_a_forked_child)
{
	in_a_child(_metadata, false);
}

/* With a helper, which the child has not: clock_gettime(), and tsc_time_path() says so. */
TEST_F(front, a_forked_childs_helper_clock_is_clock_gettime)
{
	in_a_child(_metadata, true);
}

static bool within(uint64_t got, uint64_t floor)
{
	return got == floor || got == floor + 1;
}

/*
 * The frequency from the best source, the fake root's tsc_freq_khz here,
 * rounded as the file has it; tick deltas at that rate, both ways.
 */
TEST_F(front, frequency_and_deltas)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu0/tsc_freq_khz", self->dir);
	f = fopen(path, "w");
	ASSERT_NE(NULL, f);
	fprintf(f, "2600002\n");
	ASSERT_EQ(0, fclose(f));
	EXPECT_EQ(2600002u, tsc_khz()) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(2600002000u, tsc_hz());
	/* Exact rounded down, or one more (tsc_conv_init(3)). */
	EXPECT_TRUE(within(tsc_delta_to_ns(2600002000u), 1000000000));
	EXPECT_TRUE(within(tsc_delta_to_ns(2600u), 999));	/* 999.99923 ns */
	EXPECT_TRUE(within(tsc_delta_to_ticks(1000000), 2600002));
	EXPECT_EQ(0u, tsc_delta_to_ns(0));
}

TEST_HARNESS_MAIN
