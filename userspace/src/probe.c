// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Measure the CPUs' TSC offsets from userspace, when the module is absent.
 *
 * One thread per CPU the process may run on, pinned, all started together,
 * race to claim the next number of a shared sequence with compare-and-swap,
 * each stamping its claim with its TSC read after it saw the previous
 * number and before its own claim became visible.  The claims' order is
 * then a real-time order of the stamps: in any run of three claims A, B, C,
 * A's stamp was taken before B's and B's before C's.  A run reference,
 * other CPU, reference is the module's ping-pong probe, and goes to the
 * same estimator (common/tsc_offset.c).  Any claim stamped earlier than the
 * one before it is time going backwards.
 *
 * The fences matter: the TSC is read after the load of the sequence
 * (lfence before rdtsc) and has been read before the CAS (lfence after it).
 * A locked instruction is no fence for rdtsc on AMD, and the CAS does not
 * depend on the stamp, so without the second lfence the CPU could publish
 * the claim first and read the TSC later.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

struct run {
	_Alignas(64) _Atomic uint64_t seq;	/* the last claim's number */
	_Alignas(64) atomic_uint ready;
	atomic_bool go, stop;
	struct tsc__event *log;
	uint64_t cap;
};

struct prober {
	pthread_t thread;
	struct run *run;
	unsigned int idx;	/* index into the CPU list */
	bool started;
};

static void *probe_loop(void *arg)
{
	struct prober *p = arg;
	struct run *run = p->run;

	atomic_fetch_add(&run->ready, 1);
	while (!atomic_load_explicit(&run->go, memory_order_acquire))
		__builtin_ia32_pause();
	for (;;) {
		uint64_t s = atomic_load_explicit(&run->seq, memory_order_acquire);
		uint64_t t;

		if (s + 1 >= run->cap || atomic_load_explicit(&run->stop, memory_order_relaxed))
			break;
		t = tsc_rdtsc_ordered();
		__asm__ __volatile__("lfence" ::: "memory");
		if (atomic_compare_exchange_strong_explicit(&run->seq, &s, s + 1,
							    memory_order_acq_rel,
							    memory_order_acquire))
			run->log[s + 1] = (struct tsc__event){ p->idx, t };
	}
	return NULL;
}

/* Walk the claims: offsets from reference/other/reference runs, warps. */
void tsc__probe_decode(const struct tsc__event *log, size_t n, unsigned int ref,
		       struct tscfk_offset_est *est, bool *warp)
{
	for (size_t i = 1; i < n; i++) {
		if ((int64_t)(log[i].tsc - log[i - 1].tsc) < 0)
			*warp = true;
		if (i >= 2 && log[i - 2].cpu == ref && log[i].cpu == ref &&
		    log[i - 1].cpu != ref)
			tscfk_offset_add(&est[log[i - 1].cpu], log[i - 2].tsc,
				       log[i - 1].tsc, log[i].tsc);
	}
}

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One race of all CPUs for at most cap claims or until 'deadline'. */
static int race(const int *cpus, unsigned int n, struct run *run, uint64_t deadline)
{
	struct prober *p = calloc(n, sizeof(*p));
	int err = 0;

	if (!p)
		return tsc__fail(-ENOMEM, "probe: out of memory");
	atomic_store(&run->seq, 0);
	atomic_store(&run->ready, 0);
	atomic_store(&run->go, false);
	atomic_store(&run->stop, false);
	for (unsigned int i = 0; i < n && !err; i++) {
		pthread_attr_t attr;
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpus[i], &set);
		p[i] = (struct prober){ .run = run, .idx = i };
		pthread_attr_init(&attr);
		err = -pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
		if (!err)
			err = -pthread_create(&p[i].thread, &attr, probe_loop, &p[i]);
		pthread_attr_destroy(&attr);
		if (err)
			tsc__fail(err, "probe: cannot start a thread on cpu%d: %s", cpus[i],
				  strerror(-err));
		else
			p[i].started = true;
	}
	/* All or none: a thread that is missing would hold the others up. */
	if (!err) {
		while (atomic_load(&run->ready) < n && ms_now() < deadline)
			sched_yield();
		atomic_store_explicit(&run->go, true, memory_order_release);
		while (atomic_load(&run->seq) + 1 < run->cap && ms_now() < deadline) {
			struct timespec ms = { 0, 1000000 };

			nanosleep(&ms, NULL);
		}
	}
	atomic_store(&run->stop, true);
	atomic_store_explicit(&run->go, true, memory_order_release);
	for (unsigned int i = 0; i < n; i++)
		if (p[i].started)
			pthread_join(p[i].thread, NULL);
	free(p);
	return err;
}

/*
 * The claims of one race at most: 16 MiB of log.  The estimators add up
 * across races, so that on many CPUs, where a CPU's runs between two of
 * the reference's are rare, races of this size go on until the deadline
 * instead of a log that grows to hundreds of MiB.
 */
#define MAX_CLAIMS	(1u << 20)

int tsc__probe_offsets(const int *cpus, unsigned int n, unsigned int ref,
		       unsigned int min_rounds, unsigned int max_ms,
		       struct tscfk_offset_est *est, bool *warp)
{
	uint64_t deadline = ms_now() + max_ms;
	uint64_t cap = (uint64_t)n * min_rounds * 8;
	struct run *run;
	int err = 0;

	if (n < 2 || ref >= n)
		return tsc__fail(-EINVAL, "probe: %u CPU(s), reference %u: need two or more, the reference among them",
				 n, ref);
	run = aligned_alloc(64, sizeof(*run));
	if (!run)
		return tsc__fail(-ENOMEM, "probe: out of memory");
	memset(run, 0, sizeof(*run));
	for (unsigned int i = 0; i < n; i++)
		tscfk_offset_init(&est[i]);
	*warp = false;

	/* Until every CPU has its rounds, doubling the claims each time. */
	while (!err && ms_now() < deadline) {
		bool enough = true;

		run->cap = cap < MAX_CLAIMS ? cap : MAX_CLAIMS;
		run->log = calloc(run->cap, sizeof(*run->log));
		if (!run->log) {
			err = tsc__fail(-ENOMEM, "probe: out of memory");
			break;
		}
		err = race(cpus, n, run, deadline);
		if (!err)
			tsc__probe_decode(run->log + 1, atomic_load(&run->seq), ref, est, warp);
		free(run->log);
		for (unsigned int i = 0; i < n; i++)
			if (i != ref && est[i].rounds < min_rounds)
				enough = false;
		if (enough)
			break;
		cap *= 2;
	}
	free(run);
	return err;
}
