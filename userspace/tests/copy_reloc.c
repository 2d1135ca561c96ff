// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The front door from a program that is not position-independent: the
 * linker gives it its own copy of tsc__time (a copy relocation, which
 * the Makefile checks is there), and the shared library must write that
 * copy, not one of its own, or every read would take the slow path.
 * Exit 0, or 1 and why.
 */
#include <stdio.h>

#include "libtsc.h"

int main(void)
{
	uint64_t a = tsc_monotonic_ns(), b = tsc_monotonic_ns();

	if (!tsc__time.page)
		return fprintf(stderr, "the library set up a tsc__time other than the program's\n"), 1;
	if (b < a)
		return fprintf(stderr, "MONOTONIC went back: %llu then %llu\n", (unsigned long long)a,
			       (unsigned long long)b), 1;
	printf("# copy_reloc: the front door set up the program's own copy of tsc__time\n");
	return 0;
}
