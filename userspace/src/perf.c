// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The kernel's own TSC conversion, from a perf event's mmap page: where
 * the kernel lets userspace turn TSC readings into its sched_clock time
 * (cap_user_time), the page holds that conversion as time_mult and
 * time_shift, ns = ticks * time_mult >> time_shift, the kernel's cyc2ns
 * scale built from tsc_khz.  Any kernel with perf events has it, module
 * or not; perf's tools/perf/util/tsc.c reads it the same way.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

__extension__ typedef unsigned __int128 u128;

/*
 * Hz = 1e9 * 2^shift / mult, exactly.  The kernel makes mult from tsc_khz
 * (set_cyc2ns_scale(): clocks_calc_mult_shift(..., tsc_khz, NSEC_PER_MSEC,
 * 0), halved once if the shift came out 32): within one unit of
 * 10^6 * 2^shift / tsc_khz, one part in mult - 1 of the rate.  So that
 * figure, rounded, is tsc_khz again while tsc_khz / (mult - 1) is under
 * half a kHz: the kernel's mult is above 2^26 up to 20 GHz, where that is
 * 0.2 kHz.  The tsc clocksource rounds tsc_khz into a mult of its own
 * (tsc__kernel_rounding()), and this rate is within the two roundings of
 * its rate: a hard bound.  A mult too small
 * to give tsc_khz back gets half a kHz more, and no hard bound.
 */
int tsc__freq_from_perf_mult(struct tsc_freq *f, uint32_t mult, uint16_t shift)
{
	double ours, theirs;
	u128 num, khz;
	int err;

	if (mult < 2 || shift > 63)
		return tsc__fail(-ERANGE, "perf: time_mult %u, time_shift %u is no conversion",
				 mult, shift);
	num = (u128)1000000000 << shift;
	khz = ((num / 1000) + mult / 2) / mult;
	ours = 1.0 / (mult - 1);
	theirs = khz <= TSC_MAX_HZ / 1000 && (double)(uint64_t)khz * ours < 0.5 ?
		 tsc__kernel_rounding((uint64_t)khz) : NAN;
	/* Both reduced by their common powers of two, to fit 64 bits. */
	while (!(mult & 1) && !(num & 1)) {
		mult >>= 1;
		num >>= 1;
	}
	if (num > UINT64_MAX)
		return tsc__fail(-ERANGE, "perf: time_shift %u is too large for a rate", shift);
	err = tsc__freq_set(f, TSC_SOURCE_PERF, (uint64_t)num, mult, 0, TSC_REFERENCE_KERNEL);
	if (err)
		return err;
	if (isnan(theirs)) {
		f->precision_ppm = (500 / f->hz + ours) * 1e6;
		return 0;
	}
	f->precision_ppm = (ours + theirs) / (1 - ours) * 1e6;
	f->bound_ppm = f->precision_ppm;	/* two roundings, nothing measured */
	return 0;
}

/* The page's fields, read under its sequence count as the kernel says. */
int tsc__perf_read_page(volatile struct perf_event_mmap_page *pg, uint32_t *mult,
			uint16_t *shift)
{
	for (int tries = 0; tries < 1000; tries++) {
		uint32_t seq = pg->lock;
		bool cap;

		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		cap = pg->cap_user_time;
		*mult = pg->time_mult;
		*shift = pg->time_shift;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (pg->lock == seq && !(seq & 1))
			return cap ? 0 : -ENODATA;
	}
	return -EAGAIN;
}

int tsc__perf_open_failed(int err)
{
	char level[16] = "?";
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");

	if (f) {
		if (!fgets(level, sizeof(level), f))
			snprintf(level, sizeof(level), "?");
		level[strcspn(level, "\n")] = '\0';
		(void)fclose(f);	/* read only: nothing to lose */
	}
	if (err == EACCES || err == EPERM)
		return tsc__fail(-err, "perf: perf_event_open: %s (perf_event_paranoid is %s; a seccomp filter or a container may forbid it too)",
				 strerror(err), level);
	return tsc__fail(-err, "perf: perf_event_open: %s", strerror(err));
}

/*
 * A dummy event, disabled, user space only: it counts nothing and is
 * never scheduled; only its page is wanted.
 *
 * First for this CPU, not this thread.  The kernel turns on a static key
 * (perf_sched_events) while any task-bound event exists and off again a
 * second after the last one goes; each switch rewrites the scheduler's
 * text on every CPU, with three IPIs to each, isolated ones included.  A
 * CPU-bound event needs CAP_PERFMON or perf_event_paranoid <= 0, so the
 * thread's own event, which paranoid 2 allows, is the fallback, for that
 * and any other refusal (the CPU went offline meanwhile).  Sets *what to
 * the kind that opened.
 */
static int perf_open_dummy(const char **what)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_DUMMY,
		.disabled = 1,
		.exclude_kernel = 1,
		.exclude_hv = 1,
	};
	int cpu = sched_getcpu();

	if (cpu >= 0) {
		int fd = (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1,
				      PERF_FLAG_FD_CLOEXEC);

		*what = "an event of this CPU";
		if (fd >= 0)
			return fd;
	}
	*what = "an event of this thread";
	return (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

int tsc__freq_from_perf_page(struct tsc_freq *f)
{
	long page = sysconf(_SC_PAGESIZE);
	const char *what = "";
	uint32_t mult = 0;
	uint16_t shift = 0;
	void *pg;
	int fd, err;

	tsc__clear_error();
	fd = perf_open_dummy(&what);
	if (fd < 0)
		return tsc__perf_open_failed(errno);
	pg = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 0);
	if (pg == MAP_FAILED) {
		err = errno;
		close(fd);
		return tsc__fail(-err, "perf: mmap of the event's page: %s", strerror(err));
	}
	err = tsc__perf_read_page(pg, &mult, &shift);
	munmap(pg, (size_t)page);
	close(fd);
	if (err == -ENODATA)
		return tsc__fail(err, "perf: the page of %s does not offer the kernel's TSC conversion (cap_user_time 0: its sched_clock is not the TSC's, as with kvm-clock, or the TSC is unstable)",
				 what);
	if (err)
		return tsc__fail(err, "perf: the page kept changing under 1000 reads");
	err = tsc__freq_from_perf_mult(f, mult, shift);
	if (err)
		return err;
	snprintf(f->detail, TSC__REASON_SIZE,
		 "perf mmap page of %s: time_mult %u, time_shift %u (the kernel's cyc2ns)",
		 what, mult, shift);
	return 0;
}

int tsc_freq_from_perf(struct tsc_freq *f)
{
	return tsc__freq_from_perf_page(f);
}
