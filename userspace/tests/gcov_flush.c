// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * For the unit tests, linked with -Wl,--wrap=_exit: the kselftest
 * harness runs each test in a child that ends with _exit(), which skips
 * the exit handlers where gcov writes its counts.  Write them first.
 */
#include <stdnoreturn.h>

/* libgcov's, and the linker's names for the wrapped and the real _exit. */
void __gcov_dump(void);				/* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */
noreturn void __real__exit(int status);		/* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */
noreturn void __wrap__exit(int status);		/* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */

noreturn void __wrap__exit(int status)		/* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */
{
	__gcov_dump();
	__real__exit(status);
}
