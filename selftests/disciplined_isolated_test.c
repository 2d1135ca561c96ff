// SPDX-License-Identifier: GPL-2.0
/*
 * A disciplined clock set up the way a low-latency program does it: from a
 * SCHED_FIFO thread pinned to an isolated CPU, which then busy-polls
 * there, never yielding.  The clock's helper must run elsewhere, under
 * SCHED_OTHER, and go on syncing while the poller owns that CPU: a helper
 * that inherited the caller's policy and CPU would never run again, and
 * the clock would extrapolate its last correction unsynced.
 *
 * The guest boots with an isolated CPU (make vm-isolation-K); the clock
 * is on a sysfs root without the module's page (testlib/no_page_root.h), so
 * that it is the disciplined one whether or not the module is loaded.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../testlib/harness.h"
#include "libtsc.h"
#include "../testlib/no_page_root.h"

/* How long the poller owns the CPU, and what the clock must keep to meanwhile. */
#define SPIN_S		6
#define MIN_SYNCS	3		/* of about one a second */
#define BOUND_NS	2000000		/* clock_accuracy's bound through a slew */

static struct tsc_sysclock clock_ __attribute__((aligned(64)));
static atomic_int phase;		/* 1: initialised (or failed), 2: stop spinning */
static int init_err, isolated_cpu;
static char init_why[512];

/* The caller: pinned to the isolated CPU, SCHED_FIFO, then polling. */
static void *caller(void *arg)
{
	const char *root = arg;
	TSC_SYSCLOCK_OPTS(o, .sysfs_root = root, .discipline = TSC_DISCIPLINE_HELPER);
	/*
	 * Real-time, above every SCHED_OTHER thread, but below PREEMPT_RT's
	 * interrupt threads (FIFO 50): an interrupt routed to cpu1 (the
	 * guest's 9p, its console) must still be served, as on a deployment
	 * whose poller does not own the interrupts too.
	 */
	struct sched_param sp = { .sched_priority = 1 };
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(isolated_cpu, &one);
	init_err = pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
	if (!init_err)
		init_err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (!init_err) {
		clock_.sz = sizeof(clock_);
		init_err = -tsc_sysclock_init(&clock_, &o);
		snprintf(init_why, sizeof(init_why), "%s", init_err ? tsc_last_error() : clock_.why);
	}
	atomic_store(&phase, 1);
	while (atomic_load_explicit(&phase, memory_order_relaxed) != 2)
		;
	return NULL;
}

static int64_t ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Add the kernel's CPU list in /sys/devices/system/cpu/NAME ("1", "1-3,5",
 * empty, or "(null)") to *set: 0, or -errno.
 */
static int add_cpu_list(const char *name, cpu_set_t *set)
{
	char path[128], list[256] = "", *p = list;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/%s", name);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	if (!fgets(list, sizeof(list), f))
		list[0] = '\0';
	fclose(f);
	while (*p >= '0' && *p <= '9') {
		long a = strtol(p, &p, 10), b = a;

		if (*p == '-')
			b = strtol(p + 1, &p, 10);
		for (long cpu = a; cpu <= b && cpu < CPU_SETSIZE; cpu++)
			CPU_SET(cpu, set);
		if (*p == ',')
			p++;
	}
	return 0;
}

/*
 * The clock's helper thread, by the name tsc_sysclock_sync(3) gives it:
 * its thread id, 0 if none, or -errno.  Up to a second for it (it is
 * named as it starts).
 */
static pid_t find_helper(void)
{
	for (int tries = 0; tries < 1000; tries++) {
		DIR *d = opendir("/proc/self/task");
		struct dirent *e;
		pid_t tid = 0;

		if (!d)
			return -errno;
		while (!tid && (e = readdir(d))) {
			char path[300], comm[32] = "";
			FILE *f;

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
			f = fopen(path, "re");
			if (f && fgets(comm, sizeof(comm), f) && !strcmp(comm, "libtsc-sync\n"))
				tid = atoi(e->d_name);
			if (f)
				fclose(f);
		}
		closedir(d);
		if (tid)
			return tid;
		usleep(1000);
	}
	return 0;
}

TEST(helper_syncs_while_the_caller_owns_an_isolated_cpu)
{
	char list[256] = "";
	cpu_set_t isolated, housekeeping, helper_cpus, both;
	const char *root;
	pthread_t t;
	pid_t helper;
	int policy, syncs = 0;
	int64_t worst = 0, end;
	uint32_t last_seq;
	const volatile struct tsc_timepage *last_page;
	/* isolcpus= and nohz_full=, whose CPUs the helper must keep off. */
	CPU_ZERO(&isolated);
	ASSERT_EQ(0, add_cpu_list("isolated", &isolated));
	if (!CPU_COUNT(&isolated))
		SKIP(return, "no isolated CPU: boot with isolcpus= (make vm-isolation-K)");
	for (isolated_cpu = 0; !CPU_ISSET(isolated_cpu, &isolated); isolated_cpu++)
		;
	ASSERT_EQ(0, add_cpu_list("nohz_full", &isolated));
	/* This thread reads on a housekeeping CPU, as a monitor would. */
	ASSERT_EQ(0, sched_getaffinity(0, sizeof(housekeeping), &housekeeping));
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &isolated))
			CPU_CLR(cpu, &housekeeping);
	ASSERT_LT(0, CPU_COUNT(&housekeeping));
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(housekeeping), &housekeeping));
	root = no_page_root();
	ASSERT_NE(NULL, root);

	ASSERT_EQ(0, pthread_create(&t, NULL, caller, (void *)root));
	while (!atomic_load(&phase))
		usleep(1000);
	TH_LOG("init on cpu%d under SCHED_FIFO: %s", isolated_cpu, init_why);
	if (init_err || clock_.path != TSC_SYSCLOCK_DISCIPLINED) {
		atomic_store(&phase, 2);
		pthread_join(t, NULL);
		ASSERT_EQ(0, init_err);
		if (strstr(init_why, "does not offer tsc"))
			SKIP(return, "no disciplined clock where the kernel withdrew tsc");
		ASSERT_EQ(TSC_SYSCLOCK_DISCIPLINED, clock_.path);
	}

	helper = find_helper();
	ASSERT_LT(0, helper) TH_LOG("no thread named libtsc-sync (%s)",
				    helper ? strerror(-helper) : "none found");
	ASSERT_EQ(0, sched_getaffinity(helper, sizeof(helper_cpus), &helper_cpus));
	policy = sched_getscheduler(helper);
	ASSERT_LE(0, policy) TH_LOG("sched_getscheduler: %s", strerror(errno));
	EXPECT_EQ(SCHED_OTHER, policy);
	CPU_AND(&both, &helper_cpus, &isolated);
	EXPECT_EQ(0, CPU_COUNT(&both)) TH_LOG("the helper may run on an isolated or nohz_full CPU");
	list[0] = '\0';
	for (int cpu = 0; cpu < CPU_SETSIZE && strlen(list) < sizeof(list) - 8; cpu++)
		if (CPU_ISSET(cpu, &helper_cpus))
			snprintf(list + strlen(list), sizeof(list) - strlen(list), " %d", cpu);
	TH_LOG("the helper, thread %d: policy %d, CPUs%s", (int)helper, policy, list);

	/* The caller polls; count the helper's publications meanwhile. */
	last_page = clock_.page;
	last_seq = last_page->seq;
	end = ns(CLOCK_MONOTONIC) + SPIN_S * 1000000000LL;
	while (ns(CLOCK_MONOTONIC) < end) {
		int64_t a = ns(CLOCK_MONOTONIC), v = (int64_t)tsc_sysclock_monotonic(&clock_);
		int64_t b = ns(CLOCK_MONOTONIC), e = v < a ? a - v : v > b ? v - b : 0;
		const volatile struct tsc_timepage *p = clock_.page;

		if (e > worst)
			worst = e;
		if (p != last_page || p->seq != last_seq) {
			syncs++;
			last_page = p;
			last_seq = p->seq;
		}
		usleep(10000);
	}
	atomic_store(&phase, 2);
	ASSERT_EQ(0, pthread_join(t, NULL));
	TH_LOG("%d s of a SCHED_FIFO poller on cpu%d: %d publications of the helper, worst error %lld ns (bound %d)",
	       SPIN_S, isolated_cpu, syncs, (long long)worst, BOUND_NS);
	EXPECT_LE(MIN_SYNCS, syncs);
	EXPECT_GE(BOUND_NS, worst);
	tsc_sysclock_fini(&clock_);
}

TEST_HARNESS_MAIN
