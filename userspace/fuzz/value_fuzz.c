// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The sysfs value parsers on any bytes: they must never crash; what the
 * number parsers accept must be exactly a plain decimal that round-trips
 * (printed back, it gives the input, its one newline aside), and a CPU
 * list accepted must count 1 to 65536 CPUs, and read back as the same set
 * once formatted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const uint8_t *data, size_t size, const char *back)
{
	size_t len = strlen(back);

	if ((size != len && !(size == len + 1 && data[len] == '\n')) ||
	    memcmp(back, data, len) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	char back[32];
	uint64_t u;
	int64_t s;

	if (!tsc__parse_u64(buf, size, &u)) {
		snprintf(back, sizeof(back), "%llu", (unsigned long long)u);
		round_trip(data, size, back);
	}
	if (!tsc__parse_s64(buf, size, &s)) {
		snprintf(back, sizeof(back), "%lld", (long long)s);
		round_trip(data, size, back);
	}
	if (!tsc__parse_khz(buf, size, &u) && u == 0)
		abort();
	{
		unsigned int cpus = 0;

		if (!tsc__parse_cpulist_count(buf, size, &cpus) && (cpus < 1 || cpus > 65536))
			abort();
	}
	{
		/* A list the set takes, formatted back, reads as the same set. */
		cpu_set_t set, again;

		if (!tsc__parse_cpulist(buf, size, &set)) {
			char list[8192];

			tsc__format_cpulist(&set, list, sizeof(list));
			if (tsc__parse_cpulist(list, strlen(list), &again) || !CPU_EQUAL(&set, &again))
				abort();
		}
	}
	return 0;
}
