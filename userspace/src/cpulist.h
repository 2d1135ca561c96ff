/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * A CPU set as the kernel writes a CPU list ("0-3,5"), cut short at size:
 * header-only, so that the tools, which link libtsc's shared library and
 * see none of its internals, print CPU sets the same way.
 */
#ifndef TSC_CPULIST_H
#define TSC_CPULIST_H

#include <sched.h>
#include <stdio.h>

static inline void tsc__format_cpulist(const cpu_set_t *set, char *out, size_t size)
{
	size_t n = 0;

	out[0] = '\0';
	for (int cpu = 0; cpu < CPU_SETSIZE && n < size; cpu++) {
		int last = cpu;

		if (!CPU_ISSET(cpu, set))
			continue;
		while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
			last++;
		n += (size_t)snprintf(out + n, size - n, last == cpu ? "%s%d" : "%s%d-%d",
				      n ? "," : "", cpu, last);
		cpu = last;
	}
}

#endif /* TSC_CPULIST_H */
