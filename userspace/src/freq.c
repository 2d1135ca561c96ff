// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * struct tsc_freq: building one, comparing two, and picking the best source.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

__extension__ typedef unsigned __int128 u128;

int tsc__freq_set(struct tsc_freq *f, enum tsc_source source, uint64_t num,
		  uint64_t den, double precision_ppm)
{
	/* Compare num/den with the limits without dividing: no rounding. */
	if (!den || (u128)num < (u128)TSC_MIN_HZ * den ||
	    (u128)num > (u128)TSC_MAX_HZ * den)
		return tsc__fail(-ERANGE, "%s: %llu/%llu Hz is not within 1 MHz..20 GHz",
				 tsc_source_name(source), (unsigned long long)num,
				 (unsigned long long)den);
	f->source = source;
	f->num = num;
	f->den = den;
	f->hz = (double)num / (double)den;
	f->precision_ppm = precision_ppm;
	f->detail[0] = '\0';
	return 0;
}

double tsc_freq_diff_ppm(const struct tsc_freq *a, const struct tsc_freq *b)
{
	/* (a - b) / b = (an * bd - bn * ad) / (bn * ad), each exact in 128 bits. */
	u128 x = (u128)a->num * b->den, y = (u128)b->num * a->den;

	if (x >= y)
		return (double)(x - y) / (double)y * 1e6;
	return -(double)(y - x) / (double)y * 1e6;
}

/* Options, with defaults for what the caller's struct does not have. */
struct opts {
	const char *sysfs_root;
	enum tsc_source source;
	double calibrate_ppm, verify_ppm;
	unsigned int calibrate_max_ms;
	bool verify;
};

static int read_opts(const struct tsc_opts *o, struct opts *out)
{
	*out = (struct opts){ 0 };
	if (o) {
		if (o->sz < sizeof(o->sz))
			return tsc__fail(-EINVAL, "opts->sz is %zu: declare options with TSC_OPTS()",
					 o->sz);
		out->sysfs_root = TSC__OPT(o, struct tsc_opts, sysfs_root);
		out->source = TSC__OPT(o, struct tsc_opts, source);
		out->calibrate_ppm = TSC__OPT(o, struct tsc_opts, calibrate_ppm);
		out->calibrate_max_ms = TSC__OPT(o, struct tsc_opts, calibrate_max_ms);
		out->verify = TSC__OPT(o, struct tsc_opts, verify);
		out->verify_ppm = TSC__OPT(o, struct tsc_opts, verify_ppm);
	}
	if (out->verify_ppm <= 0)
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
		return tsc_freq_from_cpuid(f);
	case TSC_SOURCE_HYPERVISOR:
		return tsc_freq_from_hypervisor(f);
	case TSC_SOURCE_CALIBRATION:
		return tsc_freq_calibrate(f, o->calibrate_ppm, o->calibrate_max_ms);
	case TSC_SOURCE_NONE:
		break;
	}
	return tsc__fail(-EINVAL, "unknown source %d", (int)source);
}

/* Append a reason to the list of skipped sources, cutting what overflows. */
static void note_skipped(char *skipped, size_t size, size_t *used, const char *why)
{
	*used += (size_t)snprintf(skipped + *used, size - *used, "%s%s",
				  *used ? "; " : "", why);
	if (*used >= size)
		*used = size - 1;
}

/*
 * Best first; each failure's reason is kept in the winner's detail.  The
 * module's value is no better than 1% when the kernel may never have
 * refined it: every other source goes first, and it is the last resort.
 */
static int best_source(struct tsc_freq *f, const struct opts *o)
{
	static const enum tsc_source order[] = {
		TSC_SOURCE_SYSFS, TSC_SOURCE_CPUID, TSC_SOURCE_HYPERVISOR,
		TSC_SOURCE_CALIBRATION,
	};
	char skipped[sizeof(f->detail)] = "";
	struct tsc_freq doubted = { 0 };
	size_t used = 0, after_doubted = 0;
	int err = -ENODATA;

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		bool doubt;

		err = from_source(f, order[i], o, &doubt);
		if (!err && !doubt) {
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

int tsc_freq_get(struct tsc_freq *f, const struct tsc_opts *opts)
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
	if (diff > o.verify_ppm || diff < -o.verify_ppm)
		return tsc__fail(-ERANGE, "%s says %.0f Hz, a calibration %.0f Hz (+-%.2f ppm): %+.1f ppm apart, more than %.1f",
				 tsc_source_name(f->source), f->hz, cal.hz,
				 cal.precision_ppm, diff, o.verify_ppm);
	tsc__clear_error();
	return 0;
}
