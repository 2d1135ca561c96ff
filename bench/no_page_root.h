/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * A sysfs root for libtsc's .sysfs_root with no module's clock page but
 * the kernel's own clocksource directory, live: a tsc_sysclock set up on
 * it is the disciplined one even where the module is loaded, and it sees
 * the kernel withdraw tsc (available_clocksource) at every sync, as it
 * would without the module.  The root stays while the clock runs and goes
 * at exit.
 */
#ifndef NO_PAGE_ROOT_H
#define NO_PAGE_ROOT_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define NO_PAGE_CS	"/devices/system/clocksource"

static char no_page_root_dir[] = "/tmp/libtsc-bench.XXXXXX";

static void no_page_root_remove(void)
{
	char path[sizeof(no_page_root_dir) + sizeof(NO_PAGE_CS)];

	snprintf(path, sizeof(path), "%s" NO_PAGE_CS, no_page_root_dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/devices/system", no_page_root_dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/devices", no_page_root_dir);
	rmdir(path);
	rmdir(no_page_root_dir);
}

/* The root's path, or NULL with errno set. */
static const char *no_page_root(void)
{
	char path[sizeof(no_page_root_dir) + sizeof(NO_PAGE_CS)];

	if (!mkdtemp(no_page_root_dir))
		return NULL;
	atexit(no_page_root_remove);
	snprintf(path, sizeof(path), "%s/devices", no_page_root_dir);
	if (mkdir(path, 0755))
		return NULL;
	snprintf(path, sizeof(path), "%s/devices/system", no_page_root_dir);
	if (mkdir(path, 0755))
		return NULL;
	snprintf(path, sizeof(path), "%s" NO_PAGE_CS, no_page_root_dir);
	return symlink("/sys" NO_PAGE_CS, path) ? NULL : no_page_root_dir;
}

#endif /* NO_PAGE_ROOT_H */
