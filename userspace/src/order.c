// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * How the ordered system clocks read the TSC: lfence; rdtsc, or rdtscp.
 * Each waits for every earlier load before it reads the counter, which is
 * what "a reading taken after seeing another thread's is never earlier"
 * needs; which costs less differs by CPU (on an Emerald Rapids class Xeon
 * rdtscp by about 5%), so where both order, the cheaper one is measured.
 *
 * Where LFENCE does not order: Intel's always does.  AMD's does where the
 * CPU says it always serialises dispatch (CPUID 0x80000021 EAX[2], Zen 3
 * on), or where the kernel set the MSR bit that makes it, which userspace
 * cannot read: without the CPUID bit, rdtscp, which AMD documents as
 * waiting for every older instruction to retire.
 */
#include <cpuid.h>
#include <errno.h>
#include <string.h>

#include "internal.h"

/* CPUID 0x80000001 EDX[27] */
#define RDTSCP_BIT	(1u << 27)
/* CPUID 0x80000021 EAX[2]: LFENCE is always dispatch serialising. */
#define LFENCE_SERIALIZING_BIT	(1u << 2)

void tsc__order_cpu(struct tsc__order_cpu *o)
{
	unsigned int a, b, c, d, max_ext;
	char vendor[13] = { 0 };

	memset(o, 0, sizeof(*o));
	if (!__get_cpuid(0, &a, &b, &c, &d))
		return;
	memcpy(vendor, &b, 4);
	memcpy(vendor + 4, &d, 4);
	memcpy(vendor + 8, &c, 4);
	o->amd = !strcmp(vendor, "AuthenticAMD") || !strcmp(vendor, "HygonGenuine");
	max_ext = __get_cpuid_max(0x80000000, NULL);
	if (max_ext >= 0x80000001 && __get_cpuid(0x80000001, &a, &b, &c, &d))
		o->rdtscp = !!(d & RDTSCP_BIT);
	if (max_ext >= 0x80000021 && __get_cpuid(0x80000021, &a, &b, &c, &d))
		o->lfence_serializing = !!(a & LFENCE_SERIALIZING_BIT);
}

/*
 * Whether rdtscp costs less than lfence; rdtsc here: the least time of 64
 * back-to-back reads of each, taken in turns, over 16 turns.
 */
static bool rdtscp_cheaper(void)
{
	uint64_t best[2] = { UINT64_MAX, UINT64_MAX };

	for (int k = 0; k < 16; k++)
		for (int v = 0; v < 2; v++) {
			uint64_t t0 = tsc_rdtsc_ordered(), t1;

			for (int i = 0; i < 64; i++)
				(void)(v ? tsc__rdtscp() : tsc_rdtsc_ordered());
			t1 = tsc_rdtsc_ordered();
			if (t1 - t0 < best[v])
				best[v] = t1 - t0;
		}
	return best[1] < best[0];
}

int tsc__order_pick(const struct tsc__order_cpu *cpu, enum tsc_sysclock_order want,
		    uint32_t *use_rdtscp)
{
	switch (want) {
	case TSC_ORDER_LFENCE:
		*use_rdtscp = 0;
		return 0;
	case TSC_ORDER_RDTSCP:
		if (!cpu->rdtscp)
			return tsc__fail(-EOPNOTSUPP, "order: this CPU has no rdtscp (CPUID 0x80000001 EDX[27])");
		*use_rdtscp = 1;
		return 0;
	case TSC_ORDER_AUTO:
		break;
	default:
		return tsc__fail(-EINVAL, "order %d: not one of enum tsc_sysclock_order", (int)want);
	}
	if (!cpu->rdtscp)
		*use_rdtscp = 0;
	else if (cpu->amd && !cpu->lfence_serializing)
		*use_rdtscp = 1;
	else
		*use_rdtscp = rdtscp_cheaper();
	return 0;
}
