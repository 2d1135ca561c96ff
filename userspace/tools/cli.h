/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * What the tools share: parsing their arguments strictly (a bad one is a
 * message and exit 2, before anything runs), writing JSON strings and
 * Prometheus's headers, and the signals that end a tool from outside.
 */
#ifndef TSC_CLI_H
#define TSC_CLI_H

#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cpulist.h"

#define EXIT_USAGE	2
#define EXIT_FAIL	3

/*
 * A CPU list such as "0,2-5" into set; every CPU must be in 'allowed'
 * (the affinity mask).  0, or -1 with a message in why.
 */
int cli_parse_cpus(const char *s, const cpu_set_t *allowed, cpu_set_t *set,
		   char *why, size_t why_size);

/*
 * The CPU a tool runs on: 'arg' (from --cpu, NULL if not given) or else the
 * first CPU of the affinity mask; it must be in the mask.  0, or -1 after
 * a message on stderr, prefixed with the tool's name.
 */
int cli_pick_cpu(const char *tool, const char *arg, cpu_set_t *allowed, int *cpu);

/* A decimal number of seconds (e.g. "10", "0.5") within [min, max]. */
int cli_parse_seconds(const char *s, double min, double max, double *out);

/* An unsigned integer within [min, max], no sign, no junk. */
int cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* s as a JSON string, quoted and escaped, to f. */
void cli_json_str(FILE *f, const char *s);

/* A metric's HELP and TYPE lines, in Prometheus's text format. */
void cli_prom_head(FILE *f, const char *name, const char *type, const char *help);

/*
 * A tool's exit status: 'status', or EXIT_FAIL after a message if its
 * standard output could not all be written (a full disk, say): a report
 * lost is a run that failed.
 */
int cli_exit(const char *tool, int status);

/* SIGINT, SIGTERM, SIGHUP: a terminal's or a service manager's end of a tool. */
void cli_fatal_signals(sigset_t *set);

/*
 * 'handler' for each of them, but for one ignored when the tool started
 * (nohup, a script's background job): that one stays ignored.
 */
void cli_catch_fatal_signals(void (*handler)(int sig));

/* From such a handler (async-signal-safe): die of sig as without it. */
void cli_die_of(int sig);

#endif /* TSC_CLI_H */
