// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Picking the best source of the TSC frequency, or the one asked for.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Options, with defaults for what the caller's struct does not have. */
struct opts {
	const struct tsc__machine *cpuid;
	const char *sysfs_root;
	enum tsc_source source;
	double calibrate_ppm, verify_ppm;
	unsigned int calibrate_max_ms;
	bool verify, trust_nominal;
};

static int read_opts(const struct tsc_opts *o, struct opts *out)
{
	*out = (struct opts){ 0 };
	if (o) {
		int err = tsc__opts_check(o, o->sz, sizeof(*o), "TSC_OPTS");

		if (err)
			return err;
		out->sysfs_root = TSC__OPT(o, struct tsc_opts, sysfs_root);
		out->source = TSC__OPT(o, struct tsc_opts, source);
		out->calibrate_ppm = TSC__OPT(o, struct tsc_opts, calibrate_ppm);
		out->calibrate_max_ms = TSC__OPT(o, struct tsc_opts, calibrate_max_ms);
		out->verify = TSC__OPT(o, struct tsc_opts, verify);
		out->verify_ppm = TSC__OPT(o, struct tsc_opts, verify_ppm);
		out->trust_nominal = TSC__OPT(o, struct tsc_opts, trust_nominal);
	}
	/* Negated, so that a NaN, which no comparison would ever exceed, fails too. */
	if (!(out->verify_ppm >= 0) || out->verify_ppm > 1e6)
		return tsc__fail(-EINVAL, "verify_ppm %g: not in [0, 1e6] (0: 100 ppm)",
				 out->verify_ppm);
	if (out->verify_ppm == 0)
		out->verify_ppm = 100;
	return 0;
}

/* One source; *doubt: its value may be far worse than it looks. */
static int from_source(struct tsc_freq *f, enum tsc_source source,
		       const struct opts *o, bool *doubt)
{
	*doubt = false;
	switch (source) {
	case TSC_SOURCE_SYSFS:
		return tsc__freq_from_sysfs(f, o->sysfs_root, doubt);
	case TSC_SOURCE_CPUID:
		return tsc__freq_from_cpuid(f, o->cpuid);
	case TSC_SOURCE_HYPERVISOR:
		return tsc__freq_from_hypervisor(f, o->cpuid);
	case TSC_SOURCE_CALIBRATION:
		return tsc_freq_calibrate(f, o->calibrate_ppm, o->calibrate_max_ms);
	case TSC_SOURCE_PERF:
		if (!o->cpuid->perf)
			return tsc__fail(-ENODATA, "perf: no perf page on this machine");
		return o->cpuid->perf(f);
	case TSC_SOURCE_NONE:
		break;
	}
	return tsc__fail(-EINVAL, "unknown source %d", (int)source);
}

/* Append a reason to the list of skipped sources (it fits: see below). */
static void note_skipped(char *skipped, size_t size, size_t *used, const char *why)
{
	*used += (size_t)snprintf(skipped + *used, size - *used, "%s%s",
				  *used ? "; " : "", why);
	if (*used >= size)
		*used = size - 1;
}

/*
 * Leaf 0x16's base MHz is never the answer, only a prior: say how far the
 * calibration that took its place found it, first, where it is not cut.
 */
static void compare_base_mhz(struct tsc_freq *f, const struct opts *o)
{
	uint32_t mhz = tsc__base_mhz(o->cpuid);
	struct tsc_freq base = { .num = (uint64_t)mhz * 1000000, .den = 1 };
	size_t len = strlen(f->detail);

	if (mhz)
		snprintf(f->detail + len, sizeof(f->detail) - len,
			 "; leaf 0x16's nominal %u MHz is %+.0f ppm from it", mhz,
			 tsc_freq_diff_ppm(&base, f));
}

/*
 * Best evidence first; each failure's reason is kept in the winner's
 * detail.  The kernel's own value comes first: it is what the kernel's
 * clocks run on.  The module's file gives it in kHz; the perf page gives
 * the kernel's cyc2ns scale built from it, where the kernel lets
 * userspace use it, module or not.  Then the hypervisor's, which knows how it scales the
 * guest's TSC, while a leaf 0x15 passed through from the host does not.
 * Then the crystal of leaf 0x15, then a calibration of our own.  The
 * module's value is no better than 1% when the kernel may never have
 * refined it: every other source goes first, and it is the last resort.
 */
static const enum tsc_source order[] = {
	TSC_SOURCE_SYSFS, TSC_SOURCE_PERF, TSC_SOURCE_HYPERVISOR, TSC_SOURCE_CPUID,
	TSC_SOURCE_CALIBRATION,
};
#define NSOURCES (sizeof(order) / sizeof(order[0]))

/*
 * The winner's account, a nominal value's check or a verification, leaf
 * 0x16's comparison, and every other source's reason, each under
 * TSC__REASON_SIZE with its separator: nothing is cut.
 */
_Static_assert(TSC_DETAIL_SIZE >= (NSOURCES + 2) * (TSC__REASON_SIZE + 32),
	       "struct tsc_freq's detail has room for every source's reason");

/* How long a calibration checks a nominal value for. */
#define NOMINAL_CHECK_MS 20u

/*
 * A calibration that agrees with f is evidence of its own only where the
 * two rest on different references.  On the tsc clocksource it measures
 * the kernel's tsc_khz (CLOCK_MONOTONIC_RAW is the TSC at that rate): the
 * same evidence as a value taken from the kernel, and as a crystal's or a
 * hypervisor's figure that the kernel took as known.  On kvm-clock and
 * the like it measures the hypervisor's rate: the same as its leaf, and as
 * a kernel's tsc_khz taken from it.  A disagreement counts either way: two
 * figures cannot both be the TSC's rate.  same_evidence() says why an
 * agreement is no confirmation, or NULL; note_same_evidence() puts that in
 * f's detail, after the agreement.
 */
static const char *same_evidence(const struct tsc_freq *f, const struct tsc_freq *cal,
				 const struct opts *o)
{
	bool from_kernel = f->source == TSC_SOURCE_SYSFS || f->source == TSC_SOURCE_PERF;
	int known;

	if (f->source == TSC_SOURCE_CALIBRATION)
		return "the same clock as the value's own calibration";
	if (cal->precision_of == TSC_REFERENCE_CLOCKSOURCE)
		return NULL;
	if (cal->precision_of == TSC_REFERENCE_HYPERVISOR && f->source == TSC_SOURCE_HYPERVISOR)
		return "the TSC at the hypervisor's rate, as this figure gives it";
	if (cal->precision_of == TSC_REFERENCE_KERNEL && from_kernel)
		return "the kernel's tsc_khz, this value's own origin";
	/* The kernel's tsc_khz against a figure, or the hypervisor's against the kernel's. */
	if (cal->precision_of == TSC_REFERENCE_HYPERVISOR && !from_kernel)
		return NULL;	/* a crystal passed through: the hypervisor's is another */
	known = tsc__kernel_known_freq(o->sysfs_root);
	if (known == 0)
		return NULL;	/* the kernel measured it against hpet or acpi_pm */
	if (known == 1)
		return cal->precision_of == TSC_REFERENCE_KERNEL ?
		       "the kernel's tsc_khz, which the kernel took as known (tsc_known_freq), from CPUID or the hypervisor" :
		       "the TSC at the hypervisor's rate, from which the kernel took its tsc_khz as known (tsc_known_freq)";
	return cal->precision_of == TSC_REFERENCE_KERNEL ?
	       "the kernel's tsc_khz, which nothing says the kernel measured (no tsc_known_freq)" :
	       "the TSC at the hypervisor's rate, which the kernel's tsc_khz may have come from (no tsc_known_freq)";
}

static void note_same_evidence(struct tsc_freq *f, const struct tsc_freq *cal,
			       const struct opts *o)
{
	const char *why = same_evidence(f, cal, o);
	size_t len = strlen(f->detail);

	if (why)
		snprintf(f->detail + len, sizeof(f->detail) - len,
			 ", the same evidence, not a confirmation: that calibration measured %s", why);
}

/*
 * A crystal's or a hypervisor's figure is what the part or the host says
 * the rate is, not a measurement of it: a guest's TSC may be scaled, a
 * board's crystal off.  A short calibration must not contradict it by more
 * than verify_ppm beyond its own error bar: 0, its detail saying so;
 * -ERANGE with the numbers.  (Without the error bar, a crystal within its
 * tolerance and a noisy calibration would be turned away by chance.)  A
 * calibration that fails leaves the value standing, unverified, and says so.
 */
static int confirm_nominal(struct tsc_freq *f, const struct opts *o)
{
	size_t len = strlen(f->detail);
	struct tsc_freq cal;
	double diff, allowed;

	if (tsc_freq_calibrate(&cal, 0, NOMINAL_CHECK_MS)) {
		snprintf(f->detail + len, sizeof(f->detail) - len, "; not verified: %s",
			 tsc_last_error());
		return 0;
	}
	diff = tsc_freq_diff_ppm(f, &cal);
	allowed = o->verify_ppm + cal.precision_ppm;
	if (!(fabs(diff) <= allowed))
		return tsc__fail(-ERANGE, "%s: %s (%.0f Hz), but a %u ms calibration found %.0f Hz (+-%.2f ppm): %+.0f ppm apart, more than %.0f + %.2f",
				 tsc_source_name(f->source), f->detail, f->hz, NOMINAL_CHECK_MS, cal.hz,
				 cal.precision_ppm, diff, o->verify_ppm, cal.precision_ppm);
	snprintf(f->detail + len, sizeof(f->detail) - len,
		 "; a %u ms calibration agrees: %+.1f ppm (+-%.2f)", NOMINAL_CHECK_MS, diff,
		 cal.precision_ppm);
	note_same_evidence(f, &cal, o);
	return 0;
}

static bool nominal(enum tsc_source source)
{
	return source == TSC_SOURCE_HYPERVISOR || source == TSC_SOURCE_CPUID;
}

static int best_source(struct tsc_freq *f, const struct opts *o)
{
	char skipped[sizeof(f->detail)] = "";
	struct tsc_freq doubted = { 0 };
	size_t used = 0, after_doubted = 0;
	int err = -ENODATA;

	for (size_t i = 0; i < NSOURCES; i++) {
		bool doubt;

		err = from_source(f, order[i], o, &doubt);
		/* An explicit verify calibrates the winner anyway, and longer. */
		if (!err && !doubt && nominal(f->source) && !o->trust_nominal && !o->verify)
			err = confirm_nominal(f, o);
		if (!err && !doubt) {
			if (f->source == TSC_SOURCE_CALIBRATION)
				compare_base_mhz(f, o);
			if (used)
				snprintf(f->detail + strlen(f->detail),
					 sizeof(f->detail) - strlen(f->detail),
					 "; skipped %s", skipped);
			return 0;
		}
		note_skipped(skipped, sizeof(skipped), &used, doubt ? f->detail : tsc_last_error());
		if (doubt && doubted.source == TSC_SOURCE_NONE) {
			doubted = *f;
			after_doubted = used;
		}
	}
	if (doubted.source == TSC_SOURCE_NONE)
		return err;
	/* Its own reason is its detail already: add only the others'. */
	*f = doubted;
	snprintf(f->detail + strlen(f->detail), sizeof(f->detail) - strlen(f->detail),
		 "; nothing better: %s", skipped + after_doubted + (skipped[after_doubted] == ';' ? 2 : 0));
	return 0;
}

int tsc__freq_get(struct tsc_freq *f, const struct tsc_opts *opts,
		  const struct tsc__machine *cpuid)
{
	struct tsc_freq cal;
	struct opts o;
	bool doubt;	/* a forced source is taken as it is */
	double diff;
	int err;

	tsc__clear_error();
	err = read_opts(opts, &o);
	if (err)
		return err;
	o.cpuid = cpuid;
	err = o.source ? from_source(f, o.source, &o, &doubt) : best_source(f, &o);
	if (err)
		return err;
	tsc__clear_error();	/* the skipped sources' reasons are in detail */
	if (!o.verify)
		return 0;

	err = tsc_freq_calibrate(&cal, o.calibrate_ppm, o.calibrate_max_ms);
	if (err)
		return err;
	diff = tsc_freq_diff_ppm(f, &cal);
	if (!(fabs(diff) <= o.verify_ppm))
		return tsc__fail(-ERANGE, "%s says %.0f Hz, a calibration %.0f Hz (+-%.2f ppm): %+.1f ppm apart, more than %.1f",
				 tsc_source_name(f->source), f->hz, cal.hz,
				 cal.precision_ppm, diff, o.verify_ppm);
	snprintf(f->detail + strlen(f->detail), sizeof(f->detail) - strlen(f->detail),
		 "; verified: a calibration agrees, %+.1f ppm (+-%.2f)", diff, cal.precision_ppm);
	note_same_evidence(f, &cal, &o);
	tsc__clear_error();
	return 0;
}

int tsc_freq_get(struct tsc_freq *f, const struct tsc_opts *opts)
{
	return tsc__freq_get(f, opts, &tsc__this_machine);
}
