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
 * Why each gap happened: every spinner counts, per thread, what can take
 * its CPU (jitter_causes.h), and after a gap reads the counters and puts
 * the gap down to every cause whose count moved since the last read.
 * Reads are held to one per READ_INTERVAL_NS, with bursts of READ_BURST:
 * gaps beyond that share one read and are reported as not attributed,
 * never guessed at.  A read's own time is not a gap, unless the read
 * took longer than reads do by more than the threshold: then the CPU was
 * taken in the middle of it, and that gap is reported, not attributed.
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
#include "jitter.h"
#include "jitter_causes.h"
#include "libtsc.h"


static const char usage[] =
"Usage: tsc-jitter [--cores LIST] [--runtime SECONDS] [--threshold NS]\n"
"                  [--dump FILE] [--json | --prometheus] [--fifo PRIORITY]\n"
"Spin on each CPU of LIST, report every interruption longer than NS, and\n"
"what caused it where perf can count the causes.\n"
"\n"
"  --cores LIST      CPUs such as 0,2-5 (default: all this process may use)\n"
"  --runtime SECONDS how long, 0.01 to 86400 (default 10)\n"
"  --threshold NS    shortest gap counted, 1 to 1000000000 ns (default 1000)\n"
"  --dump FILE       every interruption: cpu, start (CLOCK_MONOTONIC ns), ns,\n"
"                    causes (comma-separated; - if not attributed)\n"
"  --json            JSON, as tsc-jitter.schema.json describes\n"
"  --prometheus      Prometheus text format, for node_exporter's textfile collector\n"
"  --fifo PRIORITY   run the spinners SCHED_FIFO at 1 to 99 (needs privilege)\n"
"  -h, --help        this text;  -V, --version  the version\n";

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

/* A gap: counted, and kept, or dropped if no chunk is left for it. */
static void record(struct spinner *s, uint64_t start, uint64_t ticks)
{
	s->gaps++;
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
	s->cur->ev[s->cur->used++] = (struct event){ start, ticks, 0 };
}

static void *spin(void *arg)
{
	struct spinner *s = arg;
	uint64_t first, last, end;
	uint32_t causes;

	/* Opened by this thread: per-thread counters count this thread. */
	jc_open(&s->jc, s->cpu, s->read_interval, READ_BURST, s->smi_slow);
	atomic_fetch_add_explicit(s->ready, 1, memory_order_release);
	while (!atomic_load_explicit(s->go, memory_order_acquire))
		;
	jc_start(&s->jc);
	first = last = tsc_rdtsc_ordered();
	for (;;) {
		uint64_t now = tsc_rdtsc_ordered();

		if (now - last > s->threshold) {
			record(s, last, now - last);
			if (jc_gap(&s->jc, now, now - last, &causes, &end)) {
				/* The event just recorded, unless it was dropped. */
				if (s->cur->used && s->cur->ev[s->cur->used - 1].start == last)
					s->cur->ev[s->cur->used - 1].causes = causes;
				/*
				 * The read took time of ours, not a gap, unless
				 * something took the CPU in the middle of it.
				 */
				if (jc_gap_in_read(&s->jc, now, end, s->threshold))
					record(s, now, end - now);
				now = end;
			}
		}
		last = now;
		s->loops++;
		if ((int64_t)(now - s->end) >= 0)
			break;
	}
	s->watched = last - first;
	jc_finish(&s->jc);
	jc_close(&s->jc);
	return NULL;
}

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

/* cpu's steal time so far in ns, from /proc/stat; UINT64_MAX if not there. */
static uint64_t steal_ns(int cpu)
{
	char name[16], line[256];
	uint64_t ns = UINT64_MAX;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "re");

	if (!f)
		return ns;
	snprintf(name, sizeof(name), "cpu%d ", cpu);
	while (hz > 0 && fgets(line, sizeof(line), f)) {
		char *p = line + strlen(name), *end;
		unsigned long long v = 0;
		int i;

		if (strncmp(line, name, strlen(name)) != 0)
			continue;
		/* user nice system idle iowait irq softirq steal: the 8th. */
		for (i = 0; i < 8; i++, p = end) {
			errno = 0;
			v = strtoull(p, &end, 10);
			if (end == p || errno)
				break;
		}
		if (i == 8)
			ns = (uint64_t)v * (1000000000ull / (uint64_t)hz);
		break;
	}
	(void)fclose(f);
	return ns;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "cores", required_argument, NULL, 'c' },
		{ "runtime", required_argument, NULL, 'r' },
		{ "threshold", required_argument, NULL, 't' },
		{ "dump", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "fifo", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cores = NULL, *dump = NULL;
	double runtime = 10;
	uint64_t threshold_ns = 1000, fifo = 0;
	bool json = false, prometheus = false;
	cpu_set_t allowed, set;
	char why[512], warnings[1024] = "", missing[1024] = "";
	uint64_t *steal = NULL;
	struct spinner *sp;
	struct stats *stats;
	TSC_CLOCK(clk);
	atomic_bool go = false;
	atomic_int ready = 0;
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
		case 'p':
			prometheus = true;
			break;
		case 'f':
			if (cli_parse_u64(optarg, 1, 99, &fifo)) {
				fprintf(stderr, "tsc-jitter: --fifo '%s': want a priority from 1 to 99\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			fputs(usage, stdout);
			return cli_exit("tsc-jitter", 0);
		case 'V':
			puts("tsc-jitter " TSC_VERSION);
			return cli_exit("tsc-jitter", 0);
		default:
			fputs(usage, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tsc-jitter: unexpected argument '%s'\n%s", argv[optind], usage);
		return EXIT_USAGE;
	}
	if (json && prometheus) {
		fprintf(stderr, "tsc-jitter: --json and --prometheus exclude each other\n");
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
	steal = calloc((size_t)CPU_COUNT(&set), sizeof(*steal));
	if (!sp || !steal || sem_init(&refill, 0, 0)) {
		fprintf(stderr, "tsc-jitter: out of memory\n");
		free(sp);
		free(steal);
		return EXIT_FAIL;
	}
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &set))
			continue;
		sp[n] = (struct spinner){ .cpu = c, .go = &go, .ready = &ready, .refill = &refill,
			.threshold = tsc_ns_to_ticks(&clk.conv, threshold_ns),
			.read_interval = tsc_ns_to_ticks(&clk.conv, READ_INTERVAL_NS),
			.smi_slow = tsc_ns_to_ticks(&clk.conv, 1000) };
		sp[n].head = sp[n].cur = new_chunk();
		atomic_init(&sp[n].spare, new_chunk());
		if (!sp[n].head || !atomic_load(&sp[n].spare)) {
			fprintf(stderr, "tsc-jitter: out of memory\n");
			free_run(sp, n + 1, NULL);
			free(steal);
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
	 * The end is set just before the start, once every spinner has its
	 * counters open (a few system calls each, slow under a sanitizer):
	 * each watches the runtime the outputs divide by, no less, no more.
	 */
	{
		const struct timespec ms = { 0, 1000000 };
		cpu_set_t rest;
		struct timespec until;
		uint64_t end;

		CPU_XOR(&rest, &allowed, &set);
		/* Best effort: where it fails, the main thread stays put. */
		if (CPU_COUNT(&rest))
			(void)sched_setaffinity(0, sizeof(rest), &rest);
		for (int waited = 0; atomic_load(&ready) < n && waited < READY_MAX_MS; waited++)
			nanosleep(&ms, NULL);
		if (atomic_load(&ready) < n)
			fprintf(stderr, "tsc-jitter: warning: %d of %d spinners not ready after %d ms: they watch less than the runtime (watched_ns)\n",
				n - atomic_load(&ready), n, READY_MAX_MS);
		for (int i = 0; i < n; i++)
			steal[i] = steal_ns(sp[i].cpu);
		end = tsc_rdtsc_ordered() + tsc_ns_to_ticks(&clk.conv, (uint64_t)(runtime * 1e9));
		for (int i = 0; i < n; i++)
			sp[i].end = end;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += (time_t)runtime + 1;
		atomic_store_explicit(&go, true, memory_order_release);
		while ((int64_t)(tsc_ticks_unordered() - end) < 0) {
			if (sem_clockwait(&refill, CLOCK_MONOTONIC, &until) && errno == ETIMEDOUT)
				break;
			for (int i = 0; i < n; i++)
				if (!atomic_load(&sp[i].spare))
					atomic_store(&sp[i].spare, new_chunk());
		}
	}
	for (int i = 0; i < n; i++) {
		uint64_t now;

		pthread_join(sp[i].thread, NULL);
		now = steal_ns(sp[i].cpu);
		steal[i] = now == UINT64_MAX || steal[i] == UINT64_MAX ? UINT64_MAX : now - steal[i];
	}
	/* Counters that failed mid-run: a warning of that CPU's, said at once. */
	for (int i = 0; i < n; i++) {
		if (!sp[i].jc.failed[0])
			continue;
		fprintf(stderr, "tsc-jitter: warning: cpu%d: %s\n", sp[i].cpu, sp[i].jc.failed);
		snprintf(warnings + strlen(warnings), sizeof(warnings) - strlen(warnings), "%scpu%d: %s",
			 warnings[0] ? "; " : "", sp[i].cpu, sp[i].jc.failed);
	}
	/* The same on every CPU: said once, where the output has no place for it. */
	jc_missing(&sp[0].jc, missing, sizeof(missing));
	if (missing[0] && prometheus)
		fprintf(stderr, "tsc-jitter: causes not counted: %s\n", missing);

	/* Once per CPU: every output reads them. */
	stats = calloc((size_t)n, sizeof(*stats));
	for (int i = 0; i < n; i++) {
		if (!stats || jitter_compute(&sp[i], &clk.conv, &stats[i])) {
			fprintf(stderr, "tsc-jitter: out of memory for the statistics\n");
			return EXIT_FAIL;
		}
	}
	if (prometheus) {
		jitter_print_prometheus(sp, stats, n, &clk.conv, steal, runtime, threshold_ns);
		goto dump;
	}
	if (json) {
		/* The dump's clock: anchor_ticks is anchor_ns, at frequency_hz. */
		printf("{\n  \"schema_version\": 1,\n  \"frequency_hz\": %.3f, \"frequency_source\": \"%s\",\n"
		       "  \"anchor_ticks\": %llu, \"anchor_ns\": %llu,\n"
		       "  \"runtime_s\": %.3f, \"threshold_ns\": %llu,\n"
		       "  \"read_interval_ns\": %d, \"read_burst\": %d,\n"
		       "  \"warnings\": ",
		       clk.freq.hz, tsc_source_name(clk.freq.source),
		       (unsigned long long)clk.base_ticks, (unsigned long long)clk.base_mono_ns,
		       runtime, (unsigned long long)threshold_ns, READ_INTERVAL_NS, READ_BURST);
		cli_json_str(stdout, warnings);
		printf(",\n  \"causes_not_counted\": ");
		cli_json_str(stdout, missing);
		printf(",\n  \"cpus\": [");
	} else {
		printf("TSC at %.3f Hz (%s); %.3f s per CPU; gaps over %llu ns\n"
		       "%5s %8s %8s %8s %8s %8s %8s %8s %9s %9s %9s %11s %7s\n",
		       clk.freq.hz, tsc_source_name(clk.freq.source), runtime,
		       (unsigned long long)threshold_ns, "cpu", "events", "per s", "min",
		       "p50", "mean", "p90", "p99", "p99.9", "p99.99", "max", "stolen ns",
		       "stolen%");
	}
	for (int i = 0; i < n; i++) {
		const struct stats st = stats[i];
		double pct = (double)st.total / (runtime * 1e9) * 100;

		if (json) {
			printf("%s\n    {\"cpu\": %d, \"events\": %llu, \"per_second\": %.3f, "
			       "\"min_ns\": %llu, \"p50_ns\": %llu, \"mean_ns\": %.1f, \"p90_ns\": %llu, "
			       "\"p99_ns\": %llu, \"p999_ns\": %llu, \"p9999_ns\": %llu, \"max_ns\": %llu, "
			       "\"stolen_ns\": %llu, \"stolen_percent\": %.6f, \"gaps\": %llu, "
			       "\"dropped\": %llu, \"loops\": %llu, \"watched_ns\": %llu",
			       i ? "," : "", sp[i].cpu,
			       (unsigned long long)st.n, (double)st.n / runtime,
			       (unsigned long long)st.min, (unsigned long long)st.p50, st.mean,
			       (unsigned long long)st.p90, (unsigned long long)st.p99,
			       (unsigned long long)st.p999, (unsigned long long)st.p9999,
			       (unsigned long long)st.max, (unsigned long long)st.total, pct,
			       (unsigned long long)sp[i].gaps, (unsigned long long)sp[i].dropped,
			       (unsigned long long)sp[i].loops,
			       (unsigned long long)tsc_ticks_to_ns(&clk.conv, sp[i].watched));
			jitter_print_causes_json(&sp[i], &clk.conv, steal[i]);
			printf("}");
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
			jitter_histogram(&stats[i]);
			jitter_print_causes(&sp[i], &clk.conv, steal[i]);
		}
		if (missing[0])
			printf("causes not counted: %s\n", missing);
		if (warnings[0])
			printf("warning: %s\n", warnings);
	}
dump:
	if (out) {
		for (int i = 0; i < n; i++)
			for (const struct chunk *c = sp[i].head; c; c = c->next)
				for (uint32_t k = 0; k < c->used; k++) {
					fprintf(out, "%d %llu %llu ", sp[i].cpu,
						(unsigned long long)tsc_clock_at(&clk, c->ev[k].start),
						(unsigned long long)tsc_ticks_to_ns(&clk.conv, c->ev[k].ticks));
					jitter_dump_causes(out, c->ev[k].causes);
				}
		if (fclose(out)) {
			fprintf(stderr, "tsc-jitter: --dump %s: %s\n", dump, strerror(errno));
			ret = EXIT_FAIL;
		}
	}
	free_run(sp, n, stats);
	free(steal);
	return cli_exit("tsc-jitter", ret);
}
