// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc-jitter's outputs: statistics of the gaps, the histogram, the gaps
 * by cause, the dump's causes, and the Prometheus text.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jitter.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Nearest rank: the smallest value with at least q of them at or below. */
static uint64_t rank(const struct stats *st, double q)
{
	uint64_t i = (uint64_t)(q * (double)st->n + 0.999999);

	return st->n ? st->ns[(i ? i : 1) - 1] : 0;
}

int jitter_compute(const struct spinner *s, const struct tsc_conv *conv, struct stats *st)
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
void jitter_histogram(const struct stats *st)
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

/* A dump line's causes: names with commas, or "-" for none attributed. */
void jitter_dump_causes(FILE *out, uint32_t causes)
{
	const char *sep = "";

	for (int k = 0; k < JC_NR; k++)
		if (causes & (1u << k)) {
			fprintf(out, "%s%s", sep, jc_name[k]);
			sep = ",";
		}
	fputs(causes ? "\n" : "-\n", out);
}

/* Gaps by cause, for one CPU: the causes counted, then the rest. */
void jitter_print_causes(const struct spinner *s, const struct tsc_conv *conv, uint64_t steal)
{
	const struct jc_counters *c = &s->jc;
	bool any = false;

	for (int k = 0; k < JC_NR; k++)
		any |= c->counted[k];
	if (!any) {
		printf("cpu%d: no cause counted\n", s->cpu);
		return;
	}
	printf("cpu%d: gaps by cause (a gap counts under each cause whose count moved)\n"
	       "    %-14s %9s %14s %12s\n", s->cpu, "cause", "gaps", "total ns", "longest ns");
	for (int k = 0; k < JC_NR; k++) {
		const struct jc_tally *t = &c->tally[k];

		if (!jc_reported(c, k))
			continue;
		printf("    %-14s %9llu %14llu %12llu\n", jc_name[k], (unsigned long long)t->gaps,
		       (unsigned long long)tsc_ticks_to_ns(conv, t->ticks),
		       (unsigned long long)tsc_ticks_to_ns(conv, t->max_ticks));
	}
	if (c->held && c->failed[0])
		printf("    %-14s %9llu %14llu  (reads shared, or after the counters failed)\n",
		       "not attributed", (unsigned long long)c->held,
		       (unsigned long long)tsc_ticks_to_ns(conv, c->held_ticks));
	else if (c->held)
		printf("    %-14s %9llu %14llu  (reads shared: more than %d a second)\n",
		       "not attributed", (unsigned long long)c->held,
		       (unsigned long long)tsc_ticks_to_ns(conv, c->held_ticks),
		       1000000000 / READ_INTERVAL_NS);
	printf("    counters read %llu times, %.1f us each (not watched for gaps)",
	       (unsigned long long)c->reads,
	       c->reads ? (double)tsc_ticks_to_ns(conv, c->read_ticks) / (double)c->reads / 1e3 : 0.0);
	if (c->smi_run)
		printf("; SMIs %llu", (unsigned long long)c->smis);
	if (steal != UINT64_MAX)
		printf("; steal time %.3f ms", (double)steal / 1e6);
	printf("\n");
}

void jitter_print_causes_json(const struct spinner *s, const struct tsc_conv *conv, uint64_t steal)
{
	const struct jc_counters *c = &s->jc;
	bool first = true;

	printf(", \"causes\": {");
	for (int k = 0; k < JC_NR; k++) {
		const struct jc_tally *t = &c->tally[k];

		if (!jc_reported(c, k))
			continue;
		printf("%s\"%s\": {\"gaps\": %llu, \"total_ns\": %llu, \"max_ns\": %llu}",
		       first ? "" : ", ", jc_name[k], (unsigned long long)t->gaps,
		       (unsigned long long)tsc_ticks_to_ns(conv, t->ticks),
		       (unsigned long long)tsc_ticks_to_ns(conv, t->max_ticks));
		first = false;
	}
	printf("}, \"not_attributed\": %llu, \"not_attributed_ns\": %llu, "
	       "\"counter_reads\": %llu, \"counter_read_ns\": %llu, \"steal_ns\": ",
	       (unsigned long long)c->held, (unsigned long long)tsc_ticks_to_ns(conv, c->held_ticks),
	       (unsigned long long)c->reads, (unsigned long long)tsc_ticks_to_ns(conv, c->read_ticks));
	if (steal == UINT64_MAX)
		printf("null");
	else
		printf("%llu", (unsigned long long)steal);
	printf(", \"smis\": ");
	if (c->smi_run)
		printf("%llu", (unsigned long long)c->smis);
	else
		printf("null");
}

/* One gauge per CPU and cause counted: 0 its gaps, 1 their time, 2 the longest. */
static void cause_metric(const struct spinner *sp, int n, const struct tsc_conv *conv,
			 const char *name, const char *help, int what)
{
	cli_prom_head(stdout, name, "gauge", help);
	for (int i = 0; i < n; i++)
		for (int k = 0; k < JC_NR; k++) {
			const struct jc_tally *t = &sp[i].jc.tally[k];

			if (!jc_reported(&sp[i].jc, k))
				continue;
			printf("%s{cpu=\"%d\",cause=\"%s\"} ", name, sp[i].cpu, jc_name[k]);
			if (what == 0)
				printf("%llu\n", (unsigned long long)t->gaps);
			else
				printf("%.9f\n", (double)tsc_ticks_to_ns(conv, what == 1 ? t->ticks :
									t->max_ticks) / 1e9);
		}
}

/*
 * One run as a textfile for node_exporter: gauges of the last run, not
 * counters (each run starts from nothing), and the gaps as a summary.
 */
void jitter_print_prometheus(const struct spinner *sp, const struct stats *stats, int n,
			     const struct tsc_conv *conv, const uint64_t *steal, double runtime,
			     uint64_t threshold_ns)
{
	static const struct { const char *q; size_t off; } qs[] = {
		{ "0.5", offsetof(struct stats, p50) }, { "0.9", offsetof(struct stats, p90) },
		{ "0.99", offsetof(struct stats, p99) }, { "0.999", offsetof(struct stats, p999) },
		{ "0.9999", offsetof(struct stats, p9999) },
	};

	printf("# HELP tsc_jitter_runtime_seconds How long each CPU was watched in the last run.\n"
	       "# TYPE tsc_jitter_runtime_seconds gauge\ntsc_jitter_runtime_seconds %.3f\n"
	       "# HELP tsc_jitter_threshold_seconds The shortest gap counted.\n"
	       "# TYPE tsc_jitter_threshold_seconds gauge\ntsc_jitter_threshold_seconds %.9f\n",
	       runtime, (double)threshold_ns / 1e9);
	printf("# HELP tsc_jitter_gap_seconds Gaps in a spinning thread's TSC reads, longer than the threshold.\n"
	       "# TYPE tsc_jitter_gap_seconds summary\n");
	for (int i = 0; i < n; i++) {
		for (size_t q = 0; q < sizeof(qs) / sizeof(qs[0]); q++)
			printf("tsc_jitter_gap_seconds{cpu=\"%d\",quantile=\"%s\"} %.9f\n", sp[i].cpu,
			       qs[q].q, (double)*(const uint64_t *)((const char *)&stats[i] + qs[q].off) / 1e9);
		printf("tsc_jitter_gap_seconds_sum{cpu=\"%d\"} %.9f\n"
		       "tsc_jitter_gap_seconds_count{cpu=\"%d\"} %llu\n", sp[i].cpu,
		       (double)stats[i].total / 1e9, sp[i].cpu, (unsigned long long)stats[i].n);
	}
	printf("# HELP tsc_jitter_gap_max_seconds The longest gap.\n# TYPE tsc_jitter_gap_max_seconds gauge\n");
	for (int i = 0; i < n; i++)
		printf("tsc_jitter_gap_max_seconds{cpu=\"%d\"} %.9f\n", sp[i].cpu, (double)stats[i].max / 1e9);
	printf("# HELP tsc_jitter_stolen_ratio The share of the run lost in gaps.\n"
	       "# TYPE tsc_jitter_stolen_ratio gauge\n");
	for (int i = 0; i < n; i++)
		printf("tsc_jitter_stolen_ratio{cpu=\"%d\"} %.9f\n", sp[i].cpu,
		       (double)stats[i].total / (runtime * 1e9));
	printf("# HELP tsc_jitter_dropped_gaps Gaps not recorded for want of memory.\n"
	       "# TYPE tsc_jitter_dropped_gaps gauge\n");
	for (int i = 0; i < n; i++)
		printf("tsc_jitter_dropped_gaps{cpu=\"%d\"} %llu\n", sp[i].cpu,
		       (unsigned long long)sp[i].dropped);
	cause_metric(sp, n, conv, "tsc_jitter_cause_gaps", "Gaps put down to a cause (a gap counts under each cause whose count moved); unexplained: none moved.", 0);
	cause_metric(sp, n, conv, "tsc_jitter_cause_seconds", "Time of the gaps put down to a cause.", 1);
	cause_metric(sp, n, conv, "tsc_jitter_cause_max_seconds", "The longest gap put down to a cause.", 2);
	printf("# HELP tsc_jitter_not_attributed_gaps Gaps that shared a counter read with another (reads are rate-limited), fell inside one, or had no counters to read.\n"
	       "# TYPE tsc_jitter_not_attributed_gaps gauge\n");
	for (int i = 0; i < n; i++)
		printf("tsc_jitter_not_attributed_gaps{cpu=\"%d\"} %llu\n", sp[i].cpu,
		       (unsigned long long)sp[i].jc.held);
	printf("# HELP tsc_jitter_smis SMIs on the CPU during the run (the msr PMU's count).\n"
	       "# TYPE tsc_jitter_smis gauge\n");
	for (int i = 0; i < n; i++)
		if (sp[i].jc.smi_run)
			printf("tsc_jitter_smis{cpu=\"%d\"} %llu\n", sp[i].cpu,
			       (unsigned long long)sp[i].jc.smis);
	printf("# HELP tsc_jitter_steal_seconds Steal time the kernel reported during the run.\n"
	       "# TYPE tsc_jitter_steal_seconds gauge\n");
	for (int i = 0; i < n; i++)
		if (steal[i] != UINT64_MAX)
			printf("tsc_jitter_steal_seconds{cpu=\"%d\"} %.3f\n", sp[i].cpu, (double)steal[i] / 1e9);
}

