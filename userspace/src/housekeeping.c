// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The CPUs a thread of the library's may run on without disturbing the
 * caller's: the online ones that are neither isolated (isolcpus=, an
 * isolated cpuset partition) nor nohz_full, as the kernel lists them in
 * sysfs.  The disciplined clock's helper runs there (discipline.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/*
 * A list absent (an older kernel, no NO_HZ_FULL) or empty: no CPU.  So is
 * "(null)", which nohz_full reads on kernels whose cpumasks are allocated
 * (CPUMASK_OFFSTACK) when none was given at boot.
 */
int tsc__read_cpulist(const char *root, const char *rel, cpu_set_t *set, bool must)
{
	char path[4096], buf[4096];
	size_t len = 0;
	int err = tsc__read_value(root, rel, path, sizeof(path), buf, sizeof(buf), &len);

	CPU_ZERO(set);
	if (err == -ENOENT && !must) {
		tsc__clear_error();
		return 0;
	}
	if (!err && !must && !strncmp(buf, "(null)", 6))
		return 0;
	if (!err && (err = tsc__parse_cpulist(buf, len, set)))
		tsc__fail(err, "%s: %s", path, tsc_last_error());
	return err;
}

int tsc__housekeeping_cpus(const char *root, cpu_set_t *set)
{
	cpu_set_t isolated, nohz_full;
	int err = tsc__read_cpulist(root, "/devices/system/cpu/online", set, true);

	if (!err)
		err = tsc__read_cpulist(root, "/devices/system/cpu/isolated", &isolated, false);
	if (!err)
		err = tsc__read_cpulist(root, "/devices/system/cpu/nohz_full", &nohz_full, false);
	if (err)
		return err;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &isolated) || CPU_ISSET(cpu, &nohz_full))
			CPU_CLR(cpu, set);
	if (!CPU_COUNT(set))
		return tsc__fail(-ENODEV, "every online CPU is isolated or nohz_full");
	return 0;
}
