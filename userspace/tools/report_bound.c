// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc-report's section on the time: see report_bound.h.  The bound and
 * its terms are tsc_sysclock_bound_terms(3)'s, the flags' meanings
 * tsc_realtime_bounded(3)'s; the counts are the module's files
 * tsc/clock_steps, tsc/clock_resumes and tsc/clocksource_changes.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/timex.h>
#include <sys/wait.h>

#include "cli.h"
#include "report_bound.h"

static const struct {
	uint32_t flag;
	const char *name;	/* in JSON and Prometheus */
	const char *why;	/* in words, for a person */
} flag_names[] = {
	{ TSC_BOUND_UNSYNCED, "unsynced",
	  "no NTP daemon keeps the clock (STA_UNSYNC, maxerror 16 s, or no adjtimex())" },
	{ TSC_BOUND_DISRUPTED, "disrupted",
	  "stepped, resumed, read another clocksource, migrated or the TSC's rate moved since the NTP daemon last stated its maxerror" },
	{ TSC_BOUND_LEAP, "leap", "a leap second is due at the end of the UTC day" },
	{ TSC_BOUND_SKEW_UNKNOWN, "skew_unknown",
	  "the CPUs' TSCs were not all measured against each other, or not since a migration: not in the bound" },
	{ TSC_BOUND_STALE, "stale", "the NTP state could not be read again for 2 s" },
};
#define NFLAGS	(sizeof(flag_names) / sizeof(flag_names[0]))

/* The terms, in the order they add up. */
static const char *const term_names[] = {
	"maxerror", "growth", "slewing", "reading", "skew", "leap",
};
#define NTERMS	(sizeof(term_names) / sizeof(term_names[0]))

static const struct {
	const char *file;	/* in the module's tsc/ */
	const char *cause;	/* the label */
	const char *words;
} events[EV_COUNT] = {
	[EV_STEPS] = { "clock_steps", "step", "clock steps" },
	[EV_RESUMES] = { "clock_resumes", "resume", "resumes" },
	[EV_CLOCKSOURCE] = { "clocksource_changes", "clocksource", "clocksource changes" },
};

/*
 * The hypervisor's clock page: its clock_status (VMCLOCK_STATUS_* of
 * <linux/vmclock-abi.h>, 0 to 4), or what kept the library from it.
 */
static const char *const vm_status_names[] = {
	"unknown", "initializing", "synchronized", "freerunning", "unreliable",
	"unreadable", "unsettled",
};
#define VM_STATUSES	(sizeof(vm_status_names) / sizeof(vm_status_names[0]))

/* Its name, or NULL for no device: -2 the process may not open it, -3 mid-write. */
static const char *vm_status(int32_t status)
{
	if (status == -1)
		return NULL;
	if (status == -2)
		return "unreadable";
	if (status == -3)
		return "unsettled";
	return status >= 0 && status < 5 ? vm_status_names[status] : "unknown";
}

/* The marker as Prometheus keeps it exactly (a float64): compared for change only. */
#define VM_MARKER_MASK	((UINT64_C(1) << 52) - 1)

static void terms_of(const struct tsc_bound_terms *t, uint64_t term[NTERMS])
{
	term[0] = t->maxerror_ns;
	term[1] = t->growth_ns;
	term[2] = t->slewing_ns;
	term[3] = t->reading_ns;
	term[4] = t->skew_ns;
	term[5] = t->leap_ns;
}

/* One of the module's counts: 0, or -errno (-EBADMSG: not a count). */
static int read_count(const char *root, const char *file, uint64_t *v)
{
	char path[4096], buf[32];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/devices/system/cpu/tsc/%s", root ? root : "/sys", file);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	(void)fclose(f);
	if (n < 2 || buf[n - 1] != '\n')
		return -EBADMSG;
	buf[n - 1] = 0;
	return cli_parse_u64(buf, 0, UINT64_MAX, v) ? -EBADMSG : 0;
}

bool bound_adjtimex_allowed(void)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL }, old;
	struct timex tx = { .modes = 0 };
	int status = 0;
	pid_t pid;

	/* An ignored SIGCHLD, inherited, would reap the child for us: no status. */
	sigaction(SIGCHLD, &dfl, &old);
	pid = fork();
	if (pid == 0) {
		/* Killed by SIGSYS: no core dump of it. */
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
		_exit(adjtimex(&tx) < 0);
	}
	while (pid > 0 && waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			pid = -1;
	sigaction(SIGCHLD, &old, NULL);
	return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/*
 * The boot's id: the counts start again at every boot (the module loads
 * anew), which monitoring must not take for a reload within one.  A
 * UUID, or "" where it cannot be read.
 */
static void read_boot_id(char *id, size_t size)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	size_t n = 0;

	if (f) {
		n = fread(id, 1, size - 1, f);
		(void)fclose(f);
	}
	id[n] = 0;
	id[strspn(id, "0123456789abcdef-")] = 0;
	if (strlen(id) != 36)
		id[0] = 0;
}

void bound_read(struct bound_view *v, const struct tsc_sysclock *c, const char *root)
{
	v->t = (struct tsc_bound_terms){ .sz = sizeof(v->t) };
	/* Only a wrong sz fails. */
	(void)tsc_sysclock_bound_terms(c, &v->t);
	v->have_events = true;
	for (int i = 0; i < EV_COUNT; i++)
		if (read_count(root, events[i].file, &v->events[i]))
			v->have_events = false;
	read_boot_id(v->boot_id, sizeof(v->boot_id));
}

/* ns as a person reads a duration. */
static const char *duration(char *buf, size_t size, uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, size, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		snprintf(buf, size, "%.3f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, size, "%.3f ms", (double)ns / 1e6);
	else
		snprintf(buf, size, "%.3f s", (double)ns / 1e9);
	return buf;
}

void bound_print_human(FILE *out, const struct bound_view *v)
{
	const struct tsc_bound_terms *t = &v->t;
	uint64_t term[NTERMS];
	char d[32];

	terms_of(t, term);
	if (t->bound_ns == UINT64_MAX)
		fprintf(out, "Time           CLOCK_REALTIME: no bound on its error\n");
	else
		fprintf(out, "Time           CLOCK_REALTIME within +-%s of UTC (a hard bound, if the NTP daemon's maxerror is honest)\n",
			duration(d, sizeof(d), t->bound_ns));
	fprintf(out, "               %s", t->bound_ns == UINT64_MAX ? "terms: " : "= ");
	for (size_t i = 0; i < NTERMS; i++)
		fprintf(out, "%s%s %s", i ? " + " : "", term_names[i], duration(d, sizeof(d), term[i]));
	fprintf(out, "\n               esterror %s: typical, not in the bound\n",
		duration(d, sizeof(d), t->esterror_ns));
	for (size_t i = 0; i < NFLAGS; i++)
		if (t->flags & flag_names[i].flag)
			fprintf(out, "               %s: %s\n", flag_names[i].name, flag_names[i].why);
	if (!vm_status(t->vmclock_status))
		fprintf(out, "VM clock       no /dev/vmclock0: a live migration, if this is a VM, goes unseen\n");
	else if (t->vmclock_status == -2)
		fprintf(out, "VM clock       /dev/vmclock0 cannot be opened by this user: a live migration goes unseen\n");
	else if (t->vmclock_status == -3)
		fprintf(out, "VM clock       /dev/vmclock0 did not settle while read: the hypervisor is writing it\n");
	else
		fprintf(out, "VM clock       /dev/vmclock0: clock %s, disruption marker %" PRIu64 "\n",
			vm_status(t->vmclock_status), t->vmclock_marker);
	if (!v->have_events) {
		fprintf(out, "Disruptions    unknown: the tsc_freq_khz module (1.4 or later) counts them\n");
		return;
	}
	fprintf(out, "Disruptions    since the module loaded:");
	for (int i = 0; i < EV_COUNT; i++)
		fprintf(out, "%s %" PRIu64 " %s", i ? "," : "", v->events[i], events[i].words);
	fputc('\n', out);
}

void bound_print_json(FILE *out, const struct bound_view *v)
{
	const struct tsc_bound_terms *t = &v->t;
	uint64_t term[NTERMS];
	bool first = true;

	terms_of(t, term);
	fprintf(out, "  \"time_bound\": {\"bound_ns\": ");
	if (t->bound_ns == UINT64_MAX)
		fprintf(out, "null");
	else
		fprintf(out, "%" PRIu64, t->bound_ns);
	fprintf(out, ", \"flags\": [");
	for (size_t i = 0; i < NFLAGS; i++)
		if (t->flags & flag_names[i].flag) {
			fprintf(out, "%s\"%s\"", first ? "" : ", ", flag_names[i].name);
			first = false;
		}
	fprintf(out, "], \"terms_ns\": {");
	for (size_t i = 0; i < NTERMS; i++)
		fprintf(out, "%s\"%s\": %" PRIu64, i ? ", " : "", term_names[i], term[i]);
	fprintf(out, "}, \"esterror_ns\": %" PRIu64 ", \"age_ns\": %" PRIu64 "},\n",
		t->esterror_ns, t->age_ns);
	fprintf(out, "  \"vmclock\": ");
	if (!vm_status(t->vmclock_status))
		fprintf(out, "null,\n");
	else if (t->vmclock_status < 0)
		fprintf(out, "{\"clock_status\": \"%s\", \"disruption_marker\": null},\n",
			vm_status(t->vmclock_status));
	else
		fprintf(out, "{\"clock_status\": \"%s\", \"disruption_marker\": %" PRIu64 "},\n",
			vm_status(t->vmclock_status), t->vmclock_marker);
	fprintf(out, "  \"disruptions\": ");
	if (!v->have_events) {
		fprintf(out, "null,\n");
		return;
	}
	for (int i = 0; i < EV_COUNT; i++)
		fprintf(out, "%s\"%s\": %" PRIu64, i ? ", " : "{", events[i].file, v->events[i]);
	fprintf(out, ", \"boot_id\": ");
	if (v->boot_id[0])
		fprintf(out, "\"%s\"", v->boot_id);
	else
		fprintf(out, "null");
	fprintf(out, "},\n");
}

/* ns as seconds, exactly: Prometheus's values are decimal text. */
static void seconds(FILE *out, uint64_t ns)
{
	if (ns == UINT64_MAX)
		fprintf(out, "+Inf\n");
	else
		fprintf(out, "%" PRIu64 ".%09" PRIu64 "\n", ns / 1000000000, ns % 1000000000);
}

/* A gauge of one series, in seconds. */
static void gauge_seconds(FILE *out, const char *name, const char *help, uint64_t ns)
{
	cli_prom_head(out, name, "gauge", help);
	fprintf(out, "%s ", name);
	seconds(out, ns);
}

void bound_print_prometheus(FILE *out, const struct bound_view *v)
{
	const struct tsc_bound_terms *t = &v->t;
	uint64_t term[NTERMS];

	terms_of(t, term);
	gauge_seconds(out, "tsc_time_bound_seconds",
		      "How far CLOCK_REALTIME may be from UTC: a hard bound, if the NTP daemon's maxerror is honest; +Inf where nothing bounds it.",
		      t->bound_ns);
	cli_prom_head(out, "tsc_time_bound_term_seconds", "gauge",
		      "The terms the bound adds up, each labelled.");
	for (size_t i = 0; i < NTERMS; i++) {
		fprintf(out, "tsc_time_bound_term_seconds{term=\"%s\"} ", term_names[i]);
		seconds(out, term[i]);
	}
	gauge_seconds(out, "tsc_time_esterror_seconds",
		      "The kernel's estimated error of CLOCK_REALTIME: typical, not a bound.",
		      t->esterror_ns);
	cli_prom_head(out, "tsc_time_bound_flag", "gauge",
		      "1 if the bounded read raises the flag labelled.");
	for (size_t i = 0; i < NFLAGS; i++)
		fprintf(out, "tsc_time_bound_flag{flag=\"%s\"} %d\n", flag_names[i].name,
			!!(t->flags & flag_names[i].flag));
	if (vm_status(t->vmclock_status)) {
		cli_prom_head(out, "tsc_vmclock_status", "gauge",
			      "1 for the clock status of /dev/vmclock0, the hypervisor's clock page, or why it could not be read.");
		for (size_t i = 0; i < VM_STATUSES; i++)
			fprintf(out, "tsc_vmclock_status{status=\"%s\"} %d\n", vm_status_names[i],
				!strcmp(vm_status_names[i], vm_status(t->vmclock_status)));
	}
	if (t->vmclock_status >= 0) {
		cli_prom_head(out, "tsc_vmclock_disruption_marker", "gauge",
			      "The low 52 bits of /dev/vmclock0's disruption_marker, which the hypervisor moves at a live migration: compare for change.");
		fprintf(out, "tsc_vmclock_disruption_marker %" PRIu64 "\n",
			t->vmclock_marker & VM_MARKER_MASK);
	}
	if (!v->have_events)
		return;
	cli_prom_head(out, "tsc_clock_disruptions_total", "counter",
		      "Disruptions of the kernel's clocks since the tsc_freq_khz module loaded, by cause, in the boot labelled.");
	for (int i = 0; i < EV_COUNT; i++) {
		fprintf(out, "tsc_clock_disruptions_total{cause=\"%s\"", events[i].cause);
		if (v->boot_id[0])
			fprintf(out, ",boot_id=\"%s\"", v->boot_id);
		fprintf(out, "} %" PRIu64 "\n", v->events[i]);
	}
}
