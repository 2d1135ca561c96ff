// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libtsc.h from C++: every declaring macro and every inline function,
 * the front door's readers among them,
 * built with -Wall -Wextra -Werror -pedantic (the Makefile), then run
 * against the library.  The macros take the name alone and the fields are
 * set after the declaration; with TSC_CXX_FIELD_IN_MACRO defined, a macro
 * also takes fields, as in C, which C++20 compiles (libtsc.h).
 */
#include <cerrno>
#include <cstdio>
#include <ctime>

/* The names 1.3 deprecates are inline functions too: they compile in C++. */
#define TSC_NO_DEPRECATION_WARNINGS
#include "libtsc.h"

static TSC_CLOCK(global_clock);

static uint64_t gettime_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int failed;

/* Within a second of each other. */
static bool near(uint64_t a, uint64_t b)
{
	return (a > b ? a - b : b - a) < 1000000000u;
}

static void check(bool ok, int n, const char *what)
{
	std::printf("%sok %d %s\n", ok ? "" : "not ", n, what);
	failed |= !ok;
}

int main()
{
	TSC_OPTS(o);
	TSC_SYSCLOCK(sc);
	TSC_SYSCLOCK_OPTS(so);
	TSC_REPORT_OPTS(ro);
	TSC_TIME_OPTS(to);
	TSC_BOUND_TERMS(bt);
	struct tsc_freq f;
	uint64_t millihz;

#ifdef TSC_CXX_FIELD_IN_MACRO
	TSC_OPTS(fields, .source = TSC_SOURCE_CALIBRATION, .calibrate_max_ms = 50);

	if (fields.sz != sizeof(fields) || fields.calibrate_max_ms != 50)
		return 1;
#endif
	std::printf("TAP version 13\n1..8\n");
	o.source = TSC_SOURCE_CALIBRATION;
	o.calibrate_max_ms = 50;
	check(o.sz == sizeof(o) && so.sz == sizeof(so) && ro.sz == sizeof(ro) &&
	      sc.sz == sizeof(sc) && global_clock.sz == sizeof(global_clock) && !o.verify,
	      1, "the macros set sz and zero the rest");
	check(tsc_freq_get(&f, &o) == 0 && f.source == TSC_SOURCE_CALIBRATION, 2,
	      "tsc_freq_get() with C++ options");
	check(tsc_clock_init(&global_clock, &o) == 0, 3, "tsc_clock_init()");
	{
		uint64_t a = tsc_now(&global_clock), b = tsc_now_ordered(&global_clock);
		uint64_t s = tsc_now_start(&global_clock), r = tsc_now_realtime(&global_clock);
		uint64_t n = tsc_clock_now(&global_clock), nu = tsc_clock_now_unordered(&global_clock);
		uint64_t rr = tsc_clock_realtime(&global_clock);
		uint64_t ru = tsc_clock_realtime_unordered(&global_clock);
		struct tsc_conv c = global_clock.conv;
		/*
		 * Both conversions round down, so the round trip may lose
		 * up to one ns worth of ticks, rounded up, never gain.
		 */
		uint64_t t = tsc_ns_to_ticks(&c, tsc_ticks_to_ns(&c, 1000000));

		check(a <= b && b <= s && r > s && t <= 1000000 && 1000000 - t <= tsc_ns_to_ticks(&c, 1) + 1 &&
		      s <= n && n <= nu + 1000 && r <= rr && rr <= ru + 1000 &&
		      tsc_clock_at(&global_clock, tsc_ticks()) >= nu && tsc_clock_ns(&global_clock, 0) != 1 &&
		      tsc_rdtsc() <= tsc_rdtsc_ordered() + 1000000 && tsc_rdtsc_start() > 0 &&
		      tsc_mul_frac(2, UINT64_MAX) == 1, 4, "the tsc_clock readers");
	}
	so.discipline = TSC_DISCIPLINE_NONE;
	so.order = TSC_ORDER_AUTO;
	check(tsc_sysclock_init(&sc, &so) == 0, 5, "tsc_sysclock_init() with C++ options");
	{
		uint64_t m0 = gettime_ns(CLOCK_MONOTONIC);
		uint64_t m = tsc_sysclock_monotonic(&sc), mu = tsc_sysclock_monotonic_unordered(&sc);
		uint64_t m1 = gettime_ns(CLOCK_MONOTONIC);
		uint64_t r = tsc_sysclock_realtime(&sc), ru = tsc_sysclock_realtime_unordered(&sc);
		uint64_t b = tsc_sysclock_boottime(&sc), bu = tsc_sysclock_boottime_unordered(&sc);
		int rate = tsc_sysclock_rate(&sc, &millihz);

		/*
		 * The ordered reading within the kernel's bracket; the
		 * unordered ones may run a little early, hence near it.
		 */
		check(m0 <= m && m <= m1 && near(mu, m) && near(ru, r) && near(bu, b) &&
		      (rate == 0 || rate == -ENODATA), 6, "the system clock's readers");
	}
	tsc_sysclock_fini(&sc);
	to.helper = false;
	{
		uint64_t m0 = gettime_ns(CLOCK_MONOTONIC), m = tsc_monotonic_ns();
		uint64_t mu = tsc_monotonic_ns_unordered(), r = tsc_realtime_ns();
		uint64_t ru = tsc_realtime_ns_unordered(), b = tsc_boottime_ns();
		uint64_t bu = tsc_boottime_ns_unordered(), t0 = tsc_ticks();
		uint64_t t1 = tsc_ticks_unordered();
		const char *why = nullptr;

		check(to.sz == sizeof(to) && tsc_time_setup(&to) == 0 && near(m, m0) && near(mu, m) &&
		      near(r, gettime_ns(CLOCK_REALTIME)) && near(ru, r) && near(bu, b) &&
		      t1 - t0 < 1000000000 && tsc_khz() > 0 && (tsc_hz() + 500) / 1000 == tsc_khz() &&
		      tsc_delta_to_ns(tsc_delta_to_ticks(1000)) <= 1000 &&
		      tsc_time_path(&why) != TSC_SYSCLOCK_NONE && why && *why, 7,
		      "the front door");
	}
	{
		struct tsc_time_bound b, sb;

		int init;

		tsc_realtime_bounded(&b);
		init = tsc_sysclock_init(&sc, &so);
		tsc_sysclock_realtime_bounded(&sc, &sb);
		check(init == 0 && bt.sz == sizeof(bt) && tsc_time_bound_terms(&bt) == 0 &&
		      b.earliest <= b.now && b.now <= b.latest && sb.earliest <= sb.now &&
		      sb.now <= sb.latest && tsc_sysclock_bound_terms(&sc, &bt) == 0, 8,
		      "the bounded readers");
	}
	return failed;
}
