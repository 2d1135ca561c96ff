// SPDX-License-Identifier: GPL-2.0
/* What compat.h builds cpu_is_isolated() from where it is missing. */
#include <linux/sched/isolation.h>

bool tscfk_probe(int cpu);
bool tscfk_probe(int cpu)
{
	return housekeeping_test_cpu(cpu, HK_TYPE_DOMAIN) &&
	       housekeeping_test_cpu(cpu, HK_TYPE_TICK);
}
