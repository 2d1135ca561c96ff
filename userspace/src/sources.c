// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The frequency as others state it: the kernel (through tsc_freq_khz's
 * file), the hypervisor (CPUID 0x40000010) and the CPU (CPUID 0x15).
 * Every value is checked before it is believed, and CPUID comes through
 * struct tsc__machine, so that tests can play any machine.
 */
#include <cpuid.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define FREQ_FILE	"/devices/system/cpu/cpu0/tsc_freq_khz"
#define UNSTABLE_FILE	"/devices/system/cpu/tsc/unstable"
#define MAX_FILE	64	/* a kHz value and a newline need 21 bytes */

/*
 * A second after boot the kernel refines its quick estimate of the TSC's
 * rate against a better clock, unless it has marked the TSC unstable by
 * then ("Don't bother refining TSC on unstable systems", tsc.c); and it
 * keeps a refinement only within 1% of the estimate.  So when the module
 * says the TSC is unstable, tsc_khz may be that estimate, good to 1% (seen:
 * 2598022 kHz for a 2600002 kHz TSC, 762 ppm off, in a QEMU guest).  The
 * file cannot say whether the marking came before the refinement or
 * after; a reason to doubt is as good as the marking itself.  A rate the
 * kernel took as known (known: 1) it never estimates nor refines: no doubt.
 */
static bool maybe_unrefined(const char *root, int known, char *why, size_t size)
{
	uint64_t unstable;
	int err;

	if (known == 1)
		return false;
	err = tsc__read_u64(root, UNSTABLE_FILE, &unstable);
	if (err == -ENOENT)
		return false;	/* no module's verdict to go by */
	if (!err && unstable == 0)
		return false;
	if (err)
		snprintf(why, size, "tsc/unstable unreadable: %s", tsc_last_error());
	else if (unstable > 1)
		snprintf(why, size, "tsc/unstable reads %llu, not 0 or 1",
			 (unsigned long long)unstable);
	else
		snprintf(why, size, "the kernel marked the TSC unstable");
	return true;
}

int tsc__freq_from_sysfs(struct tsc_freq *f, const char *root, bool *unrefined)
{
	static const char *const how[] = {
		"how the kernel came by it unknown",
		"measured by the kernel at boot",
		"taken by the kernel as known, never measured (tsc_known_freq)",
	};
	char path[4096], buf[MAX_FILE + 1], why[256];
	uint64_t khz;
	size_t len;
	int known;
	int err;

	tsc__clear_error();
	*unrefined = false;
	err = tsc__read_value(root, FREQ_FILE, path, sizeof(path), buf, sizeof(buf), &len);
	if (err == -ENOENT)
		return tsc__fail(err, "%s (is the tsc_freq_khz module loaded?)", tsc_last_error());
	if (err)
		return err;
	err = tsc__parse_khz(buf, len, &khz);
	if (err)
		return tsc__fail(err, "%s: %s", path, tsc_last_error());
	err = tsc__freq_set(f, TSC_SOURCE_SYSFS, khz > UINT64_MAX / 1000 ? 0 : khz * 1000,
			    1, tsc__kernel_rounding(khz) * 1e6, TSC_REFERENCE_KERNEL);
	if (err)
		return tsc__fail(err, "%s: %llu kHz is not within 1 MHz..20 GHz", path,
				 (unsigned long long)khz);
	/* tsc_khz itself: the kernel rounds it into its clocksource's mult, nothing more. */
	f->bound_ppm = f->precision_ppm;
	known = tsc__kernel_known_freq(root);
	/* Long roots are cut: detail is for people, the value is exact. */
	snprintf(f->detail, TSC__REASON_SIZE, "%.200s: %llu kHz, %s", path,
		 (unsigned long long)khz, how[known + 1]);
	*unrefined = maybe_unrefined(root, known, why, sizeof(why));
	if (*unrefined) {
		/* The kernel's estimate, 1% from the truth: not its rounding. */
		f->precision_ppm = TSC__UNREFINED_PPM;
		f->precision_of = TSC_REFERENCE_TRUE;
		f->bound_ppm = 0;
		snprintf(f->detail, TSC__REASON_SIZE,
			 "%.80s: %llu kHz, maybe not refined (%.100s): good to 1%%",
			 path, (unsigned long long)khz, why);
	}
	return 0;
}

int tsc_freq_from_sysfs(struct tsc_freq *f, const char *root)
{
	bool unrefined;

	return tsc__freq_from_sysfs(f, root, &unrefined);
}

/*
 * Leaf 0x15: TSC = crystal * EBX / EAX.  The ratio is exact, the crystal
 * is not: TSC__CRYSTAL_PPM.  Without the crystal (ECX 0, as on Skylake-SP
 * and Cascade Lake servers) there is no answer here.  Leaf 0x16's base
 * MHz is a nominal figure, which Linux only starts from and refines:
 * "Detected 2100.000 MHz processor", then "Refined TSC clocksource
 * calibration: 2095.077 MHz" on one such server, 2344 ppm apart.  It is
 * named in the reason, for the calibration that takes over to confirm.
 */
int tsc__freq_from_leaf15(struct tsc_freq *f, const struct tsc__cpuid *l15,
			  const struct tsc__cpuid *l16)
{
	int err;

	if (!l15 || !l15->eax || !l15->ebx)
		return tsc__fail(-ENODATA, "cpuid: leaf 0x15 does not enumerate the TSC ratio");
	if (!l15->ecx && l16 && (l16->eax & 0xffff))
		return tsc__fail(-ENODATA, "cpuid: leaf 0x15 has no crystal frequency (leaf 0x16's base %u MHz is nominal, not the TSC's rate)",
				 l16->eax & 0xffff);
	if (!l15->ecx)
		return tsc__fail(-ENODATA, "cpuid: leaf 0x15 has no crystal frequency");
	err = tsc__freq_set(f, TSC_SOURCE_CPUID, (uint64_t)l15->ecx * l15->ebx,
			    l15->eax, TSC__CRYSTAL_PPM, TSC_REFERENCE_TRUE);
	if (err)
		return err;
	snprintf(f->detail, TSC__REASON_SIZE,
		 "cpuid 0x15: eax=%u ebx=%u ecx=%u (a crystal: +-%.0f ppm)",
		 l15->eax, l15->ebx, l15->ecx, TSC__CRYSTAL_PPM);
	return 0;
}

int tsc__freq_from_leaf40000010(struct tsc_freq *f,
				const struct tsc__cpuid *leaf)
{
	int err;

	if (!leaf || !leaf->eax)
		return tsc__fail(-ENODATA, "hypervisor: leaf 0x40000010 gives no TSC frequency");
	err = tsc__freq_set(f, TSC_SOURCE_HYPERVISOR, (uint64_t)leaf->eax * 1000, 1,
			    500.0 / leaf->eax * 1e3, TSC_REFERENCE_HYPERVISOR);
	if (err)
		return err;
	snprintf(f->detail, TSC__REASON_SIZE, "cpuid 0x40000010: %u kHz",
		 leaf->eax);
	return 0;
}

static void cpu_cpuid(void *ctx, uint32_t leaf, struct tsc__cpuid *r)
{
	(void)ctx;
	__cpuid_count(leaf, 0, r->eax, r->ebx, r->ecx, r->edx);
}

const struct tsc__machine tsc__this_machine = {
	.cpuid = cpu_cpuid, .perf = tsc__freq_from_perf_page,
};

static void cpuid(const struct tsc__machine *src, uint32_t leaf,
		  struct tsc__cpuid *r)
{
	*r = (struct tsc__cpuid){ 0 };
	src->cpuid(src->ctx, leaf, r);
}

int tsc__freq_from_cpuid(struct tsc_freq *f, const struct tsc__machine *src)
{
	struct tsc__cpuid l0, l15, l16;

	tsc__clear_error();
	cpuid(src, 0, &l0);
	if (l0.eax < 0x15)
		return tsc__fail(-ENODATA, "cpuid: no leaf 0x15 (highest leaf 0x%x)", l0.eax);
	cpuid(src, 0x15, &l15);
	if (l0.eax >= 0x16)
		cpuid(src, 0x16, &l16);
	return tsc__freq_from_leaf15(f, &l15, l0.eax >= 0x16 ? &l16 : NULL);
}

uint32_t tsc__base_mhz(const struct tsc__machine *src)
{
	struct tsc__cpuid l0, l16;

	cpuid(src, 0, &l0);
	if (l0.eax < 0x16)
		return 0;
	cpuid(src, 0x16, &l16);
	return l16.eax & 0xffff;
}

int tsc_freq_from_cpuid(struct tsc_freq *f)
{
	return tsc__freq_from_cpuid(f, &tsc__this_machine);
}

/*
 * The hypervisors that define leaf 0x40000010 as the TSC's (and the
 * bus's) kHz: VMware, which introduced it; KVM, where QEMU fills it in
 * when it knows the guest's TSC rate (vmware-cpuid-freq); ACRN, whose
 * timing leaf it is (Linux's acrn_get_tsc_khz()).  Others give the range
 * other meanings (Hyper-V's leaves run to 0x400000ff): not believed.
 */
static const char *const tsc_leaf_hypervisors[] = {
	"VMwareVMware", "KVMKVMKVM", "ACRNACRNACRN",
};

int tsc__freq_from_hypervisor(struct tsc_freq *f, const struct tsc__machine *src)
{
	struct tsc__cpuid l1, hv, leaf;
	char sig[13] = "";
	bool known = false;

	tsc__clear_error();
	cpuid(src, 1, &l1);
	if (!(l1.ecx & (1u << 31)))
		return tsc__fail(-ENODATA, "hypervisor: none (cpuid 1 ecx bit 31 clear)");
	cpuid(src, 0x40000000, &hv);
	memcpy(sig, &hv.ebx, 4);
	memcpy(sig + 4, &hv.ecx, 4);
	memcpy(sig + 8, &hv.edx, 4);
	for (size_t i = 0; i < sizeof(sig) - 1; i++)
		if (sig[i] && (sig[i] < ' ' || sig[i] > '~'))
			sig[i] = '?';
	for (size_t i = 0; i < sizeof(tsc_leaf_hypervisors) / sizeof(tsc_leaf_hypervisors[0]); i++)
		known |= !strcmp(sig, tsc_leaf_hypervisors[i]);
	if (!known)
		return tsc__fail(-ENODATA, "hypervisor: \"%s\" is not one known to give the TSC's rate in leaf 0x40000010",
				 sig);
	if (hv.eax < 0x40000010)
		return tsc__fail(-ENODATA, "hypervisor: %s has no leaf 0x40000010 (highest 0x%x)",
				 sig, hv.eax);
	cpuid(src, 0x40000010, &leaf);
	return tsc__freq_from_leaf40000010(f, &leaf);
}

int tsc_freq_from_hypervisor(struct tsc_freq *f)
{
	return tsc__freq_from_hypervisor(f, &tsc__this_machine);
}
