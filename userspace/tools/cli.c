// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The tools' shared argument parsing and JSON output: see cli.h.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* A CPU number at *s: digits only, below CPU_SETSIZE. */
static int cpu_number(const char **s, long *cpu)
{
	char *end;

	if (!isdigit((unsigned char)**s))
		return -1;
	errno = 0;
	*cpu = strtol(*s, &end, 10);
	if (errno || *cpu >= CPU_SETSIZE)
		return -1;
	*s = end;
	return 0;
}

int cli_parse_cpus(const char *s, const cpu_set_t *allowed, cpu_set_t *set,
		   char *why, size_t why_size)
{
	const char *p = s;

	CPU_ZERO(set);
	if (!*p) {
		snprintf(why, why_size, "empty CPU list");
		return -1;
	}
	while (*p) {
		long lo, hi;

		if (cpu_number(&p, &lo)) {
			snprintf(why, why_size, "'%s': expected a CPU number below %d at '%s'",
				 s, CPU_SETSIZE, p);
			return -1;
		}
		hi = lo;
		if (*p == '-') {
			p++;
			if (cpu_number(&p, &hi)) {
				snprintf(why, why_size, "'%s': expected a CPU number at '%s'", s, p);
				return -1;
			}
			if (hi < lo) {
				snprintf(why, why_size, "'%s': range %ld-%ld runs backwards", s, lo, hi);
				return -1;
			}
		}
		for (long c = lo; c <= hi; c++) {
			if (!CPU_ISSET(c, allowed)) {
				char list[256];

				tsc__format_cpulist(allowed, list, sizeof(list));
				snprintf(why, why_size,
					 "cpu%ld is offline or not in this process's affinity mask (%s)",
					 c, list);
				return -1;
			}
			CPU_SET(c, set);
		}
		if (*p == ',' && p[1])
			p++;
		else if (*p) {
			snprintf(why, why_size, "'%s': unexpected '%s'", s, p);
			return -1;
		}
	}
	return 0;
}

int cli_pick_cpu(const char *tool, const char *arg, cpu_set_t *allowed, int *cpu)
{
	uint64_t c;

	if (sched_getaffinity(0, sizeof(*allowed), allowed)) {
		fprintf(stderr, "%s: sched_getaffinity: %s\n", tool, strerror(errno));
		return -1;
	}
	if (!arg) {
		for (*cpu = 0; *cpu < CPU_SETSIZE && !CPU_ISSET(*cpu, allowed); ++*cpu)
			;
		return 0;
	}
	if (cli_parse_u64(arg, 0, CPU_SETSIZE - 1, &c)) {
		fprintf(stderr, "%s: --cpu '%s': want a CPU number below %d\n", tool, arg,
			CPU_SETSIZE);
		return -1;
	}
	if (!CPU_ISSET(c, allowed)) {
		char list[256];

		tsc__format_cpulist(allowed, list, sizeof(list));
		fprintf(stderr, "%s: cpu%llu is offline or not in this process's affinity mask (%s)\n",
			tool, (unsigned long long)c, list);
		return -1;
	}
	*cpu = (int)c;
	return 0;
}

int cli_parse_seconds(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	/* strtod takes signs, hex, inf and nan: allow only digits and a point. */
	if (!*s || strspn(s, "0123456789.") != strlen(s))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!*s || strspn(s, "0123456789") != strlen(s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int cli_exit(const char *tool, int status)
{
	errno = 0;
	if (!fflush(stdout) && !ferror(stdout))
		return status;
	/* An earlier write's error is in the stream's flag only. */
	fprintf(stderr, "%s: standard output: %s\n", tool, errno ? strerror(errno) : "a write failed");
	return EXIT_FAIL;
}

void cli_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

void cli_prom_head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static const int fatal_signals[] = { SIGINT, SIGTERM, SIGHUP };

void cli_fatal_signals(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++)
		sigaddset(set, fatal_signals[i]);
}

void cli_catch_fatal_signals(void (*handler)(int sig))
{
	struct sigaction sa = { .sa_handler = handler }, old;

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++)
		if (!sigaction(fatal_signals[i], NULL, &old) && old.sa_handler != SIG_IGN)
			sigaction(fatal_signals[i], &sa, NULL);
}

void cli_die_of(int sig)
{
	(void)signal(sig, SIG_DFL);
	(void)raise(sig);
}
