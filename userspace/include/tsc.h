/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libtsc's header under its first name, so that code written against 0.x
 * finds it; new code includes <libtsc.h>, a name no other package's header
 * is likely to take.  The name is all that carries over: 1.0 is a new ABI
 * (libtsc.so.1), and a clock must now be declared with TSC_CLOCK(), as a
 * 0.x-style `struct tsc_clock clk;` leaves its size unset (tsc_clock_init()
 * refuses a static one with -EINVAL, and an automatic one holds garbage).
 */
#include <libtsc.h>
