// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Errors: a negative errno returned, and the reason kept per thread for
 * tsc_last_error(), so that the library never has to print.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char reason[TSC__REASON_SIZE];

/*
 * The arguments may include tsc_last_error() itself, to wrap a reason in
 * more context: format elsewhere first, as the buffers must not overlap.
 */
int tsc__fail(int err, const char *fmt, ...)
{
	char next[sizeof(reason)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(next, sizeof(next), fmt, ap);
	va_end(ap);
	memcpy(reason, next, sizeof(reason));
	return err;
}

int tsc__opts_check(const void *opts, size_t sz, size_t known, const char *macro)
{
	const unsigned char *p = opts;

	if (sz < sizeof(size_t))
		return tsc__fail(-EINVAL, "opts->sz is %zu: declare options with %s()", sz,
				 macro);
	for (size_t i = known; i < sz; i++)
		if (p[i])
			return tsc__fail(-EINVAL, "opts sets a field at byte %zu, which this libtsc does not know (it knows %zu bytes): the program was built against a newer libtsc.h",
					 i, known);
	return 0;
}

void tsc__clear_error(void)
{
	reason[0] = '\0';
}

const char *tsc_last_error(void)
{
	return reason;
}

const char *tsc_source_name(enum tsc_source source)
{
	switch (source) {
	case TSC_SOURCE_NONE:
		return "none";
	case TSC_SOURCE_SYSFS:
		return "sysfs";
	case TSC_SOURCE_CPUID:
		return "cpuid";
	case TSC_SOURCE_HYPERVISOR:
		return "hypervisor";
	case TSC_SOURCE_CALIBRATION:
		return "calibration";
	case TSC_SOURCE_PERF:
		return "perf";
	}
	return "unknown";
}

const char *tsc_reference_name(enum tsc_reference reference)
{
	switch (reference) {
	case TSC_REFERENCE_UNSTATED:
		return "unstated";
	case TSC_REFERENCE_KERNEL:
		return "kernel";
	case TSC_REFERENCE_HYPERVISOR:
		return "hypervisor";
	case TSC_REFERENCE_CLOCKSOURCE:
		return "clocksource";
	case TSC_REFERENCE_TRUE:
		return "true";
	}
	return "unknown";
}
