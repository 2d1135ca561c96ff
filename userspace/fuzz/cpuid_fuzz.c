// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The CPUID leaf decoders on any register values: never crash, and any
 * frequency they accept is within 1 MHz..20 GHz and consistent.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct tsc_freq *f)
{
	if (!f->den || f->hz < 1e6 || f->hz > 2e10 ||
	    f->num / f->den < 1000000 || f->num / f->den > 20000000000ull)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tsc__cpuid l15, l16;
	struct tsc_freq f;

	if (size < 2 * sizeof(struct tsc__cpuid))
		return 0;
	memcpy(&l15, data, sizeof(l15));
	memcpy(&l16, data + sizeof(l15), sizeof(l16));
	if (!tsc__freq_from_leaf15(&f, &l15, &l16))
		check(&f);
	if (!tsc__freq_from_leaf15(&f, &l15, NULL))
		check(&f);
	if (!tsc__freq_from_leaf40000010(&f, &l15))
		check(&f);
	return 0;
}
