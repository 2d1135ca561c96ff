// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Can TSC readings taken on different CPUs be compared?  What the CPU
 * promises (CPUID), what the kernel thinks (its clocksource, and the
 * module's trust files), and the CPUs' offsets: from the module when it is
 * loaded, else measured here (probe.c).  The verdict says yes only when
 * nothing speaks against it, and says why either way.
 */
#include <cpuid.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define CPU_DIR		"/devices/system/cpu"
#define MAX_VALUE	32

static void cpu_features(struct tsc_report *r)
{
	unsigned int a, b, c, d, max = __get_cpuid_max(0x80000000, NULL);

	if (max >= 0x80000007 && __get_cpuid(0x80000007, &a, &b, &c, &d))
		r->invariant_tsc = d & (1u << 8);
	if (max >= 0x80000001 && __get_cpuid(0x80000001, &a, &b, &c, &d))
		r->rdtscp = d & (1u << 27);
	if (__get_cpuid_max(0, NULL) >= 7) {
		__cpuid_count(7, 0, a, b, c, d);
		r->tsc_adjust = b & (1u << 1);
	}
}

/* A word from a file, newline dropped; "" if there is none. */
static void read_word(const char *root, const char *rel, char *out, size_t size)
{
	char path[4096], buf[MAX_VALUE];
	size_t len;

	out[0] = '\0';
	if (tsc__read_value(root, rel, path, sizeof(path), buf, sizeof(buf), &len))
		return;
	buf[strcspn(buf, "\n")] = '\0';
	snprintf(out, size, "%s", buf);
}

static int read_cpu(const char *root, struct tsc_cpu_offset *c)
{
	char rel[128], status[MAX_VALUE];
	uint64_t rounds;
	int err;

	snprintf(rel, sizeof(rel), CPU_DIR "/cpu%d/tsc/status", c->cpu);
	read_word(root, rel, status, sizeof(status));
	if (!strcmp(status, "reference"))
		c->status = TSC_CPU_REFERENCE;
	else if (!strcmp(status, "measured"))
		c->status = TSC_CPU_MEASURED;
	else
		return 0;	/* unmeasured, no such CPU, or not the module's */

#define FIELD(name, fn, dst)						\
	snprintf(rel, sizeof(rel), CPU_DIR "/cpu%d/tsc/" name, c->cpu);	\
	err = fn(root, rel, dst);					\
	if (err)							\
		goto unmeasured;
	FIELD("offset_ticks", tsc__read_s64, &c->offset);
	FIELD("offset_min_ticks", tsc__read_s64, &c->min);
	FIELD("offset_max_ticks", tsc__read_s64, &c->max);
	FIELD("rounds", tsc__read_u64, &rounds);
	FIELD("consistent", tsc__read_flag, &c->consistent);
#undef FIELD
	if (c->min > c->offset || c->offset > c->max || rounds > UINT32_MAX) {
		err = tsc__fail(-EINVAL, "cpu%d: the module's offset files contradict each other",
				c->cpu);
		goto unmeasured;
	}
	c->rounds = (uint32_t)rounds;
	return 0;

unmeasured:
	/* ENODATA: it went offline while we read; otherwise a real problem. */
	c->status = TSC_CPU_UNMEASURED;
	return err == -ENODATA ? 0 : err;
}

/*
 * In one generation, the reference is the CPU that reads "reference",
 * and no other does; an unmeasured one is a reference gone offline since.
 */
static int check_reference(const struct tsc_report *r, int64_t ref)
{
	if (ref < -1 || ref >= (int64_t)r->ncpus)
		return tsc__fail(-EINVAL, "tsc/reference_cpu %lld: no such CPU here (%u)",
				 (long long)ref, r->ncpus);
	for (unsigned int i = 0; i < r->ncpus; i++)
		if ((r->cpus[i].status == TSC_CPU_REFERENCE) != ((int64_t)i == ref) &&
		    r->cpus[i].status != TSC_CPU_UNMEASURED)
			return tsc__fail(-EINVAL, "cpu%u reads %s, but tsc/reference_cpu is %lld",
					 i, (int64_t)i == ref ? "measured" : "reference",
					 (long long)ref);
	return 0;
}

/*
 * The module's files, as one measurement: read its generation before and
 * after, and read again if a new measurement landed in between.
 */
static int module_offsets(const char *root, struct tsc_report *r)
{
	for (int tries = 0; tries < 5; tries++) {
		uint64_t gen, gen_after, skew;
		bool monotonic;
		int64_t ref;
		int err;

		if ((err = tsc__read_u64(root, CPU_DIR "/tsc/generation", &gen)) ||
		    (err = tsc__read_s64(root, CPU_DIR "/tsc/reference_cpu", &ref)) ||
		    (err = tsc__read_u64(root, CPU_DIR "/tsc/max_skew_ticks", &skew)) ||
		    (err = tsc__read_flag(root, CPU_DIR "/tsc/monotonic_vs_reference", &monotonic)))
			return err;
		for (unsigned int i = 0; i < r->ncpus; i++) {
			r->cpus[i] = (struct tsc_cpu_offset){ .cpu = (int)i };
			err = read_cpu(root, &r->cpus[i]);
			if (err)
				return err;
		}
		if ((err = tsc__read_u64(root, CPU_DIR "/tsc/generation", &gen_after)))
			return err;
		if (gen == gen_after) {
			err = check_reference(r, ref);
			if (err)
				return err;
			r->offsets_source = TSC_OFFSETS_MODULE;
			r->reference_cpu = (int)ref;
			r->max_skew_ticks = skew;
			r->monotonic = monotonic;
			return 0;
		}
	}
	return tsc__fail(-EAGAIN, "the module measured again while it was read, five times");
}

/*
 * The CPUs online in the sysfs being read; where it has no list (a fake
 * root without one), every CPU it has: a CPU taken for online that is
 * not can only make the verdict "no", never "yes" untested.
 */
static void online_cpus(const char *root, unsigned int ncpus, cpu_set_t *set)
{
	if (!tsc__read_cpulist(root, CPU_DIR "/online", set, true))
		return;
	tsc__clear_error();
	CPU_ZERO(set);
	for (unsigned int i = 0; i < ncpus && i < CPU_SETSIZE; i++)
		CPU_SET(i, set);
}

/* The reference is at offset zero from itself, exactly: consistent. */
static void set_reference(struct tsc_report *r, int cpu)
{
	r->offsets_source = TSC_OFFSETS_USERSPACE;
	r->reference_cpu = cpu;
	r->cpus[cpu].status = TSC_CPU_REFERENCE;
	r->cpus[cpu].consistent = true;
}

/*
 * The online CPUs' offsets, measured by threads pinned to them: those of
 * this thread's affinity mask.  *outside counts the online CPUs it leaves
 * out, which stay unmeasured: with any, nothing is proven of them.
 */
static int userspace_offsets(const char *root, struct tsc_report *r, unsigned int min_rounds,
			     unsigned int max_ms, unsigned int *outside, cpu_set_t *measured)
{
	struct tscfk_offset_est *est;
	unsigned int n = 0, online = 0;
	struct tscfk_skew skew;
	cpu_set_t set, on;
	bool warp;
	int *cpus, err;

	CPU_ZERO(measured);
	if (sched_getaffinity(0, sizeof(set), &set))
		return tsc__fail(-errno, "sched_getaffinity: %s", strerror(errno));
	online_cpus(root, r->ncpus, &on);
	cpus = calloc(r->ncpus, sizeof(*cpus));
	est = calloc(r->ncpus, sizeof(*est));
	if (!cpus || !est) {
		free(cpus);
		free(est);
		return tsc__fail(-ENOMEM, "out of memory");
	}
	for (unsigned int i = 0; i < r->ncpus && i < CPU_SETSIZE; i++) {
		if (!CPU_ISSET(i, &on))
			continue;
		online++;
		if (CPU_ISSET(i, &set))
			cpus[n++] = (int)i;
	}
	*outside = online - n;
	if (online < 2 || n < 2) {
		/* One CPU online: nothing to compare; one of several: nothing proven. */
		if (online >= 2) {
			r->offsets_source = TSC_OFFSETS_USERSPACE;
			if (n)
				set_reference(r, cpus[0]);
		}
		free(cpus);
		free(est);
		return 0;
	}
	err = tsc__probe_offsets(cpus, n, 0, min_rounds, max_ms, est, &warp);
	if (!err) {
		bool all = true;

		set_reference(r, cpus[0]);
		tscfk_skew_init(&skew);
		/* cpus[0] is the reference, measured against by the others. */
		for (unsigned int i = 1; i < n; i++) {
			struct tscfk_offset_result res;

			if (tscfk_offset_result(&est[i], &res)) {
				r->cpus[cpus[i]] = (struct tsc_cpu_offset){
					.cpu = cpus[i], .status = TSC_CPU_MEASURED,
					.offset = res.offset, .min = res.min, .max = res.max,
					.rounds = res.rounds, .consistent = res.consistent,
				};
				tscfk_skew_add(&skew, &res);
			} else {
				all = false;
			}
		}
		r->max_skew_ticks = tscfk_skew_max(&skew);
		r->monotonic = all && !*outside && skew.monotonic && !warp;
		for (unsigned int i = 0; i < n && all; i++)
			CPU_SET(cpus[i], measured);
	}
	free(cpus);
	free(est);
	return err;
}

/* Append "; "-separated text to the verdict. */
static void say(struct tsc_report *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void say(struct tsc_report *r, const char *fmt, ...)
{
	size_t used = strlen(r->verdict);
	va_list ap;

	if (used + 3 >= sizeof(r->verdict))
		return;
	if (r->verdict[used - 1] != ' ')
		used += (size_t)snprintf(r->verdict + used, sizeof(r->verdict) - used, "; ");
	va_start(ap, fmt);
	vsnprintf(r->verdict + used, sizeof(r->verdict) - used, fmt, ap);
	va_end(ap);
}

static void judge(struct tsc_report *r, unsigned int outside)
{
	static const char *const by[] = {
		[TSC_OFFSETS_NONE] = "", [TSC_OFFSETS_MODULE] = " (measured by the module)",
		[TSC_OFFSETS_USERSPACE] = " (measured in userspace)",
	};
	unsigned int compared = 0, blame = 0;

	for (unsigned int i = 0; i < r->ncpus; i++)
		if (r->cpus[i].status == TSC_CPU_REFERENCE) {
			compared++;
		} else if (r->cpus[i].status == TSC_CPU_MEASURED) {
			compared++;
			if (!r->cpus[i].consistent)
				blame++;
		}
	/* Online CPUs left out make monotonic false (userspace_offsets()). */
	r->trustworthy = r->invariant_tsc && r->kernel_unstable != 1 &&
			 (r->offsets_source == TSC_OFFSETS_NONE || r->monotonic);
	snprintf(r->verdict, sizeof(r->verdict), "%s: ", r->trustworthy ? "yes" : "no");
	if (!r->invariant_tsc)
		say(r, "the CPU does not promise an invariant TSC (CPUID 0x80000007 EDX[8])");
	if (r->kernel_unstable == 1)
		say(r, "the kernel marked the TSC unstable");
	if (outside)
		say(r, "%u online CPU(s) outside this thread's CPU affinity, not measured", outside);
	if (r->offsets_source != TSC_OFFSETS_NONE && !r->monotonic && r->reference_cpu < 0) {
		say(r, "no CPU measured against a reference yet");
	} else if (r->offsets_source != TSC_OFFSETS_NONE && !r->monotonic) {
		if (blame)
			say(r, "%u CPU(s) showed offsets that moved during the measurement", blame);
		say(r, "not every CPU proven never to step back against cpu%d%s", r->reference_cpu,
		    by[r->offsets_source]);
	}
	if (r->offsets_source == TSC_OFFSETS_NONE)
		say(r, "a single CPU: nothing to compare");
	else if (r->monotonic)
		say(r, "%u CPUs within %llu ticks of each other, none stepping back against cpu%d%s",
		    compared, (unsigned long long)r->max_skew_ticks, r->reference_cpu,
		    by[r->offsets_source]);
	if (r->kernel_unstable == -1)
		say(r, "the kernel's own verdict is unknown (tsc_freq_khz not loaded)");
	if (r->clocksource[0] && strcmp(r->clocksource, "tsc") != 0)
		say(r, "the kernel's clocksource is %s, not tsc", r->clocksource);
}

struct ropts {
	const char *sysfs_root;
	bool userspace;
	unsigned int max_ms, min_rounds;
};

int tsc_report_get(struct tsc_report *r, const struct tsc_report_opts *opts)
{
	struct ropts o = { 0 };
	long conf = sysconf(_SC_NPROCESSORS_CONF);
	unsigned int outside = 0;
	char path[4096], buf[256];
	struct tsc__skew_key key;
	cpu_set_t measured;
	bool unstable, keyed = false;
	unsigned int n;
	size_t len;
	int err;

	tsc__clear_error();
	memset(r, 0, sizeof(*r));
	r->reference_cpu = -1;
	r->kernel_unstable = -1;
	if (opts) {
		err = tsc__opts_check(opts, opts->sz, sizeof(*opts), "TSC_REPORT_OPTS");
		if (err)
			return err;
		o.sysfs_root = TSC__OPT(opts, struct tsc_report_opts, sysfs_root);
		o.userspace = TSC__OPT(opts, struct tsc_report_opts, userspace);
		o.max_ms = TSC__OPT(opts, struct tsc_report_opts, max_ms);
		o.min_rounds = TSC__OPT(opts, struct tsc_report_opts, min_rounds);
	}
	/* The CPUs of the sysfs being read (a fake one too), else sysconf's. */
	if (!tsc__read_value(o.sysfs_root, CPU_DIR "/possible", path, sizeof(path), buf,
			     sizeof(buf), &len) && !tsc__parse_cpulist_count(buf, len, &n))
		conf = n;
	if (conf < 1 || conf > 65536)
		return tsc__fail(-EINVAL, "%ld CPUs?", conf);
	r->ncpus = (unsigned int)conf;
	r->cpus = calloc(r->ncpus, sizeof(*r->cpus));
	if (!r->cpus)
		return tsc__fail(-ENOMEM, "out of memory");
	for (unsigned int i = 0; i < r->ncpus; i++)
		r->cpus[i].cpu = (int)i;

	cpu_features(r);
	tsc__clocksource(o.sysfs_root, r->clocksource, sizeof(r->clocksource));
	/*
	 * No file: no module.  A file that cannot be read, or reads other than
	 * 0 or 1, is the module's (or claims to be) and says nothing usable:
	 * an error, not a module taken for absent.
	 */
	err = tsc__read_flag(o.sysfs_root, CPU_DIR "/tsc/unstable", &unstable);
	if (!err)
		r->kernel_unstable = unstable;
	else if (err != -ENOENT)
		goto fail;

	if (r->kernel_unstable != -1 && !o.userspace) {
		err = module_offsets(o.sysfs_root, r);
	} else {
		keyed = !tsc__skew_key(o.sysfs_root, &key, true);
		err = userspace_offsets(o.sysfs_root, r, o.min_rounds ? o.min_rounds : 256,
					o.max_ms ? o.max_ms : 1000, &outside, &measured);
	}
	if (err)
		goto fail;
	judge(r, outside);
	/* The bounded readers' skew where the module gives none: this, proven or not. */
	if (r->offsets_source == TSC_OFFSETS_USERSPACE)
		tsc__bound_note_skew(o.sysfs_root, keyed ? &key : NULL, &measured,
				     r->max_skew_ticks, r->trustworthy);
	tsc__clear_error();
	return 0;

fail:
	tsc_report_free(r);
	return err;
}

void tsc_report_free(struct tsc_report *r)
{
	free(r->cpus);
	r->cpus = NULL;
	r->ncpus = 0;
}
