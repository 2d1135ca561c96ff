// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The tsc_freq_khz file parser on any bytes: it must never crash, and what
 * it accepts must be exactly a plain decimal that round-trips.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t khz = 0;
	char back[32];
	size_t len;

	if (tsc__parse_khz((const char *)data, size, &khz))
		return 0;
	/* Accepted: then printing it gives the input back, newline aside. */
	len = (size_t)snprintf(back, sizeof(back), "%llu", (unsigned long long)khz);
	if (khz == 0 || (size != len && !(size == len + 1 && data[len] == '\n')) ||
	    memcmp(back, data, len))
		abort();
	return 0;
}
