/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * A fake sysfs root for the unit tests: a temporary directory holding
 * cpu0's directory and, if asked, a tsc_freq_khz file in it.
 */
#ifndef FAKE_SYSFS_H
#define FAKE_SYSFS_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../testlib/harness.h"
#include "tsc_clock_page.h"

/* A fake sysfs root holding 'khz' (0: no file), its name into dir[size]. */
static inline void fake_root(struct __test_metadata *_metadata, char *dir,
			     size_t size, uint64_t khz)
{
	char path[256];
	FILE *f;

	ASSERT_GT(size, (size_t)snprintf(dir, size, "/tmp/libtsc-freq.XXXXXX"));
	ASSERT_NE(NULL, mkdtemp(dir));
	snprintf(path, sizeof(path), "mkdir -p %s/devices/system/cpu/cpu0", dir);
	ASSERT_EQ(0, system(path));
	if (!khz)
		return;
	snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu0/tsc_freq_khz", dir);
	f = fopen(path, "w");
	ASSERT_NE(NULL, f);
	fprintf(f, "%llu\n", (unsigned long long)khz);
	ASSERT_EQ(0, fclose(f));
}

/* Write content to dir/rel, its directories made. */
static inline void fake_put(struct __test_metadata *_metadata, const char *dir,
			    const char *rel, const char *content)
{
	char path[256], cmd[300];
	FILE *f;

	snprintf(path, sizeof(path), "%s%s", dir, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p $(dirname %s)", path);
	ASSERT_EQ(0, system(cmd));
	f = fopen(path, "w");
	ASSERT_NE(NULL, f);
	fputs(content, f);
	ASSERT_EQ(0, fclose(f));
}

/* dir/rel holding content, or no such file for NULL. */
static inline void fake_set(struct __test_metadata *_metadata, const char *dir,
			    const char *rel, const char *content)
{
	char path[256];

	snprintf(path, sizeof(path), "%s%s", dir, rel);
	unlink(path);
	if (content)
		fake_put(_metadata, dir, rel, content);
}

/* page as the module would publish it, a clock page file at path (the rest of its 4096 zero). */
static inline void fake_page_publish(struct __test_metadata *_metadata, const char *path,
				     const struct tscfk_clock_page *page)
{
	char buf[4096] = { 0 };
	int fd = open(path, O_WRONLY | O_CREAT, 0644);

	ASSERT_LE(0, fd);
	memcpy(buf, page, sizeof(*page));
	ASSERT_EQ((ssize_t)sizeof(buf), pwrite(fd, buf, sizeof(buf), 0));
	close(fd);
}

static inline void remove_root(const char *dir)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
}

#endif /* FAKE_SYSFS_H */
