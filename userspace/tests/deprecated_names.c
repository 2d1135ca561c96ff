// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Each name libtsc 1.3 deprecates, used once: the Makefile's
 * deprecation-check compiles this with -Werror=deprecated-declarations,
 * which must fail, once per name, and pass with
 * TSC_NO_DEPRECATION_WARNINGS defined.  Never run.
 */
#include "libtsc.h"

uint64_t use_them(const struct tsc_clock *clk);

uint64_t use_them(const struct tsc_clock *clk)
{
	return tsc_rdtsc() + tsc_now(clk) + tsc_now_realtime(clk) + tsc_clock_ns(clk, 0);
}
