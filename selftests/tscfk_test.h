/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the tsc_freq_khz selftests: strict readers of the
 * module's files (one value and a newline, nothing else), writers that
 * return -errno, and the CPU list.
 */
#ifndef TSCFK_TEST_H
#define TSCFK_TEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CPU_SYS		"/sys/devices/system/cpu"
#define TSC_DIR		CPU_SYS "/tsc"
#define FREQ_FILE	CPU_SYS "/cpu0/tsc_freq_khz"
#define MODULE_DIR	"/sys/module/tsc_freq_khz"
#define MAX_CPUS	1024

/* Whole file into buf, NUL-terminated: length, or -errno. */
static inline int read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return (int)n;
}

/*
 * A decimal integer, optionally negative, then exactly one newline: the
 * format every numeric file promises.  0 or -errno (-EBADMSG: malformed).
 */
static inline int parse_s64(const char *buf, int n, int64_t *val)
{
	char *end;

	if (n < 2 || buf[n - 1] != '\n' || !(buf[0] == '-' || (buf[0] >= '0' && buf[0] <= '9')))
		return -EBADMSG;
	errno = 0;
	*val = strtoll(buf, &end, 10);
	if (errno || end != buf + n - 1)
		return -EBADMSG;
	return 0;
}

static inline int read_s64(const char *path, int64_t *val)
{
	char buf[64];
	int n = read_file(path, buf, sizeof(buf));

	return n < 0 ? n : parse_s64(buf, n, val);
}

static inline int read_u64(const char *path, uint64_t *val)
{
	char buf[64], *end;
	int n = read_file(path, buf, sizeof(buf));

	if (n < 0)
		return n;
	if (n < 2 || buf[n - 1] != '\n' || buf[0] < '0' || buf[0] > '9')
		return -EBADMSG;
	errno = 0;
	*val = strtoull(buf, &end, 10);
	if (errno || end != buf + n - 1)
		return -EBADMSG;
	return 0;
}

/* Read a file that must hold a number; abort the test otherwise. */
#define READ_U64(path) ({						\
	uint64_t __v = 0;						\
	int __err = read_u64(path, &__v);				\
	ASSERT_EQ(0, __err) TH_LOG("%s: %s", path, strerror(-__err));	\
	__v; })

#define READ_S64(path) ({						\
	int64_t __v = 0;						\
	int __err = read_s64(path, &__v);				\
	ASSERT_EQ(0, __err) TH_LOG("%s: %s", path, strerror(-__err));	\
	__v; })

/* The module's counts of the clocks' disruptions, by cause. */
#define CLOCK_EVENTS(var) uint64_t var[3]
#define READ_CLOCK_EVENTS(var) do {					\
	(var)[0] = READ_U64(TSC_DIR "/clock_steps");			\
	(var)[1] = READ_U64(TSC_DIR "/clock_resumes");			\
	(var)[2] = READ_U64(TSC_DIR "/clocksource_changes");		\
} while (0)
/* What happened since events b were read: steps, resumes, changes; aborts otherwise. */
#define ASSERT_CLOCK_EVENTS(b, steps, resumes, changes) do {		\
	CLOCK_EVENTS(__a);						\
	READ_CLOCK_EVENTS(__a);						\
	ASSERT_EQ((uint64_t)(steps), __a[0] - (b)[0]) TH_LOG("clock_steps");		\
	ASSERT_EQ((uint64_t)(resumes), __a[1] - (b)[1]) TH_LOG("clock_resumes");	\
	ASSERT_EQ((uint64_t)(changes), __a[2] - (b)[2]) TH_LOG("clocksource_changes");	\
} while (0)

/* One write(2) of len bytes: bytes written, or -errno. */
static inline ssize_t write_file(const char *path, const void *data,
				 size_t len)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, data, len);
	if (n < 0)
		n = -errno;
	close(fd);
	return n;
}

static inline const char *cpu_path(char *buf, size_t size, int cpu,
				   const char *file)
{
	snprintf(buf, size, CPU_SYS "/cpu%d/%s", cpu, file);
	return buf;
}

/* CPU 0 may have no 'online' file: it then cannot go offline. */
static inline bool cpu_is_online(int cpu)
{
	char path[128], buf[8];

	if (read_file(cpu_path(path, sizeof(path), cpu, "online"), buf,
		      sizeof(buf)) < 0)
		return access(cpu_path(path, sizeof(path), cpu, ""), F_OK) == 0;
	return buf[0] == '1';
}

/* A CPU with a writable 'online' file: root can take it offline. */
static inline bool cpu_can_go_offline(int cpu)
{
	char path[128];

	return access(cpu_path(path, sizeof(path), cpu, "online"), W_OK) == 0;
}

/* The CPU numbers that have a device, in order; returns how many. */
static inline int list_cpus(int *cpus, int max)
{
	DIR *d = opendir(CPU_SYS);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d)) && n < max) {
		char *end;
		long cpu;

		if (strncmp(de->d_name, "cpu", 3) || de->d_name[3] < '0' ||
		    de->d_name[3] > '9')
			continue;
		cpu = strtol(de->d_name + 3, &end, 10);
		if (*end == '\0')
			cpus[n++] = (int)cpu;
	}
	closedir(d);
	/* Insertion sort: a handful of CPUs. */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && cpus[j - 1] > cpus[j]; j--) {
			int t = cpus[j];

			cpus[j] = cpus[j - 1];
			cpus[j - 1] = t;
		}
	return n;
}

static inline uint64_t now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The last kernel message containing 'needle', copied into out.  Reads the
 * whole ring buffer through /dev/kmsg without blocking.
 */
static inline bool kmsg_last(const char *needle, char *out, size_t size)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	char rec[2048];
	bool found = false;
	ssize_t n;

	if (fd < 0)
		return false;
	while ((n = read(fd, rec, sizeof(rec) - 1)) > 0 || (n < 0 && errno == EPIPE)) {
		char *msg;

		if (n <= 0)
			continue;	/* EPIPE: records were overwritten */
		rec[n] = '\0';
		msg = strchr(rec, ';');
		if (msg && strstr(msg, needle)) {
			snprintf(out, size, "%s", msg + 1);
			found = true;
		}
	}
	close(fd);
	return found;
}

/* The kHz the kernel announced it settled on, or 0 if the log lost it. */
static inline uint64_t kernel_khz_from_log(char *msg, size_t size)
{
	unsigned long mhz, frac;
	const char *p;

	if (kmsg_last("Refined TSC clocksource calibration:", msg, size))
		p = strstr(msg, "calibration:") + strlen("calibration:");
	else if (kmsg_last("tsc: Detected ", msg, size))
		p = strstr(msg, "Detected ") + strlen("Detected ");
	else
		return 0;
	if (sscanf(p, "%lu.%3lu MHz", &mhz, &frac) != 2)
		return 0;
	return mhz * 1000 + frac;
}

/* The words cpuN/tsc/unmeasured_reason may hold (see the ABI doc). */
static inline bool reason_known(const char *buf)
{
	static const char * const words[] = {
		"pending\n", "offline\n", "isolated\n", "not_started\n",
		"reference_not_started\n", "stalled\n", "too_few_probes\n",
		"wrong_cpu\n", "no_memory\n",
	};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (!strcmp(buf, words[i]))
			return true;
	return false;
}

/* cpuN/tsc/unmeasured_reason, newline included, or "ENODATA" or "?". */
static inline const char *read_reason(int cpu)
{
	static char buf[64];
	char path[128];
	int n;

	n = read_file(cpu_path(path, sizeof(path), cpu, "tsc/unmeasured_reason"),
		      buf, sizeof(buf));
	if (n == -ENODATA)
		return "ENODATA";
	return n > 0 ? buf : "?";
}

/*
 * Whether one read of a module file ('n' bytes into 'buf', or -errno) is
 * something the ABI allows: a status word, or one number and a newline; an
 * unmeasured CPU's numbers read as ENODATA, and so does the timekeeper's
 * rate while the clocks do not read the TSC; the clock page is binary,
 * its layout's version first.
 */
static inline bool value_well_formed(const char *path, int n, const char *buf)
{
	int64_t v;

	if (strstr(path, "/clock_page"))
		return n >= 2 && (unsigned char)buf[0] + 256 * (unsigned char)buf[1] >= 1;
	if (strstr(path, "/timekeeper_freq_millihz") && n == -ENODATA)
		return true;

	if (strstr(path, "/status")) {
		return n > 0 && (!strcmp(buf, "reference\n") ||
				 !strcmp(buf, "measured\n") ||
				 !strcmp(buf, "unmeasured\n"));
	}
	if (strstr(path, "/unmeasured_reason"))
		return n == -ENODATA || (n > 0 && reason_known(buf));
	if (strstr(path, "/cpu") && n == -ENODATA)
		return true;
	/* A CPU without IA32_TSC_ADJUST says so. */
	if (strstr(path, "/adjust_ticks") && n == -EOPNOTSUPP)
		return true;
	return n > 0 && parse_s64(buf, n, &v) == 0;
}

/*
 * Every readable file of the module: each cpuN/tsc_freq_khz, tsc/ and
 * each cpuN/tsc/.  Fills paths (each PATH_MAX long); returns how many.
 */
static inline int module_files(char (*paths)[PATH_MAX], int max)
{
	int cpus[MAX_CPUS], ncpus = list_cpus(cpus, MAX_CPUS), n = 0;
	char dir[PATH_MAX];

	for (int i = 0; i < ncpus && n < max; i++) {
		cpu_path(paths[n], PATH_MAX, cpus[i], "tsc_freq_khz");
		if (access(paths[n], R_OK) == 0)
			n++;
	}
	for (int i = -1; i < ncpus; i++) {
		struct dirent *de;
		struct stat st;
		DIR *d;

		if (i < 0)
			snprintf(dir, sizeof(dir), "%s", TSC_DIR);
		else
			cpu_path(dir, sizeof(dir), cpus[i], "tsc");
		d = opendir(dir);
		if (!d)
			continue;
		while ((de = readdir(d)) && n < max) {
			if (de->d_name[0] == '.')
				continue;
			if (snprintf(paths[n], PATH_MAX, "%s/%s", dir,
				     de->d_name) >= PATH_MAX)
				continue;
			/* remeasure is write-only: nothing to read */
			if (stat(paths[n], &st) == 0 && (st.st_mode & 0444))
				n++;
		}
		closedir(d);
	}
	return n;
}

/* Load $TSCFK_KO (uncompressed) through finit_module(2): 0 or -errno. */
static inline int module_load(const char *params)
{
	const char *ko = getenv("TSCFK_KO");
	int fd, ret;

	if (!ko)
		return -ENOENT;
	fd = open(ko, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, params, 0) ? -errno : 0;
	close(fd);
	return ret;
}

/*
 * Unload: 0 or -errno.  The module is in use (EAGAIN) while any of its work
 * items may still run, which includes the last instructions of a
 * measurement that has just returned: retry for up to a second.
 */
static inline int module_unload(void)
{
	for (int i = 0; i < 100; i++) {
		if (!syscall(SYS_delete_module, "tsc_freq_khz", O_NONBLOCK))
			return 0;
		if (errno != EAGAIN)
			break;
		usleep(10000);
	}
	return -errno;
}

static inline int set_online(int cpu, bool on)
{
	char path[128];
	ssize_t n = write_file(cpu_path(path, sizeof(path), cpu, "online"),
			       on ? "1" : "0", 1);

	return n < 0 ? (int)n : 0;
}

/* The kernel's current clocksource is the TSC. */
static inline bool clocksource_is_tsc(void)
{
	char cs[32] = "";

	read_file(CPU_SYS "/../clocksource/clocksource0/current_clocksource",
		  cs, sizeof(cs));
	return !strcmp(cs, "tsc\n");
}

/*
 * How far the file's kHz may be from a calibration against
 * CLOCK_MONOTONIC_RAW, as a fraction.  With the TSC as the clocksource the
 * raw clock runs on tsc_khz itself: 0.1% is generous.  Otherwise tsc_khz
 * may be the quick boot calibration, never refined once the TSC is marked
 * unstable: its error is the emulator's or the board's (762 to 799 ppm in
 * 6.1 guests on an Intel Xeon host, 2 ppm on an AMD EPYC one), and the
 * margin is the kernel's own, 1%: the refinement keeps to it
 * (arch/x86/kernel/tsc.c, "Make sure we're within 1%"), and libtsc states
 * such a value good to 1%.
 */
static inline double khz_calibration_limit(void)
{
	return clocksource_is_tsc() ? 0.001 : 0.01;
}

/*
 * The shortest of three measurements' longest IRQ-off windows (the last
 * one and two more, through tsc/remeasure; each in ns[]), or 0 if a
 * remeasure write fails.  A guest's window also grows whenever its host
 * deschedules the vCPU inside it (seen once: 3.6 ms for a 5 us bound in a
 * 2-vCPU guest), which no module can prevent; a module that ignored its
 * bound would break it in all three (a measurement's 1000 rounds take
 * about 20 ms).
 */
static inline uint64_t irqoff_best_of_three(uint64_t ns[3])
{
	uint64_t best = UINT64_MAX;

	for (int m = 0; m < 3; m++) {
		if (m && write_file(TSC_DIR "/remeasure", "1", 1) != 1)
			return 0;
		if (read_u64(TSC_DIR "/max_irqoff_ns", &ns[m]))
			return 0;
		best = ns[m] < best ? ns[m] : best;
	}
	return best;
}

/* Skip the whole test program unless the module's files are there. */
#define REQUIRE_MODULE()						\
	do {								\
		if (access(TSC_DIR, F_OK))				\
			SKIP(return, "%s missing: module not loaded", TSC_DIR); \
	} while (0)

#endif /* TSCFK_TEST_H */
