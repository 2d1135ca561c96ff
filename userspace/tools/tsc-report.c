// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc-report: everything libtsc knows about this machine's TSC, and
 * whether readings can be compared across CPUs, for a person (a table),
 * for a program (JSON, schema in tsc-report.schema.json) or for
 * Prometheus (node_exporter's textfile collector).
 *
 * Exit status: 0 trustworthy, 1 not trustworthy, 2 usage, 3 failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "freq_sources.h"
#include "libtsc.h"
#include "report_bound.h"

#define EXIT_UNTRUSTED	1
#define EXIT_FAILURE_	3

static const char usage[] =
"Usage: tsc-report [--json | --prometheus] [--userspace] [--verify]\n"
"                  [--sysfs-root DIR] [--output FILE]\n"
"Report the TSC's frequency, where it comes from, and whether readings can\n"
"be compared across CPUs.\n"
"\n"
"  --json          JSON, as tsc-report.schema.json describes\n"
"  --prometheus    Prometheus text format, for node_exporter's textfile collector\n"
"  --userspace     measure the CPUs' offsets here even if the module is loaded\n"
"  --verify        also calibrate, and fail if the frequency disagrees\n"
"  --sysfs-root DIR  read DIR instead of /sys\n"
"  --output FILE   write FILE atomically (a temporary file beside it, renamed\n"
"                  over it when complete); on failure FILE is left as it was\n"
"  -h, --help      this text;  -V, --version  the version\n"
"\n"
"Exit status: 0 trustworthy across CPUs, 1 not, 2 usage error, 3 failure.\n";

static const char *const status_names[] = {
	[TSC_CPU_UNMEASURED] = "unmeasured",
	[TSC_CPU_REFERENCE] = "reference",
	[TSC_CPU_MEASURED] = "measured",
};

static const char *const offsets_names[] = {
	[TSC_OFFSETS_NONE] = "none",
	[TSC_OFFSETS_MODULE] = "module",
	[TSC_OFFSETS_USERSPACE] = "userspace",
};

static const char *const path_names[] = {
	[TSC_SYSCLOCK_NONE] = "none",
	[TSC_SYSCLOCK_KERNEL] = "kernel",
	[TSC_SYSCLOCK_SYSCALL] = "syscall",
	[TSC_SYSCLOCK_DISCIPLINED] = "disciplined",
};

/* The system clock's path, and the rate it counts the TSC at (0: none). */
struct sysclock_view {
	const struct tsc_sysclock *c;
	uint64_t millihz;
	struct bound_view bound;
};

/* What the precision is of, in words. */
static const char *precision_of(const struct tsc_freq *f)
{
	switch (f->precision_of) {
	case TSC_REFERENCE_KERNEL:
		return "of the tsc clocksource's rate";
	case TSC_REFERENCE_HYPERVISOR:
		return "of the hypervisor's figure";
	case TSC_REFERENCE_CLOCKSOURCE:
		return "of CLOCK_MONOTONIC_RAW";
	case TSC_REFERENCE_TRUE:
		return "of the TSC's true rate";
	case TSC_REFERENCE_UNSTATED:
		break;
	}
	return "of an unstated reference";
}

/*
 * Every source on its own, and a calibration, for the check that they
 * agree: what tsc_freq_get() ranks, each as it answers now.  The
 * calibration is the chosen frequency where that is one (no second
 * measurement), else 200 ms of it, on this thread's CPU only: enough for a
 * precision of a few ppm here, and the service runs every ten minutes.
 */
#define SOURCES_CALIBRATE_MS	200

static void read_sources(struct freq_sources *s, const char *root, const struct tsc_freq *chosen)
{
	struct tsc_freq f;

	s->n = 0;
	if (!tsc_freq_from_sysfs(&f, root))
		s->f[s->n++] = f;
	if (!tsc_freq_from_perf(&f))
		s->f[s->n++] = f;
	if (!tsc_freq_from_hypervisor(&f))
		s->f[s->n++] = f;
	if (!tsc_freq_from_cpuid(&f))
		s->f[s->n++] = f;
	if (chosen->source == TSC_SOURCE_CALIBRATION)
		s->f[s->n++] = *chosen;
	else if (!tsc_freq_calibrate(&f, 0, SOURCES_CALIBRATE_MS))
		s->f[s->n++] = f;
	fs_compare(s);
}

static double ticks_to_ns(const struct tsc_freq *f, double ticks)
{
	return ticks * 1e9 / f->hz;
}

static void print_human(FILE *out, const struct tsc_clock *clk, const struct tsc_report *r,
			const struct sysclock_view *sc, const struct freq_sources *s)
{
	const struct tsc_freq *f = &clk->freq;

	fprintf(out, "Frequency      %.3f Hz +-%.3g ppm %s, from %s", f->hz,
	       f->precision_ppm, precision_of(f), tsc_source_name(f->source));
	if (f->bound_ppm > 0)
		fprintf(out, " (a hard bound)");
	fputc('\n', out);
	fprintf(out, "               %s\n", f->detail);
	for (unsigned int i = 0; i < s->n; i++)
		fprintf(out, "%-14s %-12s %.3f Hz +-%.3g ppm of %s\n", i ? "" : "Sources",
			tsc_source_name(s->f[i].source), s->f[i].hz, s->f[i].precision_ppm,
			tsc_reference_name(s->f[i].precision_of));
	if (s->a >= 0)
		fprintf(out, "               DISAGREE: %s is %+.3g ppm from %s, more than their precisions\n",
			tsc_source_name(s->f[s->a].source), s->apart_ppm,
			tsc_source_name(s->f[s->b].source));
	else
		fprintf(out, "               agree, each within its precision of the others\n");
	fprintf(out, "Conversion     ns = ticks * %llu + (ticks * 0x%016llx) >> 64\n",
	       (unsigned long long)clk->conv.ns_int, (unsigned long long)clk->conv.ns_frac);
	fprintf(out, "CPU            invariant TSC %s, rdtscp %s, TSC_ADJUST %s\n",
	       r->invariant_tsc ? "yes" : "no", r->rdtscp ? "yes" : "no",
	       r->tsc_adjust ? "yes" : "no");
	fprintf(out, "Kernel         clocksource %s, TSC marked unstable: %s\n",
	       r->clocksource[0] ? r->clocksource : "unknown",
	       r->kernel_unstable < 0 ? "unknown (tsc_freq_khz not loaded)" :
	       r->kernel_unstable ? "yes" : "no");
	fprintf(out, "System clock   %s\n", sc->c->why);
	if (sc->millihz)
		fprintf(out, "               counts the TSC at %llu.%03llu Hz now (the timekeeper's, NTP's correction included: %+.3f ppm from the frequency above)\n",
		       (unsigned long long)(sc->millihz / 1000),
		       (unsigned long long)(sc->millihz % 1000),
		       ((double)sc->millihz / 1e3 - f->hz) / f->hz * 1e6);
	bound_print_human(out, &sc->bound);
	if (r->offsets_source == TSC_OFFSETS_NONE) {
		fprintf(out, "Offsets        a single CPU: nothing to compare\n");
	} else if (r->reference_cpu < 0) {
		fprintf(out, "Offsets        none measured yet, by %s\n",
		       r->offsets_source == TSC_OFFSETS_MODULE ? "the module" : "this tool");
	} else {
		fprintf(out, "Offsets        against cpu%d, measured by %s\n", r->reference_cpu,
		       r->offsets_source == TSC_OFFSETS_MODULE ? "the module" : "this tool");
		fprintf(out, "  %-6s %-11s %13s  %-27s %7s  %s\n", "cpu", "status",
		       "offset/ticks", "certainly within", "probes", "consistent");
		for (unsigned int i = 0; i < r->ncpus; i++) {
			const struct tsc_cpu_offset *c = &r->cpus[i];
			char range[64];

			if (c->status == TSC_CPU_UNMEASURED) {
				fprintf(out, "  cpu%-3d %-11s\n", c->cpu, "unmeasured");
				continue;
			}
			snprintf(range, sizeof(range), "[%lld, %lld]", (long long)c->min,
				 (long long)c->max);
			fprintf(out, "  cpu%-3d %-11s %13lld  %-27s %7u  %s\n", c->cpu,
			       status_names[c->status], (long long)c->offset, range,
			       c->rounds, c->consistent ? "yes" : "NO");
		}
		fprintf(out, "Max skew       %llu ticks = %.1f ns; monotonic vs cpu%d: %s\n",
		       (unsigned long long)r->max_skew_ticks,
		       ticks_to_ns(f, (double)r->max_skew_ticks), r->reference_cpu,
		       r->monotonic ? "yes" : "no");
	}
	fprintf(out, "Verdict        %s\n", r->verdict);
}

static void print_json(FILE *out, const struct tsc_clock *clk, const struct tsc_report *r,
		       const struct sysclock_view *sc, const struct freq_sources *s)
{
	const struct tsc_freq *f = &clk->freq;
	bool first = true;

	fprintf(out, "{\n  \"schema_version\": 1,\n  \"frequency\": {\"hz\": %.3f, \"num\": %llu, "
	       "\"den\": %llu, \"source\": \"%s\", \"precision_ppm\": %.6g, "
	       "\"precision_of\": \"%s\", \"bound_ppm\": ",
	       f->hz, (unsigned long long)f->num, (unsigned long long)f->den,
	       tsc_source_name(f->source), f->precision_ppm,
	       tsc_reference_name(f->precision_of));
	if (f->bound_ppm > 0)
		fprintf(out, "%.17g", f->bound_ppm);	/* a bound: never rounded down */
	else
		fprintf(out, "null");
	fprintf(out, ", \"detail\": ");
	cli_json_str(out, f->detail);
	fprintf(out, "},\n  \"frequency_sources\": {\"agree\": %s, \"sources\": [",
		s->a < 0 ? "true" : "false");
	for (unsigned int i = 0; i < s->n; i++)
		fprintf(out, "%s\n    {\"source\": \"%s\", \"hz\": %.3f, \"precision_ppm\": %.6g, "
			"\"precision_of\": \"%s\"}", i ? "," : "", tsc_source_name(s->f[i].source),
			s->f[i].hz, s->f[i].precision_ppm, tsc_reference_name(s->f[i].precision_of));
	fprintf(out, "]");
	/* 64-bit fractions as hex strings: JSON numbers are doubles to many parsers. */
	fprintf(out, "},\n  \"conversion\": {\"ns_int\": %llu, \"ns_frac\": \"0x%016llx\", "
	       "\"tk_int\": %llu, \"tk_frac\": \"0x%016llx\"},\n",
	       (unsigned long long)clk->conv.ns_int, (unsigned long long)clk->conv.ns_frac,
	       (unsigned long long)clk->conv.tk_int, (unsigned long long)clk->conv.tk_frac);
	fprintf(out, "  \"cpu\": {\"invariant_tsc\": %s, \"rdtscp\": %s, \"tsc_adjust\": %s},\n",
	       r->invariant_tsc ? "true" : "false", r->rdtscp ? "true" : "false",
	       r->tsc_adjust ? "true" : "false");
	fprintf(out, "  \"kernel\": {\"clocksource\": ");
	if (r->clocksource[0])
		cli_json_str(out, r->clocksource);
	else
		fprintf(out, "null");
	fprintf(out, ", \"unstable\": %s},\n", r->kernel_unstable < 0 ? "null" :
	       r->kernel_unstable ? "true" : "false");
	fprintf(out, "  \"sysclock\": {\"path\": \"%s\", \"why\": ", path_names[sc->c->path]);
	cli_json_str(out, sc->c->why);
	if (sc->millihz)
		fprintf(out, ", \"rate_millihz\": %llu},\n", (unsigned long long)sc->millihz);
	else
		fprintf(out, ", \"rate_millihz\": null},\n");
	bound_print_json(out, &sc->bound);
	fprintf(out, "  \"offsets\": {\"source\": \"%s\", \"reference_cpu\": ",
	       offsets_names[r->offsets_source]);
	if (r->reference_cpu < 0)
		fprintf(out, "null");
	else
		fprintf(out, "%d", r->reference_cpu);
	fprintf(out, ", \"max_skew_ticks\": %llu, \"max_skew_ns\": %.3f, \"monotonic\": %s,\n"
	       "    \"cpus\": [", (unsigned long long)r->max_skew_ticks,
	       ticks_to_ns(f, (double)r->max_skew_ticks), r->monotonic ? "true" : "false");
	for (unsigned int i = 0; i < r->ncpus; i++) {
		const struct tsc_cpu_offset *c = &r->cpus[i];

		fprintf(out, "%s\n      {\"cpu\": %d, \"status\": \"%s\"", first ? "" : ",",
		       c->cpu, status_names[c->status]);
		first = false;
		if (c->status != TSC_CPU_UNMEASURED)
			fprintf(out, ", \"offset_ticks\": %lld, \"min_ticks\": %lld, \"max_ticks\": %lld, "
			       "\"probes\": %u, \"consistent\": %s", (long long)c->offset,
			       (long long)c->min, (long long)c->max, c->rounds,
			       c->consistent ? "true" : "false");
		fprintf(out, "}");
	}
	fprintf(out, "\n    ]},\n  \"verdict\": {\"trustworthy\": %s, \"text\": ",
	       r->trustworthy ? "true" : "false");
	cli_json_str(out, r->verdict);
	fprintf(out, "}\n}\n");
}

/* Label values: backslash, quote and newline escaped, as the format says. */
static void prom_label(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(out, "\\%c", *s);
		else if (*s == '\n')
			fprintf(out, "\\n");
		else
			fputc(*s, out);
	}
}

static void prom_head(FILE *out, const char *name, const char *help)
{
	cli_prom_head(out, name, "gauge", help);
}

static void print_prometheus(FILE *out, const struct tsc_clock *clk, const struct tsc_report *r,
			     const struct sysclock_view *sc, const struct freq_sources *s)
{
	const struct tsc_freq *f = &clk->freq;

	prom_head(out, "tsc_frequency_hertz", "TSC frequency, from the source labelled.");
	fprintf(out, "tsc_frequency_hertz{source=\"%s\"} %.3f\n", tsc_source_name(f->source), f->hz);
	prom_head(out, "tsc_frequency_precision_ratio",
		  "How far the frequency may be from the rate of the reference labelled, as a fraction of it.");
	fprintf(out, "tsc_frequency_precision_ratio{of=\"%s\"} %.6g\n",
		tsc_reference_name(f->precision_of), f->precision_ppm * 1e-6);
	prom_head(out, "tsc_frequency_source_hertz",
		  "TSC frequency as each source that answers gives it.");
	for (unsigned int i = 0; i < s->n; i++)
		fprintf(out, "tsc_frequency_source_hertz{source=\"%s\"} %.3f\n",
			tsc_source_name(s->f[i].source), s->f[i].hz);
	prom_head(out, "tsc_frequency_source_precision_ratio",
		  "How far each source's frequency may be from the rate of the reference labelled, as a fraction of it.");
	for (unsigned int i = 0; i < s->n; i++)
		fprintf(out, "tsc_frequency_source_precision_ratio{source=\"%s\",of=\"%s\"} %.6g\n",
			tsc_source_name(s->f[i].source), tsc_reference_name(s->f[i].precision_of),
			s->f[i].precision_ppm * 1e-6);
	prom_head(out, "tsc_frequency_sources_agree",
		  "1 if every two sources of the frequency are within their precisions of each other.");
	fprintf(out, "tsc_frequency_sources_agree %d\n", s->a < 0);
	prom_head(out, "tsc_invariant", "1 if the CPU promises an invariant TSC (CPUID 0x80000007 EDX[8]).");
	fprintf(out, "tsc_invariant %d\n", r->invariant_tsc);
	if (r->kernel_unstable >= 0) {
		prom_head(out, "tsc_kernel_unstable", "1 if the kernel marked the TSC unstable.");
		fprintf(out, "tsc_kernel_unstable %d\n", r->kernel_unstable);
	}
	if (r->clocksource[0]) {
		prom_head(out, "tsc_kernel_clocksource_info", "The kernel's current clocksource.");
		fprintf(out, "tsc_kernel_clocksource_info{clocksource=\"");
		prom_label(out, r->clocksource);
		fprintf(out, "\"} 1\n");
	}
	prom_head(out, "tsc_sysclock_info",
		  "How libtsc reads the system clocks: the kernel's page, or clock_gettime().");
	fprintf(out, "tsc_sysclock_info{path=\"%s\"} 1\n", path_names[sc->c->path]);
	if (sc->millihz) {
		prom_head(out, "tsc_timekeeper_frequency_hertz",
			  "The rate the kernel's clocks count the TSC at now, NTP's correction included.");
		fprintf(out, "tsc_timekeeper_frequency_hertz %llu.%03llu\n",
			(unsigned long long)(sc->millihz / 1000),
			(unsigned long long)(sc->millihz % 1000));
	}
	bound_print_prometheus(out, &sc->bound);
	if (r->offsets_source != TSC_OFFSETS_NONE) {
		static const char *const bounds[][2] = {
			{ "tsc_offset_seconds", "CPU's TSC minus the reference CPU's, best estimate." },
			{ "tsc_offset_min_seconds", "Lower bound of the CPU's TSC offset." },
			{ "tsc_offset_max_seconds", "Upper bound of the CPU's TSC offset." },
		};

		for (int b = 0; b < 3; b++) {
			prom_head(out, bounds[b][0], bounds[b][1]);
			for (unsigned int i = 0; i < r->ncpus; i++) {
				const struct tsc_cpu_offset *c = &r->cpus[i];
				int64_t v = b == 0 ? c->offset : b == 1 ? c->min : c->max;

				if (c->status != TSC_CPU_UNMEASURED)
					fprintf(out, "%s{cpu=\"%d\",measured_by=\"%s\"} %.6g\n", bounds[b][0],
					       c->cpu, offsets_names[r->offsets_source],
					       (double)v / f->hz);
			}
		}
		prom_head(out, "tsc_offset_consistent", "1 if all probes agreed on one constant offset.");
		for (unsigned int i = 0; i < r->ncpus; i++)
			if (r->cpus[i].status != TSC_CPU_UNMEASURED)
				fprintf(out, "tsc_offset_consistent{cpu=\"%d\"} %d\n", r->cpus[i].cpu,
				       r->cpus[i].consistent);
		prom_head(out, "tsc_max_skew_seconds", "Upper bound on any two CPUs' TSC difference.");
		fprintf(out, "tsc_max_skew_seconds %.6g\n", (double)r->max_skew_ticks / f->hz);
		prom_head(out, "tsc_monotonic", "1 if every CPU was measured and none stepped back against the reference CPU.");
		fprintf(out, "tsc_monotonic %d\n", r->monotonic);
	}
	prom_head(out, "tsc_trustworthy", "1 if TSC readings can be compared across CPUs.");
	fprintf(out, "tsc_trustworthy %d\n", r->trustworthy);
}

/*
 * --output: the report goes to a temporary file beside the target, renamed
 * over it only once complete and on disk, so that a reader such as
 * node_exporter's textfile collector sees the old report or the new one,
 * never part of one.  The temporary name starts with a dot and does not
 * end in .prom: the collector reads only *.prom.  0644: the collector runs
 * as another user.
 */
struct output {
	const char *path;
	char *tmp;
	FILE *f;
	bool renamed;	/* the report replaced path: no more "left as it was" */
};

/*
 * The temporary file while it exists: a tsc-report killed meanwhile (a
 * systemd timeout, Ctrl-C) removes it rather than leave it in the
 * node_exporter's directory at every timeout.
 */
static char *volatile tmp_to_remove;

static void remove_tmp_and_die(int sig)
{
	char *tmp = tmp_to_remove;

	if (tmp)
		unlink(tmp);
	cli_die_of(sig);
}

/* The temporary file, or NULL with errno set. */
static FILE *output_open(struct output *o, const char *path)
{
	const char *base = strrchr(path, '/');
	int dirlen = base ? (int)(base - path + 1) : 0;
	sigset_t fatal, old_mask;
	struct stat st;
	int fd;

	o->path = path;
	o->f = NULL;
	o->tmp = NULL;
	o->renamed = false;
	/*
	 * Only a regular file is replaced: not a device (root writing to
	 * /dev/full would replace it), not a directory, and not a symbolic
	 * link, which the rename would replace rather than follow.
	 */
	if (!lstat(path, &st) && !S_ISREG(st.st_mode)) {
		errno = S_ISLNK(st.st_mode) ? ELOOP : EEXIST;
		return NULL;
	}
	if (asprintf(&o->tmp, "%.*s.%s.XXXXXX", dirlen, path, path + dirlen) < 0) {
		o->tmp = NULL;
		errno = ENOMEM;
		return NULL;
	}
	/* Created and named to the handler at once: no kill between leaves it. */
	cli_fatal_signals(&fatal);
	cli_catch_fatal_signals(remove_tmp_and_die);
	sigprocmask(SIG_BLOCK, &fatal, &old_mask);
	fd = mkostemp(o->tmp, O_CLOEXEC);
	if (fd >= 0)
		tmp_to_remove = o->tmp;
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	if (fd >= 0 && !fchmod(fd, 0644))
		o->f = fdopen(fd, "w");
	if (!o->f) {
		int err = errno;

		if (fd >= 0) {
			tmp_to_remove = NULL;
			close(fd);
			unlink(o->tmp);
		}
		free(o->tmp);
		o->tmp = NULL;
		errno = err;
	}
	return o->f;
}

/*
 * The directory of path, flushed: the rename is on disk too.  A directory
 * we may write but not read cannot be opened to be flushed: the rename
 * stands, as any writer's there would.
 */
static int sync_dir(const char *path)
{
	const char *base = strrchr(path, '/');
	char *dir = base ? strndup(path, (size_t)(base - path + 1)) : strdup(".");
	int fd, err = 0;

	if (!dir)
		return -ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if ((fd < 0 && errno != EACCES) || (fd >= 0 && fsync(fd)))
		err = -errno;
	if (fd >= 0)
		close(fd);
	free(dir);
	return err;
}

/*
 * Commit (renamed over the target) or, with ok false, abandon.  A write
 * that failed earlier (ENOSPC, EIO) leaves only the stream's error flag:
 * that is checked too, or a truncated report would replace a whole one.
 */
static int output_close(struct output *o, bool ok)
{
	int err = 0;

	if (ok && (fflush(o->f) || ferror(o->f) || fsync(fileno(o->f))))
		err = errno ? -errno : -EIO;
	if (fclose(o->f) && !err)
		err = -errno;
	if (ok && !err && rename(o->tmp, o->path))
		err = -errno;
	if (!ok || err)
		unlink(o->tmp);
	tmp_to_remove = NULL;
	free(o->tmp);
	if (ok && !err) {
		o->renamed = true;
		err = sync_dir(o->path);
	}
	return err;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "userspace", no_argument, NULL, 'u' },
		{ "verify", no_argument, NULL, 'v' },
		{ "sysfs-root", required_argument, NULL, 'r' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	enum { HUMAN, JSON, PROMETHEUS } format = HUMAN;
	const char *root = NULL, *output = NULL;
	struct output o = { 0 };
	FILE *out = stdout;
	bool userspace = false, verify = false;
	TSC_CLOCK(clk);
	TSC_SYSCLOCK(sysclk);
	struct sysclock_view sc = { .c = &sysclk };
	struct freq_sources sources;
	struct tsc_report r;
	int opt, err;

	while ((opt = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
		case 'p':
			/* The same one twice is that one, as the other tools take it. */
			if (format != HUMAN && format != (opt == 'j' ? JSON : PROMETHEUS)) {
				fprintf(stderr, "tsc-report: --json and --prometheus exclude each other\n");
				return EXIT_USAGE;
			}
			format = opt == 'j' ? JSON : PROMETHEUS;
			break;
		case 'u':
			userspace = true;
			break;
		case 'v':
			verify = true;
			break;
		case 'r': {
			const char *why = NULL;
			struct stat st;

			/* Else every file is missing, and the fallbacks hide the typo. */
			if (stat(optarg, &st))
				why = strerror(errno);
			else if (!S_ISDIR(st.st_mode))
				why = "not a directory";
			if (why) {
				fprintf(stderr, "tsc-report: --sysfs-root %s: %s\n", optarg, why);
				return EXIT_USAGE;
			}
			root = optarg;
			break;
		}
		case 'o':
			output = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return cli_exit("tsc-report", 0);
		case 'V':
			puts("tsc-report " TSC_VERSION);
			return cli_exit("tsc-report", 0);
		default:
			fputs(usage, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tsc-report: unexpected argument '%s'\n%s", argv[optind], usage);
		return EXIT_USAGE;
	}
	/* Before anything is measured: a target that cannot be written. */
	if (output) {
		out = output_open(&o, output);
		if (!out) {
			fprintf(stderr, "tsc-report: --output %s: %s\n", output,
				errno == ELOOP ? "a symbolic link: refused" :
				errno == EEXIST ? "exists and is not a regular file: refused" :
				strerror(errno));
			return EXIT_USAGE;
		}
	}

	{
		TSC_OPTS(co, .sysfs_root = root, .verify = verify);
		TSC_REPORT_OPTS(ro, .sysfs_root = root, .userspace = userspace);
		TSC_SYSCLOCK_OPTS(so, .sysfs_root = root, .adjtimex_allowed = bound_adjtimex_allowed());

		err = tsc_clock_init(&clk, &co);
		if (err) {
			fprintf(stderr, "tsc-report: frequency: %s\n", tsc_last_error());
			goto fail;
		}
		err = tsc_sysclock_init(&sysclk, &so);
		if (err) {
			fprintf(stderr, "tsc-report: system clock: %s\n", tsc_last_error());
			goto fail;
		}
		/* No rate where clock_gettime() reads the clocks: why says so. */
		if (tsc_sysclock_rate(&sysclk, &sc.millihz))
			sc.millihz = 0;
		/* Before the CPUs are measured here: the skew any other process would get. */
		bound_read(&sc.bound, &sysclk, root);
		read_sources(&sources, root, &clk.freq);
		err = tsc_report_get(&r, &ro);
		if (err) {
			fprintf(stderr, "tsc-report: %s\n", tsc_last_error());
			goto fail;
		}
	}
	if (format == JSON)
		print_json(out, &clk, &r, &sc, &sources);
	else if (format == PROMETHEUS)
		print_prometheus(out, &clk, &r, &sc, &sources);
	else
		print_human(out, &clk, &r, &sc, &sources);
	err = r.trustworthy ? 0 : EXIT_UNTRUSTED;
	tsc_report_free(&r);
	if (output) {
		int werr = output_close(&o, true);

		if (werr) {
			fprintf(stderr, "tsc-report: --output %s: %s (%s)\n", output, strerror(-werr),
				o.renamed ? "written, but its directory could not be synced" :
				"left as it was");
			return EXIT_FAILURE_;
		}
	}
	return cli_exit("tsc-report", err);

fail:
	if (output)
		output_close(&o, false);
	return EXIT_FAILURE_;
}
