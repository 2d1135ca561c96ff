// SPDX-License-Identifier: GPL-2.0
/* Before 6.16: rdmsrl_safe() and rdmsrl_safe_on_cpu(). */
#include <linux/types.h>
#include <asm/msr.h>

int tscfk_probe(unsigned int msr, u64 *v);
int tscfk_probe(unsigned int msr, u64 *v)
{
	return rdmsrl_safe(msr, v) ?: rdmsrl_safe_on_cpu(0, msr, v);
}
