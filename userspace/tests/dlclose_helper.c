// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A plugin's life: a program dlopen()s libtsc, starts a disciplined clock
 * with its helper thread and dlclose()s the library without finishing the
 * clock (a plugin unloaded, a forgotten fini).  libtsc is linked with
 * -z nodelete, so dlclose() leaves it mapped and the helper runs on; a
 * library that let itself be unmapped would leave the helper executing
 * unmapped code, a SIGSEGV at its next wakeup (within a second).
 *
 * Usage: dlclose_helper LIBTSC.so EMPTY_SYSFS_ROOT; exit 0, or 1 and why.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#include "libtsc.h"

int main(int argc, char **argv)
{
	int (*init)(struct tsc_sysclock *, const struct tsc_sysclock_opts *);
	const char *(*last_error)(void);
	static TSC_SYSCLOCK(c);
	void *lib;

	if (argc != 3)
		return fprintf(stderr, "usage: %s LIBTSC.so EMPTY_SYSFS_ROOT\n", argv[0]), 2;
	TSC_SYSCLOCK_OPTS(o, .sysfs_root = argv[2], .discipline = TSC_DISCIPLINE_HELPER);
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return fprintf(stderr, "dlopen: %s\n", dlerror()), 1;
	*(void **)&init = dlsym(lib, "tsc_sysclock_init");
	*(void **)&last_error = dlsym(lib, "tsc_last_error");
	if (!init || !last_error)
		return fprintf(stderr, "dlsym: %s\n", dlerror()), 1;
	if (init(&c, &o))
		return fprintf(stderr, "tsc_sysclock_init: %s\n", last_error()), 1;
	if (c.path != TSC_SYSCLOCK_DISCIPLINED)
		return fprintf(stderr, "not disciplined: %s\n", c.why), 1;
	if (dlclose(lib))
		return fprintf(stderr, "dlclose: %s\n", dlerror()), 1;
	/* Two of the helper's wakeups (once a second), each a sync. */
	usleep(2500000);
	if (!dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD))
		return fprintf(stderr, "libtsc was unmapped at dlclose(), its helper still running\n"), 1;
	printf("# dlclose_helper: libtsc stays mapped after dlclose(); its helper ran 2.5 s on\n");
	return 0;
}
