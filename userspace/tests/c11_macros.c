// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libtsc.h from standard C: every declaring macro, with a name alone and
 * with fields, built with -std=c11 -pedantic -Werror by gcc and clang
 * (the Makefile's c11-check), then run against the library.  Not named
 * *_test.c: the kselftest harness the tests use is gnu11.  A name
 * alone is what tsc_sysclock_init(3)'s example writes, and ISO C wants
 * an argument for a macro's "...": the header must not need one.
 */
#include <stdio.h>

#include "libtsc.h"

static TSC_CLOCK(global_clock);
static int failed;

static void check(int ok, int n, const char *what)
{
	printf("%sok %d %s\n", ok ? "" : "not ", n, what);
	failed |= !ok;
}

int main(void)
{
	TSC_OPTS(o);
	TSC_OPTS(fields, .source = TSC_SOURCE_CALIBRATION, .calibrate_max_ms = 50);
	TSC_SYSCLOCK(sc);
	TSC_SYSCLOCK_OPTS(so);
	TSC_SYSCLOCK_OPTS(sfields, .discipline = TSC_DISCIPLINE_NONE);
	TSC_REPORT_OPTS(ro);
	TSC_REPORT_OPTS(rfields, .max_ms = 500);
	TSC_TIME_OPTS(to);
	TSC_TIME_OPTS(tfields, .exact_or_syscall = true);
	TSC_BOUND_TERMS(bt);
	TSC_BOUND_TERMS(btfields, .flags = 0);
	struct tsc_time_bound b;
	struct tsc_freq f;

	printf("TAP version 13\n1..5\n");
	check(o.sz == sizeof(o) && so.sz == sizeof(so) && ro.sz == sizeof(ro) &&
	      sc.sz == sizeof(sc) && global_clock.sz == sizeof(global_clock) &&
	      to.sz == sizeof(to) && !to.helper && bt.sz == sizeof(bt) && !bt.bound_ns &&
	      btfields.sz == sizeof(btfields) &&
	      !o.verify && !o.calibrate_max_ms && !ro.max_ms, 1,
	      "a name alone: sz set, the rest zero");
	check(fields.sz == sizeof(fields) && fields.calibrate_max_ms == 50 &&
	      sfields.sz == sizeof(sfields) && sfields.discipline == TSC_DISCIPLINE_NONE &&
	      rfields.sz == sizeof(rfields) && rfields.max_ms == 500 &&
	      tfields.sz == sizeof(tfields) && tfields.exact_or_syscall, 2,
	      "with fields: sz set, and the fields");
	o.source = TSC_SOURCE_CALIBRATION;
	o.calibrate_max_ms = 50;
	check(tsc_freq_get(&f, &o) == 0 && f.source == TSC_SOURCE_CALIBRATION, 3,
	      "tsc_freq_get() with options set after a name alone");
	check(tsc_time_setup(&tfields) == 0 && tsc_monotonic_ns() > 0 &&
	      tsc_time_path(NULL) != TSC_SYSCLOCK_DISCIPLINED, 4,
	      "the front door, exact or clock_gettime()");
	tsc_realtime_bounded(&b);
	check(tsc_time_bound_terms(&bt) == 0 && b.earliest <= b.now && b.now <= b.latest &&
	      bt.bound_ns >= 500000, 5, "the bounded reader and its terms");
	return failed;
}
