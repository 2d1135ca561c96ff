// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Reading sysfs files that hold one value, and parsing that value exactly
 * as the kernel writes it.  Every file may be missing, empty, unreadable,
 * huge or full of junk: each case is an error with a reason, never a guess.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define MAX_NUMBER	32	/* a 64-bit number and a newline need 21 bytes */

const char *tsc__sysfs_root(const char *root)
{
	const char *env;

	if (root)
		return root;
	/* secure_getenv: a set-uid program must not be steered by its caller. */
	env = secure_getenv("TSC_SYSFS_ROOT");
	return env && *env ? env : "/sys";
}

int tsc__read_value(const char *root, const char *rel, char *path, size_t path_size,
		    char *buf, size_t size, size_t *len)
{
	ssize_t n;
	int fd, err;

	if ((size_t)snprintf(path, path_size, "%s%s", tsc__sysfs_root(root), rel) >= path_size)
		return tsc__fail(-ENAMETOOLONG, "sysfs root too long");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		err = -errno;
		return tsc__fail(err, "%s: %s", path, strerror(-err));
	}
	/* One read more than fits tells a file that is too long. */
	n = read(fd, buf, size);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return tsc__fail(err, "%s: %s", path, strerror(-err));
	if ((size_t)n >= size)
		return tsc__fail(-EFBIG, "%s: longer than %zu bytes", path, size - 1);
	buf[n] = '\0';
	*len = (size_t)n;
	return 0;
}

/*
 * Decimal digits, an optional minus sign when 'neg' is allowed, no leading
 * zero, at most one newline after, nothing else.
 */
static int parse(const char *buf, size_t len, bool neg, uint64_t *mag, bool *minus)
{
	size_t i = 0, start;
	uint64_t v = 0;

	if (len && buf[len - 1] == '\n')
		len--;
	if (!len)
		return tsc__fail(-ENODATA, "empty");
	*minus = neg && buf[0] == '-';
	start = i = *minus;
	for (; i < len && buf[i] >= '0' && buf[i] <= '9'; i++) {
		uint64_t d = (uint64_t)(buf[i] - '0');

		if (v > UINT64_MAX / 10 || (v == UINT64_MAX / 10 && d > UINT64_MAX % 10))
			return tsc__fail(-ERANGE, "too large a number");
		v = v * 10 + d;
	}
	if (i == start || i != len)
		return tsc__fail(-EINVAL, "not a plain decimal number (byte %zu is 0x%02x)",
				 i, i < len ? (unsigned char)buf[i] : 0);
	if (len - start > 1 && buf[start] == '0')
		return tsc__fail(-EINVAL, "leading zero");
	/* The kernel never writes "-0": found by value_fuzz. */
	if (*minus && v == 0)
		return tsc__fail(-EINVAL, "negative zero");
	*mag = v;
	return 0;
}

int tsc__parse_u64(const char *buf, size_t len, uint64_t *val)
{
	bool minus;

	return parse(buf, len, false, val, &minus);
}

int tsc__parse_s64(const char *buf, size_t len, int64_t *val)
{
	uint64_t mag;
	bool minus;
	int err = parse(buf, len, true, &mag, &minus);

	if (err)
		return err;
	/* mag and minus are set: parse() returned 0 (see the CPU list's note). */
	/* NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
	if (mag > (uint64_t)INT64_MAX + minus)
		return tsc__fail(-ERANGE, "beyond 64-bit signed");
	*val = minus ? (int64_t)(0 - mag) : (int64_t)mag;
	return 0;
}

int tsc__parse_khz(const char *buf, size_t len, uint64_t *khz)
{
	int err = tsc__parse_u64(buf, len, khz);

	if (!err && *khz == 0)
		return tsc__fail(-ERANGE, "zero");
	return err;
}

/*
 * A kernel CPU list ("0-3,5\n", as in devices/system/cpu/possible): the
 * highest CPU in it plus one.  Strict, as everything here.
 */
int tsc__parse_cpulist_count(const char *buf, size_t len, unsigned int *count)
{
	uint64_t max = 0, v;
	size_t i = 0;

	if (len && buf[len - 1] == '\n')
		len--;
	if (!len)
		return tsc__fail(-ENODATA, "empty CPU list");
	while (i < len) {
		size_t start = i;

		while (i < len && buf[i] >= '0' && buf[i] <= '9')
			i++;
		if (i == start || tsc__parse_u64(buf + start, i - start, &v))
			return tsc__fail(-EINVAL, "not a CPU list (byte %zu)", start);
		/*
		 * v is set: tsc__parse_u64() returned 0.  The analyzer sees
		 * no further than error.c, so not that tsc__fail() returns
		 * its err, never 0.
		 */
		/* NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
		if (v > 65535)
			return tsc__fail(-ERANGE, "CPU %llu", (unsigned long long)v);
		if (v > max)
			max = v;
		if (i < len && ((buf[i] != ',' && buf[i] != '-') || i + 1 == len))
			return tsc__fail(-EINVAL, "not a CPU list (byte %zu)", i);
		if (i < len)
			i++;	/* a separator, with a number after it */
	}
	*count = (unsigned int)max + 1;
	return 0;
}

/*
 * A kernel CPU list ("0-3,5\n"; "\n" for none, as devices/system/cpu/isolated
 * often is) into set.  CPUs from CPU_SETSIZE on: -ERANGE.
 */
int tsc__parse_cpulist(const char *buf, size_t len, cpu_set_t *set)
{
	size_t i = 0;

	CPU_ZERO(set);
	if (len && buf[len - 1] == '\n')
		len--;
	while (i < len) {
		uint64_t lo, hi;
		size_t start = i;

		while (i < len && buf[i] >= '0' && buf[i] <= '9')
			i++;
		if (i == start || tsc__parse_u64(buf + start, i - start, &lo))
			return tsc__fail(-EINVAL, "not a CPU list (byte %zu)", start);
		hi = lo;
		if (i < len && buf[i] == '-') {
			start = ++i;
			while (i < len && buf[i] >= '0' && buf[i] <= '9')
				i++;
			if (i == start || tsc__parse_u64(buf + start, i - start, &hi) || hi < lo)
				return tsc__fail(-EINVAL, "not a CPU list (byte %zu)", start);
		}
		/* lo and hi are set: tsc__parse_u64() returned 0 (see above). */
		/* NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
		if (hi >= CPU_SETSIZE)
			return tsc__fail(-ERANGE, "CPU %llu: beyond %d", (unsigned long long)hi,
					 CPU_SETSIZE);
		for (uint64_t cpu = lo; cpu <= hi; cpu++)
			CPU_SET((int)cpu, set);
		if (i < len && (buf[i] != ',' || i + 1 == len))
			return tsc__fail(-EINVAL, "not a CPU list (byte %zu)", i);
		if (i < len)
			i++;	/* a comma, with a number after it */
	}
	return 0;
}

/* A file of one number: read_value's errors, or the parser's with the path. */
int tsc__read_u64(const char *root, const char *rel, uint64_t *v)
{
	char path[4096], buf[MAX_NUMBER];
	size_t len = 0;	/* the analyser cannot see that tsc__fail() returns err */
	int err = tsc__read_value(root, rel, path, sizeof(path), buf, sizeof(buf), &len);

	if (!err && (err = tsc__parse_u64(buf, len, v)))
		tsc__fail(err, "%s: %s", path, tsc_last_error());
	return err;
}

int tsc__read_s64(const char *root, const char *rel, int64_t *v)
{
	char path[4096], buf[MAX_NUMBER];
	size_t len = 0;	/* the analyser cannot see that tsc__fail() returns err */
	int err = tsc__read_value(root, rel, path, sizeof(path), buf, sizeof(buf), &len);

	if (!err && (err = tsc__parse_s64(buf, len, v)))
		tsc__fail(err, "%s: %s", path, tsc_last_error());
	return err;
}

/*
 * The module writes its flags as "0" or "1" and nothing else: another
 * number means the file is not what the reader thinks, and taking it for
 * either answer would be a guess.
 */
int tsc__read_flag(const char *root, const char *rel, bool *v)
{
	uint64_t n = 0;	/* the analyser cannot see that an error leaves it unread */
	int err = tsc__read_u64(root, rel, &n);

	if (err)
		return err;
	if (n > 1)
		return tsc__fail(-EINVAL, "%s%s: %llu, not 0 or 1", tsc__sysfs_root(root), rel,
				 (unsigned long long)n);
	*v = n == 1;
	return 0;
}

void tsc__clocksource(const char *root, char *out, size_t size)
{
	char path[4096], buf[64];
	size_t len;

	out[0] = '\0';
	if (tsc__read_value(root, "/devices/system/clocksource/clocksource0/current_clocksource",
			    path, sizeof(path), buf, sizeof(buf), &len))
		return;
	buf[strcspn(buf, "\n")] = '\0';
	snprintf(out, size, "%s", buf);
}

/*
 * Whether the kernel offers tsc as a clocksource: 1 or 0, -1 if the list
 * is unreadable.  It drops tsc from the list when it marks it unstable.
 */
int tsc__tsc_available(const char *root)
{
	char path[4096], buf[256];
	size_t len;

	if (tsc__read_value(root, "/devices/system/clocksource/clocksource0/available_clocksource",
			    path, sizeof(path), buf, sizeof(buf), &len))
		return -1;
	for (char *save = NULL, *w = strtok_r(buf, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
		if (!strcmp(w, "tsc"))
			return 1;
	return 0;
}

/* Whether the first CPU's flags in /proc/cpuinfo have flag: 1, 0, -1. */
static int cpuinfo_flag(const char *flag)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = -1;

	if (!f)
		return -1;
	while (found < 0 && getline(&line, &cap, f) > 0) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "flags", 5) != 0 || !colon)
			continue;
		found = 0;
		for (char *save = NULL, *w = strtok_r(colon + 1, " \n", &save); w;
		     w = strtok_r(NULL, " \n", &save))
			if (!strcmp(w, flag))
				found = 1;
	}
	free(line);
	(void)fclose(f);
	return found;
}

int tsc__kernel_known_freq(const char *root)
{
	uint64_t v = 0;	/* the analyser cannot see that an error leaves it unread */
	int err = tsc__read_u64(root, "/devices/system/cpu/tsc/tsc_known_freq", &v);

	tsc__clear_error();
	if (!err)
		return v <= 1 ? (int)v : -1;
	/* /proc/cpuinfo is this machine's: no answer for another root. */
	if (err != -ENOENT || strcmp(tsc__sysfs_root(root), "/sys") != 0)
		return -1;
	return cpuinfo_flag("tsc_known_freq");
}
