// SPDX-License-Identifier: GPL-2.0
/* 6.2, and Debian's 6.1 through a stable update: cpu_is_isolated(). */
#include <linux/sched/isolation.h>

bool tscfk_probe(int cpu);
bool tscfk_probe(int cpu)
{
	return cpu_is_isolated(cpu);
}
