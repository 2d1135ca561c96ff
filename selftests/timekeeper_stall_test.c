// SPDX-License-Identifier: GPL-2.0
/*
 * Nothing a user does with the module's files stretches the kernel's
 * timekeeping.  The clock page is written by a notifier that runs inside
 * the timekeeper's update, interrupts off, every clock reader in the
 * system spinning meanwhile; so read() of clock_page and of
 * timekeeper_freq_millihz, which any user may hammer, must never make it
 * wait.  Threads hammer those two files, one per CPU, and, as the control,
 * an ordinary file of the module's (tsc/constant_tsc) the same way, in
 * turns: each turn measures, with the function_graph tracer, how long
 * every notifier call (gtod_notify) and every timekeeper update
 * (update_wall_time) took, and, in a thread of its own, how long each
 * clock_gettime() took.  The turns with the page's readers must not be
 * slower than the control's, beyond the noise a control shows against
 * itself.  That sees a wait only where the host happens to preempt a
 * reader's vCPU, so a second test looks for the wait itself: no lock or
 * sleep is taken under the notifier while the readers hammer.  Needs the
 * module loaded, root, tracefs and two CPUs or more.
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>

#include "../testlib/harness.h"
#include "tscfk_test.h"

#define TRACEFS		"/sys/kernel/tracing"
#define TURN_SEC	4
#define TURNS		4	/* control, readers, control, readers */
#define MAX_SAMPLES	200000
#define MAX_THREADS	64

static const char *const page_files[] = {
	TSC_DIR "/clock_page", TSC_DIR "/timekeeper_freq_millihz",
};
static const char *const control_file = TSC_DIR "/constant_tsc";

struct hammer {
	pthread_t thread;
	const char *path;
	volatile bool *stop;
	unsigned long reads;
};

static void *hammer(void *arg)
{
	struct hammer *h = arg;
	char buf[4096];
	int fd = open(h->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	while (!*h->stop)
		if (pread(fd, buf, sizeof(buf), 0) > 0)
			h->reads++;
	close(fd);
	return NULL;
}

/* How long each clock_gettime() takes, in ns, sorted at the end. */
struct gettime {
	pthread_t thread;
	volatile bool *stop;
	double *ns;
	size_t n;
};

static void *gettime_loop(void *arg)
{
	struct gettime *g = arg;
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	while (!*g->stop) {
		clock_gettime(CLOCK_MONOTONIC, &b);
		/* One sample in 64, kept: the loop is the load, not the record. */
		if (g->n < MAX_SAMPLES && (b.tv_nsec & 63) == 0) {
			struct timespec c;

			clock_gettime(CLOCK_MONOTONIC, &c);
			g->ns[g->n++] = (double)(c.tv_sec - b.tv_sec) * 1e9 +
					(double)(c.tv_nsec - b.tv_nsec);
		}
		a = b;
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct stats {
	size_t n;
	double p50, p99, max;
};

static struct stats stats_of(double *v, size_t n)
{
	struct stats s = { .n = n };

	if (!n)
		return s;
	qsort(v, n, sizeof(*v), cmp_double);
	s.p50 = v[n / 2];
	s.p99 = v[(size_t)((double)(n - 1) * 0.99)];
	s.max = v[n - 1];
	return s;
}

/*
 * Truncating: that clears "trace", and replaces "set_ftrace_filter"
 * (which tracefs_add() adds to).
 */
static int tracefs_open_write(const char *file, const char *val, int mode)
{
	char path[256];
	int fd, ret = 0;

	snprintf(path, sizeof(path), TRACEFS "/%s", file);
	fd = open(path, O_WRONLY | mode | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (*val && write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		ret = -1;
	close(fd);
	return ret;
}

static int tracefs_write(const char *file, const char *val)
{
	return tracefs_open_write(file, val, O_TRUNC);
}

static int tracefs_add(const char *file, const char *val)
{
	return tracefs_open_write(file, val, O_APPEND);
}

/* Is 'name' among the kernel's tracers? */
static bool tracer_available(const char *name)
{
	char line[1024], *tok, *save = NULL;
	FILE *f = fopen(TRACEFS "/available_tracers", "r");
	bool found = false;

	if (!f)
		return false;
	if (fgets(line, sizeof(line), f))
		for (tok = strtok_r(line, " \n", &save); tok && !found;
		     tok = strtok_r(NULL, " \n", &save))
			found = !strcmp(tok, name);
	fclose(f);
	return found;
}

/*
 * The durations, in us, of the notifier's calls and of the timekeeper's
 * updates, from the function_graph trace: a leaf line "1.234 us | ...
 * gtod_notify [tsc_freq_khz]();", and a closing one "12.3 us | }
 * update_wall_time" (funcgraph-tail); markers such as '+' may precede.
 */
static void parse_trace(double *notify, size_t *nn, double *update, size_t *nu)
{
	FILE *f = fopen(TRACEFS "/trace", "r");
	char line[512];

	*nn = *nu = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *us = strstr(line, " us "), *bar = strchr(line, '|'), *p;
		double d;

		if (!us || !bar || us > bar)
			continue;
		for (p = us; p > line && (p[-1] == '.' || (p[-1] >= '0' && p[-1] <= '9')); p--)
			;
		d = strtod(p, NULL);
		if (strstr(bar, "gtod_notify") && *nn < MAX_SAMPLES)
			notify[(*nn)++] = d;
		else if (strstr(bar, "} /* update_wall_time */") && *nu < MAX_SAMPLES)
			update[(*nu)++] = d;
	}
	fclose(f);
}

struct turn {
	const char *name;
	struct stats notify, update, gettime;
	unsigned long reads;
};

/* One hammer per online CPU, up to MAX_THREADS. */
static int nr_hammers(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > MAX_THREADS ? MAX_THREADS : (int)n;
}

/* One hammer per CPU on the page's files, or on the control's. */
static int start_hammers(struct hammer *h, int nthreads, bool page, volatile bool *stop)
{
	for (int i = 0; i < nthreads; i++) {
		h[i] = (struct hammer){
			.path = page ? page_files[i % 2] : control_file,
			.stop = stop,
		};
		if (pthread_create(&h[i].thread, NULL, hammer, &h[i])) {
			*stop = true;
			while (i--)
				pthread_join(h[i].thread, NULL);
			return -1;
		}
	}
	return 0;
}

static unsigned long stop_hammers(struct hammer *h, int nthreads, volatile bool *stop)
{
	unsigned long reads = 0;

	*stop = true;
	for (int i = 0; i < nthreads; i++) {
		pthread_join(h[i].thread, NULL);
		reads += h[i].reads;
	}
	return reads;
}

static void run_turn(struct __test_metadata *_metadata, struct turn *t, bool page,
		     int nthreads, double *buf[3])
{
	struct hammer h[MAX_THREADS];
	struct gettime g = { .ns = buf[2] };
	volatile bool stop = false;
	size_t nn, nu;

	g.stop = &stop;
	ASSERT_EQ(0, tracefs_write("trace", ""));
	ASSERT_EQ(0, tracefs_write("tracing_on", "1"));
	ASSERT_EQ(0, start_hammers(h, nthreads, page, &stop));
	ASSERT_EQ(0, pthread_create(&g.thread, NULL, gettime_loop, &g));
	sleep(TURN_SEC);
	t->reads = stop_hammers(h, nthreads, &stop);
	pthread_join(g.thread, NULL);
	ASSERT_EQ(0, tracefs_write("tracing_on", "0"));
	parse_trace(buf[0], &nn, buf[1], &nu);
	t->name = page ? "page readers" : "control";
	t->notify = stats_of(buf[0], nn);
	t->update = stats_of(buf[1], nu);
	t->gettime = stats_of(buf[2], g.n);
	TH_LOG("%-12s  %8lu reads; gtod_notify n %zu p50 %.2f p99 %.2f max %.1f us; update_wall_time n %zu p50 %.2f p99 %.2f max %.1f us; clock_gettime n %zu p50 %.0f p99 %.0f max %.0f ns",
	       t->name, t->reads, t->notify.n, t->notify.p50, t->notify.p99, t->notify.max,
	       t->update.n, t->update.p50, t->update.p99, t->update.max,
	       t->gettime.n, t->gettime.p50, t->gettime.p99, t->gettime.max);
}

FIXTURE(stall) {
	double *buf[3];
	bool traced;
};

FIXTURE_SETUP(stall)
{
	REQUIRE_MODULE();
	if (geteuid() != 0)
		SKIP(return, "not root: tracefs is root's");
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "one CPU: no reader can run beside the timekeeper's update");
	if (access(TRACEFS "/trace", F_OK))
		mount("tracefs", TRACEFS, "tracefs", 0, NULL);
	if (access(TRACEFS "/trace", F_OK))
		SKIP(return, "no tracefs: the kernel has no ftrace");
	if (!tracer_available("function_graph"))
		SKIP(return, "no function_graph tracer in this kernel");
	self->traced = true;
	/*
	 * Only these two, each timed; the notifier is the module's.  The
	 * filter before the tracer, tracing off: function_graph with no
	 * filter traces every function of the kernel, which on 7.3 under
	 * emulation overflowed an IRQ stack (in native_sched_clock(), the
	 * tracer's clock) or slowed the guest until the clocksource watchdog
	 * found the TSC unstable, and the guest died.  The tracer's own
	 * options exist once it is the current one.
	 */
	ASSERT_EQ(0, tracefs_write("tracing_on", "0"));
	ASSERT_EQ(0, tracefs_write("set_ftrace_filter", "update_wall_time"))
		TH_LOG("the timekeeper's update cannot be traced");
	ASSERT_EQ(0, tracefs_add("set_ftrace_filter", "gtod_notify"))
		TH_LOG("the module's notifier cannot be traced");
	ASSERT_EQ(0, tracefs_write("current_tracer", "function_graph"));
	ASSERT_EQ(0, tracefs_write("trace_options", "funcgraph-tail"));
	ASSERT_EQ(0, tracefs_write("buffer_size_kb", "8192"));
	for (int i = 0; i < 3; i++) {
		self->buf[i] = calloc(MAX_SAMPLES, sizeof(double));
		ASSERT_NE(NULL, self->buf[i]);
	}
}

FIXTURE_TEARDOWN(stall)
{
	if (self->traced) {
		tracefs_write("tracing_on", "0");
		tracefs_write("current_tracer", "nop");
		tracefs_write("set_ftrace_filter", "");
		tracefs_write("set_graph_function", "");
		tracefs_write("trace", "");
		tracefs_write("tracing_on", "1");
	}
	for (int i = 0; i < 3; i++)
		free(self->buf[i]);
}

/*
 * The assertion is on the notifier's 99th percentile, the tail where a
 * wait for readers showed (a lock shared with them, before: 2.1 ms with
 * readers against 19-48 us without, in a 4-vCPU guest on 2 host CPUs).
 * Each turn's slowest calls are the host's: it preempts a vCPU inside an
 * update for milliseconds, with or without readers (the longest update
 * and clock_gettime() reached 4-12 ms in control turns), so the maxima,
 * and update_wall_time's tail, which that noise swamps, are logged, not
 * compared.  The better of the readers' turns must be within three times
 * the worse of the controls', and 20 us.
 *
 * A limit that high is blind: a busy host once gave control turns a p99
 * of 3.3 ms, and a limit of 10 ms, past the stall this is for.  Such a
 * round judges nothing, unless the readers' turn is within the stricter
 * limit that the better control turn gives (three times it, and 20 us),
 * which passes under the lenient one too: a busy host once gave a round
 * control turns of 37 us and 3.3 ms, and 24.5 us with the readers.
 * Otherwise another round is run; after ROUNDS blind ones, the test is a
 * skip with the figures, never a pass.
 */
#define ROUNDS		8
#define BLIND_US	2000	/* a limit at which the 2.1 ms stall passes */

static double limit_us(double control_p99)
{
	return 3 * control_p99 + 20;
}

/* Does this round judge: a lenient limit short of the stall, or a pass by the strict one? */
static bool round_judges(double page, double control_best, double control_worst)
{
	return limit_us(control_worst) < BLIND_US ||
	       (limit_us(control_best) < BLIND_US && page <= limit_us(control_best));
}

TEST_F_TIMEOUT(stall, page_readers_do_not_slow_the_timekeeper, 300)
{
	int nthreads = nr_hammers();
	double best = INFINITY, worst = 0, page = INFINITY;
	struct turn t[TURNS];

	for (int round = 1; round <= ROUNDS; round++) {
		best = INFINITY;
		worst = 0;
		page = INFINITY;
		for (int i = 0; i < TURNS; i++) {
			run_turn(_metadata, &t[i], i % 2, nthreads, self->buf);
			ASSERT_LT(10, t[i].notify.n) TH_LOG("the notifier's calls were not traced");
			ASSERT_LT(10, t[i].update.n) TH_LOG("the timekeeper's updates were not traced");
			if (i % 2) {
				page = fmin(page, t[i].notify.p99);
			} else {
				best = fmin(best, t[i].notify.p99);
				worst = fmax(worst, t[i].notify.p99);
			}
		}
		TH_LOG("round %d: gtod_notify p99: %.2f us with the page's readers, %.2f and %.2f us with the control's (limits %.2f and %.2f us)",
		       round, page, best, worst, limit_us(best), limit_us(worst));
		if (round_judges(page, best, worst))
			break;
	}
	if (!round_judges(page, best, worst))
		SKIP(return, "%d rounds whose controls' own p99 (the last %.0f us) puts the limit past %d us: the host preempted vCPUs for as long as the stall this test is for",
		     ROUNDS, worst, BLIND_US);
	EXPECT_GE(limit_us(worst), page);
}

/*
 * The same promise, seen whatever the host does: what the notifier calls
 * while the page's readers hammer it.  The latency test above sees a wait
 * only where the host deschedules a vCPU inside a reader's critical
 * section: the old module's lock, shared with readers, gave 1.7-2.3 ms on
 * one host and 19 us on another.  Here the lock itself is seen.  The
 * function_graph tracer records, under gtod_notify only, the kernel's
 * entry points for taking a lock, sleeping, rescheduling, or waiting for
 * another CPU; none may appear.  Patterns this kernel lacks (rt_* on a
 * kernel without PREEMPT_RT) are left out; the spinlock's must be there.
 */
static const char *const wait_patterns[] = {
	"_raw_spin_lock*", "_raw_read_lock*", "_raw_write_lock*",
	"*queued_spin_lock_slowpath", "queued_read_lock_slowpath",
	"queued_write_lock_slowpath", "rt_spin_lock*", "rt_read_lock",
	"rt_write_lock", "rt_mutex_lock*", "mutex_lock*", "down", "down_*",
	"percpu_down_*", "__cond_resched", "__might_sleep", "__might_resched",
	"schedule", "schedule_timeout*", "msleep*", "usleep_range*",
	"wait_for_completion*", "synchronize_rcu*", "smp_call_function*",
	"stop_machine*",
};

/*
 * A pattern of set_ftrace_filter's, added, or -1 if it matches nothing
 * here: with its newline, the kernel parses it within the write and says
 * so; without, only at close(), where the error is lost.
 */
static int filter_add(const char *pattern)
{
	char line[64];

	snprintf(line, sizeof(line), "%s\n", pattern);
	return tracefs_add("set_ftrace_filter", line);
}

/* 'name' into the list " a b ", once. */
static void seen_add(char *seen, size_t size, const char *name)
{
	char key[128];

	snprintf(key, sizeof(key), " %s ", name);
	if (strstr(seen, key) || strlen(seen) + strlen(key) >= size)
		return;
	strcat(seen, *seen ? key + 1 : key);
}

/*
 * The notifier's calls, counted, and what each called, into 'seen': the
 * lines between "gtod_notify [tsc_freq_khz]() {" and its closing brace,
 * on the same CPU ("2) ..." before the '|').  A call that called nothing
 * traced is a leaf, "gtod_notify [tsc_freq_khz]();".  What is traced
 * outside the notifier is not looked at: set_graph_function leaves a
 * stray lock call or two at the top level, around interrupts.
 */
static size_t callees_of_notifier(char *seen, size_t size)
{
	FILE *f = fopen(TRACEFS "/trace", "r");
	int depth[MAX_CPUS] = { 0 };	/* > 0: inside the notifier */
	char line[512];
	size_t calls = 0;

	*seen = '\0';
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '|'), *end;
		bool opens;
		int cpu;

		if (!p || sscanf(line, " %d)", &cpu) != 1 || cpu < 0 || cpu >= MAX_CPUS)
			continue;
		p += strspn(p, "| ");
		if (*p == '}') {
			if (depth[cpu] > 0)
				depth[cpu]--;
			continue;
		}
		end = p + strcspn(p, " (;");
		if (end == p || !strchr(end, '('))
			continue;	/* a comment: an event */
		opens = strchr(end, '{') != NULL;
		*end = '\0';
		if (!depth[cpu]) {
			if (!strcmp(p, "gtod_notify")) {
				calls++;
				depth[cpu] = opens;
			}
			continue;
		}
		depth[cpu] += opens;
		seen_add(seen, size, p);
	}
	fclose(f);
	return calls;
}

TEST_F_TIMEOUT(stall, the_notifier_takes_no_lock_and_waits_for_nothing, 60)
{
	int nthreads = nr_hammers();
	struct hammer h[MAX_THREADS];
	volatile bool stop = false;
	unsigned long reads;
	char seen[1024];
	size_t calls, patterns = 1;

	ASSERT_EQ(0, tracefs_write("current_tracer", "nop"));
	ASSERT_EQ(0, tracefs_write("set_ftrace_filter", "gtod_notify"));
	ASSERT_EQ(0, filter_add(wait_patterns[0]))
		TH_LOG("the spinlock's entry points cannot be traced");
	for (size_t i = 1; i < ARRAY_SIZE(wait_patterns); i++)
		patterns += !filter_add(wait_patterns[i]);
	ASSERT_EQ(0, tracefs_write("set_graph_function", "gtod_notify"));
	ASSERT_EQ(0, tracefs_write("current_tracer", "function_graph"));
	ASSERT_EQ(0, tracefs_write("trace", ""));
	ASSERT_EQ(0, tracefs_write("tracing_on", "1"));
	ASSERT_EQ(0, start_hammers(h, nthreads, true, &stop));
	sleep(TURN_SEC);
	reads = stop_hammers(h, nthreads, &stop);
	ASSERT_EQ(0, tracefs_write("tracing_on", "0"));
	calls = callees_of_notifier(seen, sizeof(seen));
	TH_LOG("%lu reads by %d threads; %zu notifier calls traced, %zu of %zu patterns of a wait in this kernel; called from the notifier:%s",
	       reads, nthreads, calls, patterns, ARRAY_SIZE(wait_patterns),
	       *seen ? seen : " nothing");
	ASSERT_LT(10, calls) TH_LOG("the notifier's calls were not traced");
	EXPECT_STREQ("", seen);
}

TEST_HARNESS_MAIN
