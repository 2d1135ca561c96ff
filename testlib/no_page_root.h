/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * A sysfs root for libtsc's .sysfs_root with no module's clock page but
 * the kernel's own clocksource directory and CPU lists, live: a
 * tsc_sysclock set up on it is the disciplined one even where the module
 * is loaded, it sees the kernel withdraw tsc (available_clocksource) at
 * every sync, as it would without the module, and its helper finds the
 * housekeeping CPUs.  The root stays while the clock runs and goes
 * at exit.
 */
#ifndef NO_PAGE_ROOT_H
#define NO_PAGE_ROOT_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define NO_PAGE_CS	"/devices/system/clocksource"
#define NO_PAGE_CPU	"/devices/system/cpu"

/* The kernel's CPU lists too: where the disciplined clock's helper may run. */
static const char *const no_page_cpu_lists[] = { "online", "isolated", "nohz_full" };

static char no_page_root_dir[] = "/tmp/libtsc-bench.XXXXXX";

static void no_page_root_remove(void)
{
	char path[sizeof(no_page_root_dir) + sizeof(NO_PAGE_CPU) + 16];

	for (size_t i = 0; i < sizeof(no_page_cpu_lists) / sizeof(no_page_cpu_lists[0]); i++) {
		snprintf(path, sizeof(path), "%s" NO_PAGE_CPU "/%s", no_page_root_dir,
			 no_page_cpu_lists[i]);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s" NO_PAGE_CPU, no_page_root_dir);
	rmdir(path);
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
	char path[sizeof(no_page_root_dir) + sizeof(NO_PAGE_CPU) + 16];
	char target[sizeof(NO_PAGE_CPU) + 32];

	if (!mkdtemp(no_page_root_dir))
		return NULL;
	atexit(no_page_root_remove);
	snprintf(path, sizeof(path), "%s/devices", no_page_root_dir);
	if (mkdir(path, 0755))
		return NULL;
	snprintf(path, sizeof(path), "%s/devices/system", no_page_root_dir);
	if (mkdir(path, 0755))
		return NULL;
	snprintf(path, sizeof(path), "%s" NO_PAGE_CPU, no_page_root_dir);
	if (mkdir(path, 0755))
		return NULL;
	/* A list the kernel lacks (nohz_full without NO_HZ_FULL) dangles: absent. */
	for (size_t i = 0; i < sizeof(no_page_cpu_lists) / sizeof(no_page_cpu_lists[0]); i++) {
		snprintf(path, sizeof(path), "%s" NO_PAGE_CPU "/%s", no_page_root_dir,
			 no_page_cpu_lists[i]);
		snprintf(target, sizeof(target), "/sys" NO_PAGE_CPU "/%s", no_page_cpu_lists[i]);
		if (symlink(target, path))
			return NULL;
	}
	snprintf(path, sizeof(path), "%s" NO_PAGE_CS, no_page_root_dir);
	return symlink("/sys" NO_PAGE_CS, path) ? NULL : no_page_root_dir;
}

#endif /* NO_PAGE_ROOT_H */
