/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * tsc-report's section on the time: the bound on CLOCK_REALTIME's error
 * that libtsc's bounded read gives now, term by term, and the tsc_freq_khz
 * module's count of the clocks' disruptions since it loaded (a one-shot
 * report sees none of its own: it was not running when they happened).
 */
#ifndef TSC_REPORT_BOUND_H
#define TSC_REPORT_BOUND_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "libtsc.h"

/* The module's counts, in the order of its files. */
enum { EV_STEPS, EV_RESUMES, EV_CLOCKSOURCE, EV_COUNT };

struct bound_view {
	struct tsc_bound_terms t;
	bool have_events;		/* the module's files were read */
	uint64_t events[EV_COUNT];
	/* The kernel's boot_id, which the counts are of ("": unknown). */
	char boot_id[40];
};

/*
 * Whether this process may call adjtimex() to read the kernel's NTP state,
 * which the bound starts from: tried in a child process, which a seccomp
 * filter refusing the call kills or fails instead of this one (and, if
 * it kills, its audit logs).  libtsc itself does not try (a library does
 * not fork), and without the answer (struct tsc_sysclock_opts'
 * adjtimex_allowed) calls adjtimex() only where no filter is on the
 * process (it looks for one itself): the unit's sandbox has one.
 */
bool bound_adjtimex_allowed(void);
/* The bound of a reading of c now; the module's counts under root (NULL: /sys). */
void bound_read(struct bound_view *v, const struct tsc_sysclock *c, const char *root);
void bound_print_human(FILE *out, const struct bound_view *v);
/* The "time_bound" and "disruptions" members, each line ending in ",\n". */
void bound_print_json(FILE *out, const struct bound_view *v);
void bound_print_prometheus(FILE *out, const struct bound_view *v);

#endif /* TSC_REPORT_BOUND_H */
