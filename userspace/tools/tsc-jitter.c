// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc-jitter: how much does this machine steal from a spinning thread,
 * where, and for how long?  One thread per selected CPU, pinned, reads the
 * TSC in a tight loop (lfence;rdtsc, so that reads are not reordered
 * around each other); every gap between two reads longer than the
 * threshold is an interruption.  The frequency comes from libtsc, to the
 * mHz, not rounded to MHz.
 *
 * Events go into chunks of memory prepared in advance; the main thread
 * keeps a spare chunk ready for every CPU, so the spinning threads never
 * allocate.  It sleeps until a spinner takes its spare (once per 65536
 * events), away from the CPUs measured when it can: a periodic wake-up
 * would be an interruption of our own making.  Should a spinner find no
 * spare, it counts what it drops, and the report says so.
 *
 * Exit status: 0 done, 2 usage, 3 failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "libtsc.h"

#define EXIT_FAIL	3
#define CHUNK		65536	/* events per chunk: 1 MiB */

static const char usage[] =
"Usage: tsc-jitter [--cores LIST] [--runtime SECONDS] [--threshold NS]\n"
"                  [--dump FILE] [--json] [--fifo PRIORITY]\n"
"Spin on each CPU of LIST and report every interruption longer than NS.\n"
"\n"
"  --cores LIST      CPUs such as 0,2-5 (default: all this process may use)\n"
"  --runtime SECONDS how long, 0.01 to 86400 (default 10)\n"
"  --threshold NS    shortest gap counted, 1 to 1000000000 ns (default 1000)\n"
"  --dump FILE       every interruption: cpu, start (CLOCK_MONOTONIC ns), ns\n"
"  --json            JSON, as tsc-jitter.schema.json describes\n"
"  --fifo PRIORITY   run the spinners SCHED_FIFO at 1 to 99 (needs privilege)\n"
"  -h, --help        this text;  -V, --version  the version\n";

struct event {
	uint64_t start, ticks;
};

struct chunk {
	struct chunk *next;
	uint32_t used;
	struct event ev[CHUNK];
};

struct spinner {
	pthread_t thread;
	int cpu;
	uint64_t threshold, end;	/* ticks */
	atomic_bool *go;
	sem_t *refill;			/* posted when the spare is taken */
	struct chunk *head, *cur;
	_Atomic(struct chunk *) spare;	/* refilled by the main thread */
	uint64_t gaps, dropped, loops;	/* gaps: reads over the threshold */
	bool started;
};

static struct chunk *new_chunk(void)
{
	struct chunk *c = malloc(sizeof(*c));

	if (c) {
		c->next = NULL;
		c->used = 0;
		/* Touch every page now, not in the middle of a measurement. */
		memset(c->ev, 0, sizeof(c->ev));
	}
	return c;
}

static void record(struct spinner *s, uint64_t start, uint64_t ticks)
{
	if (s->cur->used == CHUNK) {
		struct chunk *next = atomic_exchange(&s->spare, NULL);

		if (!next) {
			s->dropped++;
			return;
		}
		s->cur->next = next;
		s->cur = next;
		sem_post(s->refill);	/* once per CHUNK events */
	}
	s->cur->ev[s->cur->used++] = (struct event){ start, ticks };
}

static void *spin(void *arg)
{
	struct spinner *s = arg;
	uint64_t last;

	while (!atomic_load_explicit(s->go, memory_order_acquire))
		;
	last = tsc_rdtsc_ordered();
	for (;;) {
		uint64_t now = tsc_rdtsc_ordered();

		if (now - last > s->threshold) {
			s->gaps++;
			record(s, last, now - last);
		}
		last = now;
		s->loops++;
		if ((int64_t)(now - s->end) >= 0)
			break;
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

struct stats {
	uint64_t n, min, p50, p90, p99, p999, p9999, max, total;
	double mean;
	uint64_t *ns;		/* every duration, sorted */
};

/* Everything the run allocated, so that a leak checker sees none. */
static void free_run(struct spinner *sp, int n, struct stats *stats)
{
	for (int i = 0; sp && i < n; i++) {
		for (struct chunk *c = sp[i].head, *next; c; c = next) {
			next = c->next;
			free(c);
		}
		free(atomic_load(&sp[i].spare));
		if (stats)
			free(stats[i].ns);
	}
	free(stats);
	free(sp);
}

/* Nearest rank: the smallest value with at least q of them at or below. */
static uint64_t rank(const struct stats *st, double q)
{
	uint64_t i = (uint64_t)(q * (double)st->n + 0.999999);

	return st->n ? st->ns[(i ? i : 1) - 1] : 0;
}

static int compute(const struct spinner *s, const struct tsc_conv *conv, struct stats *st)
{
	uint64_t n = 0, k = 0;

	for (const struct chunk *c = s->head; c; c = c->next)
		n += c->used;
	*st = (struct stats){ .n = n };
	st->ns = malloc((n ? n : 1) * sizeof(*st->ns));
	if (!st->ns)
		return -1;
	for (const struct chunk *c = s->head; c; c = c->next)
		for (uint32_t i = 0; i < c->used; i++) {
			st->ns[k] = tsc_ticks_to_ns(conv, c->ev[i].ticks);
			st->total += st->ns[k++];
		}
	qsort(st->ns, n, sizeof(*st->ns), cmp_u64);
	if (n) {
		st->min = st->ns[0];
		st->max = st->ns[n - 1];
		st->mean = (double)st->total / (double)n;
	}
	st->p50 = rank(st, 0.5);
	st->p90 = rank(st, 0.9);
	st->p99 = rank(st, 0.99);
	st->p999 = rank(st, 0.999);
	st->p9999 = rank(st, 0.9999);
	return 0;
}

/* Powers of two from 1 us: what a person reads at a glance. */
static void histogram(const struct stats *st)
{
	uint64_t bucket[24] = { 0 }, most = 1;

	for (uint64_t i = 0; i < st->n; i++) {
		int b = 0;

		while (b < 23 && st->ns[i] >= (1000ull << (b + 1)))
			b++;
		bucket[b]++;
	}
	for (int b = 0; b < 24; b++)
		if (bucket[b] > most)
			most = bucket[b];
	for (int b = 0; b < 24; b++) {
		char bar[51];
		int len;

		if (!bucket[b])
			continue;
		len = (int)(bucket[b] * 50 / most);
		memset(bar, '#', (size_t)len);
		bar[len] = '\0';
		/* A dot for a count too small for a whole '#'. */
		printf("    >= %7.0f us  %9llu  %s\n", (double)(1000ull << b) / 1e3,
		       (unsigned long long)bucket[b], len ? bar : ".");
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "cores", required_argument, NULL, 'c' },
		{ "runtime", required_argument, NULL, 'r' },
		{ "threshold", required_argument, NULL, 't' },
		{ "dump", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "fifo", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cores = NULL, *dump = NULL;
	double runtime = 10;
	uint64_t threshold_ns = 1000, fifo = 0;
	bool json = false;
	cpu_set_t allowed, set;
	char why[512], warnings[1024] = "";
	struct spinner *sp;
	struct stats *stats;
	TSC_CLOCK(clk);
	atomic_bool go = false;
	sem_t refill;
	int opt, n = 0, ret = 0;
	FILE *out = NULL;

	while ((opt = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			cores = optarg;
			break;
		case 'r':
			if (cli_parse_seconds(optarg, 0.01, 86400, &runtime)) {
				fprintf(stderr, "tsc-jitter: --runtime '%s': want seconds from 0.01 to 86400\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 't':
			if (cli_parse_u64(optarg, 1, 1000000000, &threshold_ns)) {
				fprintf(stderr, "tsc-jitter: --threshold '%s': want 1 to 1000000000 ns\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'd':
			dump = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'f':
			if (cli_parse_u64(optarg, 1, 99, &fifo)) {
				fprintf(stderr, "tsc-jitter: --fifo '%s': want a priority from 1 to 99\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case 'V':
			puts("tsc-jitter " TSC_VERSION);
			return 0;
		default:
			fputs(usage, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tsc-jitter: unexpected argument '%s'\n%s", argv[optind], usage);
		return EXIT_USAGE;
	}
	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		perror("tsc-jitter: sched_getaffinity");
		return EXIT_FAIL;
	}
	set = allowed;
	if (cores && cli_parse_cpus(cores, &allowed, &set, why, sizeof(why))) {
		fprintf(stderr, "tsc-jitter: --cores: %s\n", why);
		return EXIT_USAGE;
	}
	/*
	 * Everything that can fail before the run does so now.  The dump
	 * is often asked for in /tmp, by root: a symbolic link planted
	 * there must not turn it into a write to another file.
	 */
	if (dump) {
		int fd = open(dump, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);

		if (fd < 0 || !(out = fdopen(fd, "w"))) {
			fprintf(stderr, "tsc-jitter: --dump %s: %s%s\n", dump, strerror(errno),
				errno == ELOOP ? " (a symbolic link: refused)" : "");
			if (fd >= 0)
				close(fd);
			return EXIT_USAGE;
		}
	}
	if (tsc_clock_init(&clk, NULL)) {
		fprintf(stderr, "tsc-jitter: %s\n", tsc_last_error());
		return EXIT_FAIL;
	}
	sp = calloc((size_t)CPU_COUNT(&set), sizeof(*sp));
	if (!sp || sem_init(&refill, 0, 0)) {
		fprintf(stderr, "tsc-jitter: out of memory\n");
		free(sp);
		return EXIT_FAIL;
	}
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &set))
			continue;
		sp[n] = (struct spinner){ .cpu = c, .go = &go, .refill = &refill,
			.threshold = tsc_ns_to_ticks(&clk.conv, threshold_ns) };
		sp[n].head = sp[n].cur = new_chunk();
		atomic_init(&sp[n].spare, new_chunk());
		if (!sp[n].head || !atomic_load(&sp[n].spare)) {
			fprintf(stderr, "tsc-jitter: out of memory\n");
			return EXIT_FAIL;
		}
		n++;
	}

	for (int i = 0; i < n; i++) {
		pthread_attr_t attr;
		cpu_set_t one;
		int err;

		CPU_ZERO(&one);
		CPU_SET(sp[i].cpu, &one);
		pthread_attr_init(&attr);
		/* A spinner not pinned, or not at the priority asked, would mislead. */
		err = pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
		if (!err && fifo) {
			struct sched_param prio = { .sched_priority = (int)fifo };

			err = pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
			if (!err)
				err = pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
			if (!err)
				err = pthread_attr_setschedparam(&attr, &prio);
		}
		if (!err)
			err = pthread_create(&sp[i].thread, &attr, spin, &sp[i]);
		if (err == EPERM && fifo) {
			/* No privilege for SCHED_FIFO: say so, go on without. */
			snprintf(warnings + strlen(warnings), sizeof(warnings) - strlen(warnings),
				 "%sSCHED_FIFO refused on cpu%d (EPERM): ran at normal priority",
				 warnings[0] ? "; " : "", sp[i].cpu);
			err = pthread_attr_setinheritsched(&attr, PTHREAD_INHERIT_SCHED);
			if (!err)
				err = pthread_create(&sp[i].thread, &attr, spin, &sp[i]);
		}
		pthread_attr_destroy(&attr);
		if (err) {
			fprintf(stderr, "tsc-jitter: cpu%d: %s\n", sp[i].cpu, strerror(err));
			atomic_store(&go, true);
			for (int j = 0; j < i; j++)
				pthread_join(sp[j].thread, NULL);
			return EXIT_FAIL;
		}
		sp[i].started = true;
	}
	if (warnings[0])
		fprintf(stderr, "tsc-jitter: warning: %s\n", warnings);

	/*
	 * Keep out of the spinners' way: move to a CPU not measured if there
	 * is one, and sleep until the end or until a spinner takes its spare.
	 */
	{
		cpu_set_t rest;
		struct timespec until;
		uint64_t end = tsc_rdtsc_ordered() + tsc_ns_to_ticks(&clk.conv, 1000000) +
			       tsc_ns_to_ticks(&clk.conv, (uint64_t)(runtime * 1e9));

		CPU_XOR(&rest, &allowed, &set);
		/* Best effort: where it fails, the main thread stays put. */
		if (CPU_COUNT(&rest))
			(void)sched_setaffinity(0, sizeof(rest), &rest);
		for (int i = 0; i < n; i++)
			sp[i].end = end;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += (time_t)runtime + 1;
		atomic_store_explicit(&go, true, memory_order_release);
		while ((int64_t)(tsc_rdtsc() - end) < 0) {
			if (sem_clockwait(&refill, CLOCK_MONOTONIC, &until) && errno == ETIMEDOUT)
				break;
			for (int i = 0; i < n; i++)
				if (!atomic_load(&sp[i].spare))
					atomic_store(&sp[i].spare, new_chunk());
		}
	}
	for (int i = 0; i < n; i++)
		pthread_join(sp[i].thread, NULL);

	if (json) {
		/* The dump's clock: anchor_ticks is anchor_ns, at frequency_hz. */
		printf("{\n  \"schema_version\": 1,\n  \"frequency_hz\": %.3f, \"frequency_source\": \"%s\",\n"
		       "  \"anchor_ticks\": %llu, \"anchor_ns\": %llu,\n"
		       "  \"runtime_s\": %.3f, \"threshold_ns\": %llu,\n  \"warnings\": ",
		       clk.freq.hz, tsc_source_name(clk.freq.source),
		       (unsigned long long)clk.base_ticks, (unsigned long long)clk.base_mono_ns,
		       runtime, (unsigned long long)threshold_ns);
		cli_json_str(stdout, warnings);
		printf(",\n  \"cpus\": [");
	} else {
		printf("TSC at %.3f Hz (%s); %.3f s per CPU; gaps over %llu ns\n"
		       "%5s %8s %8s %8s %8s %8s %8s %8s %9s %9s %9s %11s %7s\n",
		       clk.freq.hz, tsc_source_name(clk.freq.source), runtime,
		       (unsigned long long)threshold_ns, "cpu", "events", "per s", "min",
		       "p50", "mean", "p90", "p99", "p99.9", "p99.99", "max", "stolen ns",
		       "stolen%");
	}
	/* Once per CPU: the table and the histograms both read them. */
	stats = calloc((size_t)n, sizeof(*stats));
	for (int i = 0; i < n; i++) {
		if (!stats || compute(&sp[i], &clk.conv, &stats[i])) {
			fprintf(stderr, "tsc-jitter: out of memory for the statistics\n");
			return EXIT_FAIL;
		}
	}
	for (int i = 0; i < n; i++) {
		const struct stats st = stats[i];
		double pct = (double)st.total / (runtime * 1e9) * 100;

		if (json) {
			printf("%s\n    {\"cpu\": %d, \"events\": %llu, \"per_second\": %.3f, "
			       "\"min_ns\": %llu, \"p50_ns\": %llu, \"mean_ns\": %.1f, \"p90_ns\": %llu, "
			       "\"p99_ns\": %llu, \"p999_ns\": %llu, \"p9999_ns\": %llu, \"max_ns\": %llu, "
			       "\"stolen_ns\": %llu, \"stolen_percent\": %.6f, \"gaps\": %llu, "
			       "\"dropped\": %llu, \"loops\": %llu}", i ? "," : "", sp[i].cpu,
			       (unsigned long long)st.n, (double)st.n / runtime,
			       (unsigned long long)st.min, (unsigned long long)st.p50, st.mean,
			       (unsigned long long)st.p90, (unsigned long long)st.p99,
			       (unsigned long long)st.p999, (unsigned long long)st.p9999,
			       (unsigned long long)st.max, (unsigned long long)st.total, pct,
			       (unsigned long long)sp[i].gaps, (unsigned long long)sp[i].dropped,
			       (unsigned long long)sp[i].loops);
		} else {
			printf("%5d %8llu %8.1f %8llu %8llu %8.0f %8llu %8llu %9llu %9llu %9llu %11llu %7.3f\n",
			       sp[i].cpu, (unsigned long long)st.n, (double)st.n / runtime,
			       (unsigned long long)st.min, (unsigned long long)st.p50, st.mean,
			       (unsigned long long)st.p90, (unsigned long long)st.p99,
			       (unsigned long long)st.p999, (unsigned long long)st.p9999,
			       (unsigned long long)st.max, (unsigned long long)st.total, pct);
			if (sp[i].dropped)
				printf("      cpu%d DROPPED %llu events: no memory to hold them\n",
				       sp[i].cpu, (unsigned long long)sp[i].dropped);
		}
	}
	if (json) {
		printf("\n  ]\n}\n");
	} else {
		for (int i = 0; i < n; i++) {
			printf("cpu%d: interruptions by length\n", sp[i].cpu);
			histogram(&stats[i]);
		}
		if (warnings[0])
			printf("warning: %s\n", warnings);
	}
	if (out) {
		for (int i = 0; i < n; i++)
			for (const struct chunk *c = sp[i].head; c; c = c->next)
				for (uint32_t k = 0; k < c->used; k++)
					fprintf(out, "%d %llu %llu\n", sp[i].cpu,
						(unsigned long long)tsc_clock_ns(&clk, c->ev[k].start),
						(unsigned long long)tsc_ticks_to_ns(&clk.conv, c->ev[k].ticks));
		if (fclose(out)) {
			fprintf(stderr, "tsc-jitter: --dump %s: %s\n", dump, strerror(errno));
			ret = EXIT_FAIL;
		}
	}
	free_run(sp, n, stats);
	return ret;
}
