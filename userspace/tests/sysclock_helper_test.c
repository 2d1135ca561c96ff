// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Where a disciplined clock's helper thread runs: under SCHED_OTHER on the
 * housekeeping CPUs of the (fake) sysfs root, whatever the thread that
 * initialised the clock is (here pinned to the last CPU, and SCHED_FIFO
 * where the test may make it so); with helper_inherit, on that thread's
 * CPUs and policy; with no housekeeping CPU, on the caller's, and said.
 * And the CPU lists the placement is read from.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fake_sysfs.h"
#include "internal.h"

/* Write a file under the fake root's devices/system/cpu. */
static void put(struct __test_metadata *_metadata, const char *dir, const char *name,
		const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/devices/system/cpu/%s", dir, name);
	f = fopen(path, "w");
	ASSERT_NE(NULL, f);
	fputs(text, f);
	ASSERT_EQ(0, fclose(f));
}

FIXTURE(helper) {
	char dir[64];
	int first, last;	/* this process's lowest and highest CPUs */
	char online[64], last_only[16];
};

FIXTURE_SETUP(helper)
{
	cpu_set_t set;

	ASSERT_EQ(0, sched_getaffinity(0, sizeof(set), &set));
	self->first = self->last = -1;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &set)) {
			if (self->first < 0)
				self->first = cpu;
			self->last = cpu;
		}
	if (self->first == self->last)
		SKIP(return, "one CPU to run on: no other CPU for the helper");
	fake_root(_metadata, self->dir, sizeof(self->dir), 0);
	snprintf(self->online, sizeof(self->online), "%d-%d\n", self->first, self->last);
	snprintf(self->last_only, sizeof(self->last_only), "%d\n", self->last);
	put(_metadata, self->dir, "online", self->online);
}

FIXTURE_TEARDOWN(helper)
{
	remove_root(self->dir);
}

struct start {
	struct tsc_sysclock c;
	const char *dir;
	cpu_set_t cpus;		/* the helper's */
	int cpu;
	int policy;		/* asked of the initialising thread */
	int err;
	int helper_policy;
	char name[16];		/* the helper's, once it named itself */
	int name_err;
	bool inherit;
};

/* On its own thread: pinned to s->cpu, SCHED_FIFO if asked, init the clock. */
static void *start(void *arg)
{
	struct start *s = arg;
	TSC_SYSCLOCK_OPTS(o, .sysfs_root = s->dir, .discipline = TSC_DISCIPLINE_HELPER,
			  .helper_inherit = s->inherit);
	struct sched_param sp = { .sched_priority = 10 };
	pthread_t h;
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(s->cpu, &one);
	s->err = pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
	if (!s->err && s->policy == SCHED_FIFO)
		s->err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (s->err)
		return NULL;
	s->c.sz = sizeof(s->c);
	s->err = tsc_sysclock_init(&s->c, &o);
	if (!s->err)
		s->err = tsc__discipline_helper(&s->c, &h);
	if (!s->err)
		s->err = pthread_getaffinity_np(h, sizeof(s->cpus), &s->cpus);
	if (!s->err)
		s->err = pthread_getschedparam(h, &s->helper_policy, &sp);
	/* It names itself first thing: up to a second for it to run. */
	for (int i = 0; !s->err && i < 1000; i++) {
		s->name_err = pthread_getname_np(h, s->name, sizeof(s->name));
		if (s->name_err || !strcmp(s->name, TSC__HELPER_NAME))
			break;
		usleep(1000);
	}
	return NULL;
}

static void run(struct __test_metadata *_metadata, struct start *s)
{
	pthread_t t;

	ASSERT_EQ(0, pthread_create(&t, NULL, start, s));
	ASSERT_EQ(0, pthread_join(t, NULL));
	if (s->err == EPERM && s->policy == SCHED_FIFO) {
		/* Unprivileged: the pinned caller alone still says where it goes. */
		TH_LOG("SCHED_FIFO not allowed here: the caller is SCHED_OTHER");
		s->policy = SCHED_OTHER;
		ASSERT_EQ(0, pthread_create(&t, NULL, start, s));
		ASSERT_EQ(0, pthread_join(t, NULL));
	}
	ASSERT_EQ(0, s->err) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_DISCIPLINED, s->c.path) TH_LOG("%s", s->c.why);
	TH_LOG("%s", s->c.why);
}

/* cpu 'last' isolated and the caller there, SCHED_FIFO: the helper is not. */
TEST_F(helper, stays_off_isolated_and_real_time)
{
	struct start s = { .dir = self->dir, .cpu = self->last, .policy = SCHED_FIFO };

	put(_metadata, self->dir, "isolated", self->last_only);
	run(_metadata, &s);
	EXPECT_FALSE(CPU_ISSET(self->last, &s.cpus));
	EXPECT_TRUE(CPU_ISSET(self->first, &s.cpus));
	EXPECT_EQ(SCHED_OTHER, s.helper_policy);
	EXPECT_NE(NULL, strstr(s.c.why, "SCHED_OTHER on housekeeping CPUs"));
	EXPECT_EQ(0, s.name_err) TH_LOG("pthread_getname_np: %s", strerror(s.name_err));
	EXPECT_STREQ("libtsc-sync", s.name);
	tsc_sysclock_fini(&s.c);
}

/* nohz_full counts as isolated too. */
TEST_F(helper, stays_off_nohz_full)
{
	struct start s = { .dir = self->dir, .cpu = self->last, .policy = SCHED_OTHER };

	put(_metadata, self->dir, "isolated", "\n");
	put(_metadata, self->dir, "nohz_full", self->last_only);
	run(_metadata, &s);
	EXPECT_FALSE(CPU_ISSET(self->last, &s.cpus));
	EXPECT_TRUE(CPU_ISSET(self->first, &s.cpus));
	tsc_sysclock_fini(&s.c);
}

/* nohz_full reading "(null)" (CPUMASK_OFFSTACK, none at boot): none, not a failure. */
TEST_F(helper, nohz_full_null_is_none)
{
	struct start s = { .dir = self->dir, .cpu = self->last, .policy = SCHED_OTHER };

	put(_metadata, self->dir, "isolated", self->last_only);
	put(_metadata, self->dir, "nohz_full", "(null)\n");
	run(_metadata, &s);
	EXPECT_FALSE(CPU_ISSET(self->last, &s.cpus));
	EXPECT_TRUE(CPU_ISSET(self->first, &s.cpus));
	EXPECT_NE(NULL, strstr(s.c.why, "SCHED_OTHER on housekeeping CPUs"));
	tsc_sysclock_fini(&s.c);
}

/* Asked to inherit: the caller's one CPU and its policy. */
TEST_F(helper, inherits_when_asked)
{
	struct start s = { .dir = self->dir, .cpu = self->last, .policy = SCHED_FIFO,
			   .inherit = true };

	put(_metadata, self->dir, "isolated", self->last_only);
	run(_metadata, &s);
	EXPECT_EQ(1, CPU_COUNT(&s.cpus));
	EXPECT_TRUE(CPU_ISSET(self->last, &s.cpus));
	EXPECT_EQ(s.policy, s.helper_policy);
	tsc_sysclock_fini(&s.c);
}

/* Every CPU isolated: a helper on the caller's CPUs beats none, and why says so. */
TEST_F(helper, no_housekeeping_cpu_is_said)
{
	struct start s = { .dir = self->dir, .cpu = self->last, .policy = SCHED_OTHER };

	put(_metadata, self->dir, "isolated", self->online);
	run(_metadata, &s);
	EXPECT_TRUE(CPU_ISSET(self->last, &s.cpus));
	EXPECT_NE(NULL, strstr(s.c.why, "no housekeeping CPUs: every online CPU is isolated"));
	tsc_sysclock_fini(&s.c);
}

TEST(cpulists)
{
	static const struct {
		const char *text;
		int err, count, max;
	} cases[] = {
		{ "0-3,5\n", 0, 5, 5 },
		{ "\n", 0, 0, -1 },
		{ "", 0, 0, -1 },
		{ "7", 0, 1, 7 },
		{ "2-2,4-5", 0, 3, 5 },
		{ "3-1", -EINVAL, 0, 0 },
		{ "1,", -EINVAL, 0, 0 },
		{ "1,,2", -EINVAL, 0, 0 },
		{ "-1", -EINVAL, 0, 0 },
		{ "a", -EINVAL, 0, 0 },
		{ "0-1024", -ERANGE, 0, 0 },
	};
	char out[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cpu_set_t set;
		int err = tsc__parse_cpulist(cases[i].text, strlen(cases[i].text), &set), max = -1;

		EXPECT_EQ(cases[i].err, err) TH_LOG("'%s'", cases[i].text);
		if (err)
			continue;
		EXPECT_EQ(cases[i].count, CPU_COUNT(&set)) TH_LOG("'%s'", cases[i].text);
		for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
			if (CPU_ISSET(cpu, &set))
				max = cpu;
		EXPECT_EQ(cases[i].max, max) TH_LOG("'%s'", cases[i].text);
	}
	{
		cpu_set_t set;

		ASSERT_EQ(0, tsc__parse_cpulist("0-3,5,7-8\n", 10, &set));
		tsc__format_cpulist(&set, out, sizeof(out));
		EXPECT_STREQ("0-3,5,7-8", out);
	}
}

TEST_HARNESS_MAIN
