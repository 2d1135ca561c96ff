// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc_freq_get() ranks the sources by evidence, on machines played
 * through an injected CPUID, without the module: the hypervisor's leaf
 * (of a hypervisor known to define it) before a leaf 0x15 passed through
 * to the guest, leaf 0x15's crystal, stated to its tolerance, before a
 * calibration, and leaf 0x16's nominal MHz never the answer.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_sysfs.h"
#include "internal.h"
#include "../../testlib/harness.h"

struct leaf {
	uint32_t leaf;
	struct tsc__cpuid r;
};

/* A machine: the leaves it has, the rest read as zeros. */
struct machine {
	const struct leaf *leaves;
	size_t n;
};

static void machine_cpuid(void *ctx, uint32_t leaf, struct tsc__cpuid *r)
{
	const struct machine *m = ctx;

	for (size_t i = 0; i < m->n; i++)
		if (m->leaves[i].leaf == leaf)
			*r = m->leaves[i].r;
}

#define HV_BIT		(1u << 31)
/* "KVMKVMKVM\0\0\0" and "Microsoft Hv" as EBX, ECX, EDX. */
#define SIG_KVM		.ebx = 0x4b4d564b, .ecx = 0x564b4d56, .edx = 0x0000004d
#define SIG_HYPERV	.ebx = 0x7263694d, .ecx = 0x666f736f, .edx = 0x76482074

/* Skylake-SP: leaf 0x15 without the crystal, a 2200 MHz base in 0x16. */
static const struct leaf skylake_sp[] = {
	{ 0, { .eax = 0x16 } },
	{ 0x15, { .eax = 2, .ebx = 168, .ecx = 0 } },
	{ 0x16, { .eax = 2200, .ebx = 3700, .ecx = 100 } },
};

/* A part that enumerates its crystal: 24 MHz * 176 / 2 = 2112 MHz. */
static const struct leaf crystal[] = {
	{ 0, { .eax = 0x16 } },
	{ 0x15, { .eax = 2, .ebx = 176, .ecx = 24000000 } },
	{ 0x16, { .eax = 2100 } },
};

/* That part's leaf 0x15 passed through to a KVM guest whose TSC is scaled. */
static const struct leaf kvm_guest[] = {
	{ 0, { .eax = 0x16 } },
	{ 1, { .ecx = HV_BIT } },
	{ 0x15, { .eax = 2, .ebx = 176, .ecx = 24000000 } },
	{ 0x40000000, { .eax = 0x40000010, SIG_KVM } },
	{ 0x40000010, { .eax = 2600002 } },
};

/* Hyper-V, whose leaves reach 0x40000010 with other meanings. */
static const struct leaf hyperv_guest[] = {
	{ 0, { .eax = 0x16 } },
	{ 1, { .ecx = HV_BIT } },
	{ 0x15, { .eax = 2, .ebx = 176, .ecx = 24000000 } },
	{ 0x40000000, { .eax = 0x4000000b, SIG_HYPERV } },
	{ 0x40000010, { .eax = 1234567 } },
};

/* A leaf 0x40000010 but no hypervisor bit: a CPU, not a guest. */
static const struct leaf no_hv_bit[] = {
	{ 0, { .eax = 0x16 } },
	{ 0x40000000, { .eax = 0x40000010, SIG_KVM } },
	{ 0x40000010, { .eax = 2600002 } },
};

#define MACHINE(name) { (name), sizeof(name) / sizeof((name)[0]) }

FIXTURE(rank) {
	char dir[64];	/* a sysfs root without the module */
};

FIXTURE_SETUP(rank)
{
	fake_root(_metadata, self->dir, sizeof(self->dir), 0);
}

FIXTURE_TEARDOWN(rank)
{
	remove_root(self->dir);
}

/*
 * tsc__freq_get() on machine m, calibrating 20 ms at most, its nominal
 * values (made up, not this machine's rate) taken as they are.
 */
static int get_on(struct tsc_freq *f, const char *dir, const struct machine *m)
{
	TSC_OPTS(o, .sysfs_root = dir, .calibrate_max_ms = 20, .trust_nominal = true);
	struct tsc__machine src = { machine_cpuid, (void *)m, NULL };

	return tsc__freq_get(f, &o, &src);
}

TEST_F(rank, nominal_base_mhz_is_never_the_answer)
{
	const struct machine m = MACHINE(skylake_sp);
	struct tsc_freq f;

	ASSERT_EQ(0, get_on(&f, self->dir, &m)) TH_LOG("%s", tsc_last_error());
	TH_LOG("%s: %s", tsc_source_name(f.source), f.detail);
	EXPECT_EQ(TSC_SOURCE_CALIBRATION, f.source);
	EXPECT_NE(NULL, strstr(f.detail, "leaf 0x16's nominal 2200 MHz is "));
}

TEST_F(rank, crystal_with_its_tolerance)
{
	const struct machine m = MACHINE(crystal);
	struct tsc_freq f;

	ASSERT_EQ(0, get_on(&f, self->dir, &m)) TH_LOG("%s", tsc_last_error());
	TH_LOG("%s: %s", tsc_source_name(f.source), f.detail);
	EXPECT_EQ(TSC_SOURCE_CPUID, f.source);
	EXPECT_EQ(2112000000u, f.num / f.den);
	EXPECT_EQ(0u, f.num % f.den);
	EXPECT_EQ(TSC__CRYSTAL_PPM, f.precision_ppm);
	EXPECT_LT(0.0, f.precision_ppm);
}

TEST_F(rank, hypervisor_before_a_passed_through_leaf_15)
{
	const struct machine m = MACHINE(kvm_guest);
	struct tsc_freq f;

	ASSERT_EQ(0, get_on(&f, self->dir, &m)) TH_LOG("%s", tsc_last_error());
	TH_LOG("%s: %s", tsc_source_name(f.source), f.detail);
	EXPECT_EQ(TSC_SOURCE_HYPERVISOR, f.source);
	EXPECT_EQ(2600002000u, f.num / f.den);
}

TEST_F(rank, unknown_hypervisor_is_not_believed)
{
	const struct machine m = MACHINE(hyperv_guest);
	struct tsc__machine src = { machine_cpuid, (void *)&m, NULL };
	struct tsc_freq f;

	EXPECT_EQ(-ENODATA, tsc__freq_from_hypervisor(&f, &src));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "\"Microsoft Hv\" is not one known"))
		TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(0, get_on(&f, self->dir, &m)) TH_LOG("%s", tsc_last_error());
	TH_LOG("%s: %s", tsc_source_name(f.source), f.detail);
	EXPECT_EQ(TSC_SOURCE_CPUID, f.source);
	EXPECT_NE(NULL, strstr(f.detail, "Microsoft Hv"));
}

TEST_F(rank, hypervisor_leaf_needs_the_hypervisor_bit)
{
	const struct machine m = MACHINE(no_hv_bit);
	struct tsc__machine src = { machine_cpuid, (void *)&m, NULL };
	struct tsc_freq f;

	EXPECT_EQ(-ENODATA, tsc__freq_from_hypervisor(&f, &src));
	EXPECT_NE(NULL, strstr(tsc_last_error(), "bit 31 clear"));
	ASSERT_EQ(0, get_on(&f, self->dir, &m)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(TSC_SOURCE_CALIBRATION, f.source);
}

/*
 * When a calibration is all there is, the detail keeps every other
 * source's reason whole, a long one included (a sysfs root of 300
 * characters), so that the reason a user most needs is never the one cut.
 */
TEST(every_reason_in_full)
{
	const struct leaf hv_no_crystal[] = {
		{ 0, { .eax = 0x15 } },
		{ 1, { .ecx = HV_BIT } },
		{ 0x40000000, { .eax = 0x4000000b, SIG_HYPERV } },
	};
	const struct machine m = MACHINE(hv_no_crystal);
	struct tsc__machine src = { machine_cpuid, (void *)&m, NULL };
	char root[320] = "/nonexistent/", why[4][TSC__REASON_SIZE];
	TSC_OPTS(o, .sysfs_root = root, .calibrate_max_ms = 20);
	TSC_OPTS(perf, .source = TSC_SOURCE_PERF);
	struct tsc_freq f, g;
	bool unrefined;

	memset(root + strlen(root), 'x', 300);
	EXPECT_GT(0, tsc__freq_from_sysfs(&g, root, &unrefined));
	snprintf(why[0], sizeof(why[0]), "%s", tsc_last_error());
	EXPECT_GT(0, tsc__freq_from_hypervisor(&g, &src));
	snprintf(why[1], sizeof(why[1]), "%s", tsc_last_error());
	EXPECT_GT(0, tsc__freq_from_cpuid(&g, &src));
	snprintf(why[2], sizeof(why[2]), "%s", tsc_last_error());
	EXPECT_GT(0, tsc__freq_get(&g, &perf, &src));
	snprintf(why[3], sizeof(why[3]), "%s", tsc_last_error());
	ASSERT_EQ(0, tsc__freq_get(&f, &o, &src)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(TSC_SOURCE_CALIBRATION, f.source);
	for (int i = 0; i < 4; i++) {
		EXPECT_NE(NULL, strstr(f.detail, why[i]))
			TH_LOG("reason '%s' is not whole in '%s'", why[i], f.detail);
	}
}

/* A perf page whose conversion says 2599.999 MHz: shift 31. */
static int perf_page(struct tsc_freq *f)
{
	return tsc__freq_from_perf_mult(f, (uint32_t)((1000000ull << 31) / 2599999), 31);
}

/* The kernel's conversion on the perf page: after its file, before the rest. */
TEST_F(rank, perf_page_after_the_module)
{
	const struct machine m = MACHINE(kvm_guest);
	struct tsc__machine src = { machine_cpuid, (void *)&m, perf_page };
	TSC_OPTS(o, .sysfs_root = self->dir, .calibrate_max_ms = 20, .trust_nominal = true);
	struct tsc_freq f;
	char dir[64];

	ASSERT_EQ(0, tsc__freq_get(&f, &o, &src)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(TSC_SOURCE_PERF, f.source);
	EXPECT_GT(1.0, fabs(f.hz - 2599999e3) / 2599999e3 * 1e6);
	EXPECT_NE(NULL, strstr(f.detail, "tsc_freq_khz module loaded?")) TH_LOG("%s", f.detail);
	fake_root(_metadata, dir, sizeof(dir), 2600000);
	o.sysfs_root = dir;
	ASSERT_EQ(0, tsc__freq_get(&f, &o, &src)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(TSC_SOURCE_SYSFS, f.source);
	remove_root(dir);
}

/* A rate given as a crystal's ratio (m[0]) and as a KVM leaf (m[1]). */
struct machines_at {
	struct leaf crystal[2], kvm[3];
	struct machine m[2];
};

static void machines_at(struct machines_at *h, uint32_t khz)
{
	*h = (struct machines_at){
		.crystal = {
			{ 0, { .eax = 0x15 } },
			{ 0x15, { .eax = 1, .ebx = khz, .ecx = 1000 } },
		},
		.kvm = {
			{ 1, { .ecx = HV_BIT } },
			{ 0x40000000, { .eax = 0x40000010, SIG_KVM } },
			{ 0x40000010, { .eax = khz } },
		},
	};
	h->m[0] = (struct machine)MACHINE(h->crystal);
	h->m[1] = (struct machine)MACHINE(h->kvm);
}

/*
 * By default a nominal value must agree with a short calibration: this
 * machine's own rate, given as a crystal's ratio and as a KVM leaf, is
 * taken and said to agree; the same 1% off is skipped for the calibration,
 * with the numbers.
 */
static void nominal_checked(struct __test_metadata *_metadata, const char *dir,
			    double scale, bool taken)
{
	TSC_OPTS(o, .sysfs_root = dir, .calibrate_max_ms = 20);
	struct tsc_freq cal, f;
	struct machines_at here;

	ASSERT_EQ(0, tsc_freq_calibrate(&cal, 0, 50)) TH_LOG("%s", tsc_last_error());
	machines_at(&here, (uint32_t)(cal.hz * scale / 1e3 + 0.5));
	for (int i = 0; i < 2; i++) {
		struct tsc__machine src = { machine_cpuid, (void *)&here.m[i], NULL };

		ASSERT_EQ(0, tsc__freq_get(&f, &o, &src)) TH_LOG("%s", tsc_last_error());
		TH_LOG("%s: %s", tsc_source_name(f.source), f.detail);
		if (taken) {
			EXPECT_EQ(i ? TSC_SOURCE_HYPERVISOR : TSC_SOURCE_CPUID, f.source);
			EXPECT_NE(NULL, strstr(f.detail, "; a 20 ms calibration agrees: "));
		} else {
			EXPECT_EQ(TSC_SOURCE_CALIBRATION, f.source);
			EXPECT_NE(NULL, strstr(f.detail, "but a 20 ms calibration found"));
			EXPECT_NE(NULL, strstr(f.detail, "ppm apart, more than 100"));
		}
	}
}

TEST_F(rank, nominal_value_a_calibration_confirms)
{
	nominal_checked(_metadata, self->dir, 1.0, true);
}

TEST_F(rank, nominal_value_a_calibration_contradicts)
{
	nominal_checked(_metadata, self->dir, 1.01, false);
}

/*
 * An agreement is a confirmation only where the calibration rests on
 * another reference than the value: this machine's own rate, as a crystal,
 * a KVM leaf or the kernel's file, under a sysfs (through TSC_SYSFS_ROOT,
 * which the calibration reads too) whose clocksource and tsc_known_freq
 * each case sets.  What the calibration is relative to follows the
 * clocksource; the detail says "the same evidence" exactly where it is.
 */
TEST_F(rank, same_evidence_is_no_confirmation)
{
	static const struct {
		const char *clocksource, *known;	/* NULL: no file */
		int machine;				/* crystal, KVM leaf, file */
		enum tsc_reference cal_ref;
		const char *same;			/* NULL: a confirmation */
	} cases[] = {
		{ "tsc", "1", 0, TSC_REFERENCE_KERNEL, "which the kernel took as known (tsc_known_freq)" },
		{ "tsc", "0", 0, TSC_REFERENCE_KERNEL, NULL },
		{ "tsc", NULL, 0, TSC_REFERENCE_KERNEL, "which nothing says the kernel measured" },
		{ "hpet", "1", 0, TSC_REFERENCE_CLOCKSOURCE, NULL },
		{ "acpi_pm", NULL, 1, TSC_REFERENCE_CLOCKSOURCE, NULL },
		{ "kvm-clock", "0", 1, TSC_REFERENCE_HYPERVISOR, "the TSC at the hypervisor's rate, as this figure gives it" },
		{ "kvm-clock", "0", 0, TSC_REFERENCE_HYPERVISOR, NULL },
		{ "tsc", "0", 2, TSC_REFERENCE_KERNEL, "the kernel's tsc_khz, this value's own origin" },
		{ "kvm-clock", "1", 2, TSC_REFERENCE_HYPERVISOR, "from which the kernel took its tsc_khz as known" },
		{ "hpet", "0", 2, TSC_REFERENCE_CLOCKSOURCE, NULL },
		/* No clocksource to be read: it may be tsc, never another oscillator. */
		{ NULL, "1", 0, TSC_REFERENCE_KERNEL, "which the kernel took as known (tsc_known_freq)" },
	};
	struct machines_at here;
	struct tsc_freq cal, f;
	char khz_text[32];
	uint32_t khz;

	ASSERT_EQ(0, tsc_freq_calibrate(&cal, 0, 50)) TH_LOG("%s", tsc_last_error());
	khz = (uint32_t)(cal.hz / 1e3 + 0.5);
	snprintf(khz_text, sizeof(khz_text), "%u\n", khz);
	machines_at(&here, khz);
	ASSERT_EQ(0, setenv("TSC_SYSFS_ROOT", self->dir, 1));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool file = cases[i].machine == 2;
		/* With the kernel's file, the crystal's machine: the file wins. */
		struct tsc__machine src = { machine_cpuid, (void *)&here.m[cases[i].machine == 1],
					    NULL };
		/* The kernel's file is checked only when asked: verify. */
		TSC_OPTS(o, .sysfs_root = self->dir, .calibrate_max_ms = 20, .verify = file);

		fake_set(_metadata, self->dir, "/devices/system/clocksource/clocksource0/current_clocksource",
			 cases[i].clocksource);
		fake_set(_metadata, self->dir, "/devices/system/cpu/tsc/tsc_known_freq", cases[i].known);
		fake_set(_metadata, self->dir, "/devices/system/cpu/cpu0/tsc_freq_khz",
			 file ? khz_text : NULL);
		ASSERT_EQ(0, tsc_freq_calibrate(&cal, 0, 20)) TH_LOG("%s", tsc_last_error());
		EXPECT_EQ(cases[i].cal_ref, cal.precision_of) TH_LOG("%s", cal.detail);
		ASSERT_EQ(0, tsc__freq_get(&f, &o, &src)) TH_LOG("%s", tsc_last_error());
		TH_LOG("%s, known %s: %s", cases[i].clocksource ? cases[i].clocksource : "-",
		       cases[i].known ? cases[i].known : "-",
		       f.detail);
		EXPECT_EQ(file ? TSC_SOURCE_SYSFS : cases[i].machine ? TSC_SOURCE_HYPERVISOR :
			  TSC_SOURCE_CPUID, f.source);
		EXPECT_NE(NULL, strstr(f.detail, file ? "; verified: a calibration agrees" :
				       "; a 20 ms calibration agrees: "));
		EXPECT_EQ(cases[i].same != NULL, strstr(f.detail, ", the same evidence, not a confirmation") != NULL);
		if (cases[i].same)
			EXPECT_NE(NULL, strstr(f.detail, cases[i].same));
	}
	unsetenv("TSC_SYSFS_ROOT");
}

/* The kernel's value, when there is one, outranks them all. */
TEST_F(rank, kernel_first)
{
	const struct machine m = MACHINE(kvm_guest);
	char dir[64];
	struct tsc_freq f;

	fake_root(_metadata, dir, sizeof(dir), 2600000);
	ASSERT_EQ(0, get_on(&f, dir, &m)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(TSC_SOURCE_SYSFS, f.source);
	EXPECT_EQ(2600000000u, f.num / f.den);
	remove_root(dir);
}

TEST_HARNESS_MAIN
