/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libtsc's header under its first name, for code written against 0.x:
 * include <libtsc.h>, a name no other package's header is likely to take.
 */
#include <libtsc.h>
