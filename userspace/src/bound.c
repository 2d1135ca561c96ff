// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The time with a hard bound on its error: CLOCK_REALTIME and the
 * interval [now - bound, now + bound] that true UTC lies in, as long as
 * the NTP daemon's maxerror is honest and the system clock runs within
 * TSC_BOUND_DRIFT_PPM of true.  The bound is a sum of terms:
 *
 *   maxerror	the kernel's, as an NTP daemon last set it and the kernel
 *		grew it since (500 us at each second's turn: ntp.c);
 *   growth	what the kernel will add after it was read: its next step,
 *		and TSC_BOUND_DRIFT_PPM of the time since, which covers
 *		every later step;
 *   slewing	what the kernel is still slewing out (the PLL's offset,
 *		adjtime()'s remainder): the clock is off by that now;
 *   reading	the reading's own error against the kernel's clock: 1 ns
 *		on the module's page (its rounding), 0 for clock_gettime();
 *   skew	how far apart two CPUs' TSCs read at one instant (the
 *		module's max_skew_ticks, every online CPU measured; without
 *		it, the process's own tsc_report_get()'s, while it holds):
 *		the kernel's clock itself reads this CPU's TSC;
 *   leap	a second, within a second of a leap second.
 *
 * No thread: the first reader to find the state a second old refreshes
 * it (adjtimex(), the module's files), behind a compare-and-swap, and
 * the others read on meanwhile from the state as it was, whose bound
 * only grows.  A state is one per kernel page (its sysfs root), and one
 * per root for clocks that read clock_gettime(); never freed, as readers
 * may hold it.
 *
 * Disruptions: a refresh compares what it reads with what the last one
 * did.  On the kernel's page a reader whose page's generation moved on
 * takes the slow path, which refreshes before it returns; REALTIME -
 * BOOTTIME moved is a step, BOOTTIME - MONOTONIC a resume (which moves
 * REALTIME - MONOTONIC too); the page withdrawn (another clocksource,
 * the module unloaded) or back, a change of path (path_moved()).  Without
 * a page the slow path compares REALTIME - MONOTONIC at every read, which
 * either moves, and a refresh the kernel's clocksource and the module's
 * page file, which the readings do not show (source_moved()).  A state
 * set up later judges its first refresh against what another of its
 * root judged last (count_on()).  Where the
 * hypervisor offers its clock page (vmclock.c), its disruption marker
 * moved is a disruption too: every reader compares it after its TSC
 * reading, a refresh the VM generation as well; a page that would not
 * settle leaves the bound unknown, uncounted, until the next refresh
 * reads it.  On the page a refresh also judges the TSC's
 * rate against MONOTONIC_RAW (rate_moved()).  Every disruption counted
 * leaves the bound unknown (TSC_BOUND_DISRUPTED) until the daemon states
 * a maxerror again, one lower than the kernel's growth alone gives: its
 * last was of another time, or of a clock read another way (the kernel
 * leaves tsc when its watchdog finds it wrong).  A page that cannot be
 * read for the while (page_read()'s busy) is neither: no bound, nothing
 * counted, until it reads again.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/timex.h>
#include <time.h>

#include "internal.h"
#include "tsc_clock_page.h"

#define REFRESH_NS	1000000000ull	/* the NTP state is read again after this */
#define STALE_NS	2000000000ull	/* not read again for this long: TSC_BOUND_STALE */
#define GROWTH_STEP_NS	500000ull	/* the kernel's maxerror grows by this at each second */
#define PHASE_LIMIT_US	16000000L	/* the kernel's NTP_PHASE_LIMIT: maxerror there, no NTP */
#define STEP_TOL_NS	1000		/* REALTIME - MONOTONIC moved by more, beyond sampling: a step */
#define DAY_NS		86400000000000ull
#define SAMPLES		3
#define RATE_MIN_NS	500000000	/* the TSC's rate is judged over this much at least */
#define RATE_ERR_MAX	50e-6		/* a reference rate no more uncertain than this */
#define PUBLISH_SPINS	1000		/* pauses a reader waits out a publish for: microseconds */

#ifdef TSC__TEST_HOOKS
#include <unistd.h>

int (*tsc__test_adjtimex)(struct timex *tx);
int64_t tsc__test_realtime_step_ns;
int64_t tsc__test_sleep_ns;
int64_t tsc__test_raw_ppm;
int64_t tsc__test_raw_base;
unsigned int tsc__test_publish_pause_us;
int tsc__test_publishing;
#endif

/* REALTIME by clock_gettime(), as the slow path reads it. */
static int64_t realtime(void)
{
	int64_t ns = tsc__ns_now(CLOCK_REALTIME);

#ifdef TSC__TEST_HOOKS
	ns += __atomic_load_n(&tsc__test_realtime_step_ns, __ATOMIC_RELAXED);
#endif
	return ns;
}

/* MONOTONIC_RAW, as the check of the TSC's rate reads it. */
static int64_t raw_now(void)
{
	int64_t ns = tsc__ns_now(CLOCK_MONOTONIC_RAW);

#ifdef TSC__TEST_HOOKS
	int64_t ppm = __atomic_load_n(&tsc__test_raw_ppm, __ATOMIC_RELAXED);
	int64_t base = __atomic_load_n(&tsc__test_raw_base, __ATOMIC_RELAXED);

	/* From base on, MONOTONIC_RAW runs ppm faster against the TSC. */
	if (ppm && ns > base)
		ns += (int64_t)((double)(ns - base) * (double)ppm * 1e-6);
#endif
	return ns;
}

static int call_adjtimex(struct timex *tx)
{
#ifdef TSC__TEST_HOOKS
	if (tsc__test_adjtimex)
		return tsc__test_adjtimex(tx);
#endif
	return adjtimex(tx);
}

void tsc__ntp_read(struct tsc__ntp *n)
{
	struct timex ss = { .modes = ADJ_OFFSET_SS_READ }, tx = { .modes = 0 };
	int state;

	*n = (struct tsc__ntp){ .known = false };
#ifdef TSC__TEST_HOOKS
	if (!tsc__test_adjtimex)
#endif
	if (!tsc__adjtimex_callable())
		return;
	if (call_adjtimex(&ss) < 0)
		return;
	state = call_adjtimex(&tx);
	if (state < 0)
		return;
	n->known = true;
	n->state = state;
	n->status = tx.status;
	n->maxerror_us = tx.maxerror;
	n->esterror_us = tx.esterror;
	/* adjtime()'s remainder in us; the PLL's offset in ns with STA_NANO. */
	n->slewing_ns = (uint64_t)labs(ss.offset) * 1000 +
			(uint64_t)labs(tx.offset) * ((tx.status & STA_NANO) ? 1 : 1000);
}

void tsc__bound_base(const struct tsc__ntp *n, uint64_t skew_ns, uint64_t reading_ns,
		     uint64_t now, struct tsc__bound_base *b)
{
	uint64_t day = now / DAY_NS * DAY_NS;

	*b = (struct tsc__bound_base){ .reading_ns = reading_ns };
	if (skew_ns == UINT64_MAX)
		b->flags |= TSC_BOUND_SKEW_UNKNOWN;
	else
		b->skew_ns = skew_ns;
	if (!n->known || (n->status & STA_UNSYNC) || n->maxerror_us >= PHASE_LIMIT_US ||
	    n->maxerror_us < 0)
		b->flags |= TSC_BOUND_UNSYNCED;
	if (n->known && ((n->status & (STA_INS | STA_DEL)) || n->state == TIME_OOP)) {
		b->flags |= TSC_BOUND_LEAP;
		/* The day's end, or the one just passed if that was under a second ago. */
		b->leap_from = (now - day < 1000000000 ? day : day + DAY_NS) - 1000000000;
	}
	if (!n->known)
		return;
	b->maxerror_ns = (uint64_t)(n->maxerror_us > 0 ? n->maxerror_us : 0) * 1000;
	b->esterror_ns = (uint64_t)(n->esterror_us > 0 ? n->esterror_us : 0) * 1000;
	b->slewing_ns = n->slewing_ns;
}

/* The bound at an age since the refresh whose growth is growth_ns; UINT64_MAX for none. */
static uint64_t bound_ns(const struct tsc__bound_base *b, uint32_t flags, uint64_t growth_ns)
{
	if (flags & (TSC_BOUND_UNSYNCED | TSC_BOUND_DISRUPTED))
		return UINT64_MAX;
	return b->maxerror_ns + GROWTH_STEP_NS + growth_ns + b->slewing_ns + b->reading_ns +
	       b->skew_ns;
}

/* The TSC read between two readings of MONOTONIC_RAW on one CPU, the earlier one's ns. */
struct rate_pair {
	uint64_t t;
	int64_t ns;
	uint64_t width;		/* the two readings' distance; 0: none taken */
	uint32_t cpu;		/* rdtscp's: the CPU whose TSC it is; UINT32_MAX not known */
	bool on_page;		/* MONOTONIC_RAW was the TSC too (the kernel's page read) */
	uint64_t skew_ns;	/* the CPUs' skew then; UINT64_MAX unknown */
};

/*
 * What judge() compares a refresh with: the path the readings took and
 * the clocks' offsets, as the last refresh judged saw them, and whether
 * the bound is disrupted since.  Kept in the published shot, the one
 * record of it: a fork that cuts a refresh short leaves the child the
 * last published (tsc__bound_forked()), and a state set up later goes on
 * from another's (count_on()).
 */
struct judged {
	bool taken;
	bool unsure;		/* not taken: went on from a state it could not copy */
	bool inherited;		/* another state's, which count_on() went on from */
	bool on_page;		/* the kernel's page was read, not clock_gettime() */
	const volatile struct tsc_timepage *page;	/* which, on it */
	uint32_t generation;	/* the page's */
	int64_t real_mono;	/* REALTIME - MONOTONIC (a step or a resume moves it) */
	int64_t boot_mono;	/* BOOTTIME - MONOTONIC (a resume does) */
	uint64_t width;		/* how far those may be off: the samples' bracket */
	char clocksource[32];	/* the kernel's ("tsc" on the page); "" not known */
	uint64_t page_ino;	/* the module's page file's inode: 0 none, UINT64_MAX not known */
	bool source_read;	/* both read by this refresh, not kept from an earlier */
	bool disrupted;
	long disrupted_maxerror_us;	/* the kernel's maxerror when it was */
	uint64_t disrupted_mono;	/* MONOTONIC, no earlier than that was read */
};

/* What a refresh took, and readers of the slow path copy under seq. */
struct shot {
	bool taken;
	bool on_page;		/* the kernel's page was read, not clock_gettime() */
	bool busy;		/* ... it could not be: being written, or stale; not judged */
	const volatile struct tsc_timepage *page;	/* which, on it */
	uint32_t generation;	/* the page's */
	uint64_t t;		/* TSC, on the page */
	double ns_per_tick;	/* the page's */
	uint64_t mono;		/* MONOTONIC at the refresh */
	int64_t real_mono;	/* REALTIME - MONOTONIC (a step or a resume moves it) */
	int64_t boot_mono;	/* BOOTTIME - MONOTONIC (a resume does) */
	uint64_t width;		/* how far those may be off: the samples' bracket */
	long maxerror_us;	/* the kernel's, as read; -1 if it could not be */
	uint64_t ntp_mono;	/* MONOTONIC once that was read: mono <= the read <= ntp_mono */
	uint64_t growth_frac;	/* the fast path's, on the page */
	struct tsc__bound_base base;
	uint32_t flags;
	uint32_t disruptions;
	uint32_t by_cause[8];
	struct tsc__vmclock vm;		/* the hypervisor's page, if read */
	int vm_err;			/* tsc__vmclock_read()'s */
	struct tsc__vmclock vm_ref;	/* the last that settled (judge()'s): the readers compare */
	struct rate_pair raw;		/* the TSC against MONOTONIC_RAW */
	/* The refresher's: what the readings follow (read_source()). */
	char clocksource[32];
	uint64_t page_ino;
	struct judged judged;		/* the state's after judging this */
};

/* A shot's judged before its state's first refresh: nothing known. */
#define JUDGED_NONE	{ .page_ino = UINT64_MAX }

struct state {
	struct tsc__bound line;		/* the fast path's: first, one cache line */
	struct shot shot;		/* under line.seq too */
	int refreshing;			/* the refresher's, by compare-and-swap */
	bool published;			/* a shot was: readers judge by the state since */
	bool seeded;			/* count_on() gave it another state's judged */
	/* The refresher's own: */
	struct tsc__vmclock vm_seen;	/* as last read: what the next is compared with */
	struct rate_pair rate_from;	/* the TSC's rate is judged from here (width 0: none) */
	double rate_ref;		/* MONOTONIC_RAW's ns per tick to compare with; 0: none */
	double rate_ref_err;		/* how far off that may be, relatively */
	uint64_t skew_gen;		/* the module's tsc/generation + 1 at the skew read; 0 none */
	uint64_t skew_ns;
	/*
	 * MONOTONIC after a vmclock disruption was seen: the module's skew
	 * is unknown until it measured since (tsc/measured_since_ns); 0
	 * none.  The refresher's, read by a reader taking its own shot too.
	 */
	uint64_t skew_after_ns;
	const char *root;		/* its sysfs root; NULL: the system's */
	struct state *next;
};

static pthread_mutex_t states_lock = PTHREAD_MUTEX_INITIALIZER;
static struct state *states;

/*
 * The state of a clock with none of its own (the front door before it is
 * set up, an init out of memory): the system's, no page.  Static, so that
 * a reader (in a signal handler, say) never allocates or locks.
 */
static struct state fallback __attribute__((aligned(64))) = {
	.line.seq = 1, .shot.judged = JUDGED_NONE,
};

/*
 * The library's own measurement of the CPUs' skew (tsc_report_get() in
 * userspace), for the bound where the module is not loaded: in ns by
 * tsc__skew_ns().  It holds for its key (struct tsc__skew_key), which a
 * refresh checks: a stat() of each online CPU's topology directory, once
 * a second, only while there is a note.  The last measurement replaces
 * it, proven or not: one that found the CPUs in doubt takes the earlier
 * one's place too.  Writers under lock (held across fork()); readers
 * under seq, a bounded number of tries and else unknown, so that one in
 * a signal handler that interrupted a writer never waits for it.
 */
static struct {
	pthread_mutex_t lock;		/* the writers' */
	uint32_t seq;			/* odd: being written; 0: never */
	bool valid;
	struct tsc__skew_key key;	/* its root's too: the inodes are its files' */
	uint64_t ns;
} noted = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char *root_of(const struct state *s)
{
	return s->root ? s->root : tsc__sysfs_root(NULL);
}

static void count_on(struct state *s);

struct tsc__bound *tsc__bound_get(const char *root, const volatile struct tsc_timepage *page)
{
	struct state *s;

	pthread_mutex_lock(&states_lock);
	for (s = states; s; s = s->next)
		if (s->line.page == page && !strcmp(s->root, root))
			break;
	if (!s) {
		size_t size = (sizeof(*s) + 63) / 64 * 64;
		char *copy = strdup(root);

		s = copy ? aligned_alloc(64, size) : NULL;
		if (s) {
			memset(s, 0, size);
			s->root = copy;
			/* The page it is for, for good; odd until its first refresh. */
			s->line.page = page;
			/*
			 * The device mapped before any reader compares its
			 * marker, and read: a migration between now and the
			 * first refresh is one, for the readings taken since.
			 */
			if (tsc__vmclock_read(&s->vm_seen))
				s->vm_seen = (struct tsc__vmclock){ .present = false };
			s->line.seq = 1;
			s->shot.judged = (struct judged)JUDGED_NONE;
			s->next = states;
			states = s;
		} else {
			free(copy);
		}
	}
	if (s)
		count_on(s);
	pthread_mutex_unlock(&states_lock);
	return s ? &s->line : NULL;
}

/*
 * Around fork(), from sysclock.c's handlers: the list whole in the child,
 * and no refresh left taken by a thread the child does not have (one
 * half-published leaves seq odd: the child's first reader refreshes).
 */
void tsc__bound_fork_lock(void)
{
	pthread_mutex_lock(&states_lock);
	pthread_mutex_lock(&noted.lock);
}

void tsc__bound_fork_unlock(void)
{
	pthread_mutex_unlock(&noted.lock);
	pthread_mutex_unlock(&states_lock);
}

/*
 * In a fork's child, a state whose refresh the fork may have cut short:
 * its rate judged anew (half-written, maybe); its refresher's own record
 * of the hypervisor's marker as the published shot has it (judge() moves
 * it on before publish()); and a shot cut short publishing (seq odd)
 * judged against by nothing, its next refresh disrupted (unsure), its
 * count no lower than either copy's.
 */
static void forked_state(struct state *s)
{
	uint32_t line_count = s->line.disruptions;

	s->refreshing = 0;
	s->rate_from.width = 0;
	s->rate_ref = 0;
	if (!s->published)
		return;
	if (!(s->line.seq & 1)) {
		if (s->shot.vm_ref.present)
			s->vm_seen = s->shot.vm_ref;
		return;
	}
	s->shot.judged = (struct judged)JUDGED_NONE;
	s->shot.judged.unsure = true;
	s->vm_seen = (struct tsc__vmclock){ .present = false };
	if (line_count > s->shot.disruptions)
		s->shot.disruptions = line_count;
}

void tsc__bound_forked(void)
{
	for (struct state *s = states; s; s = s->next)
		forked_state(s);
	forked_state(&fallback);
	pthread_mutex_unlock(&noted.lock);
	pthread_mutex_unlock(&states_lock);
}

static bool moved(int64_t a, int64_t b, uint64_t slack)
{
	return (uint64_t)(a > b ? a - b : b - a) > slack + STEP_TOL_NS;
}

#define CPU_DIR "/devices/system/cpu"

#define SLEEP_TOL_NS	1000000	/* BOOTTIME - MONOTONIC moved by more: a sleep */

static void sample_syscall(struct shot *k);

/* BOOTTIME - MONOTONIC now, as a refresh samples it, and how far off it may be. */
static int64_t boot_mono_now(uint64_t *width)
{
	struct shot k = { .taken = false };

	sample_syscall(&k);
	*width = k.width;
#ifdef TSC__TEST_HOOKS
	k.boot_mono += __atomic_load_n(&tsc__test_sleep_ns, __ATOMIC_RELAXED);
#endif
	return k.boot_mono;
}

int tsc__skew_key(const char *root, struct tsc__skew_key *k, bool rate)
{
	const char *r = tsc__sysfs_root(root);
	uint64_t h = 14695981039346656037ull;	/* FNV-1a */

	memset(k, 0, sizeof(*k));
	if (tsc__read_cpulist(r, CPU_DIR "/online", &k->online, true)) {
		tsc__clear_error();
		return -ENOENT;
	}
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		char path[4096];
		struct stat st;

		if (!CPU_ISSET(cpu, &k->online))
			continue;
		/* Removed when the CPU goes offline, made anew (a new inode) when it is back. */
		snprintf(path, sizeof(path), "%s" CPU_DIR "/cpu%d/topology", r, cpu);
		if (stat(path, &st))
			return -errno;
		h = (h ^ (uint64_t)cpu) * 1099511628211ull;
		h = (h ^ (uint64_t)st.st_dev) * 1099511628211ull;
		h = (h ^ (uint64_t)st.st_ino) * 1099511628211ull;
	}
	k->stays = h;
	k->boot_mono = boot_mono_now(&k->width);
	/* The TSC between two readings of MONOTONIC: the narrowest of a few. */
	for (int i = 0; rate && i < SAMPLES; i++) {
		int64_t m1 = tsc__ns_now(CLOCK_MONOTONIC);
		uint64_t t = tsc_rdtsc_start();
		int64_t m2 = tsc__ns_now(CLOCK_MONOTONIC);

		if (!i || m2 - m1 < k->mono_after - k->mono_before) {
			k->t = t;
			k->mono_before = m1;
			k->mono_after = m2;
		}
	}
	return tsc__vmclock_read(&k->vm) == -EAGAIN ? -EAGAIN : 0;
}

static bool same_key(const struct tsc__skew_key *a, const struct tsc__skew_key *b)
{
	return CPU_EQUAL(&a->online, &b->online) && a->stays == b->stays &&
	       !moved(a->boot_mono, b->boot_mono, a->width + b->width + SLEEP_TOL_NS) &&
	       a->vm.present == b->vm.present && a->vm.marker == b->vm.marker &&
	       a->vm.has_gen == b->vm.has_gen && (!a->vm.has_gen || a->vm.gen == b->vm.gen);
}

/*
 * ticks in ns at the most ns per tick MONOTONIC can have run at between
 * the keys' brackets, and the rate's allowance: MONOTONIC then and at any
 * later time each within TSC_BOUND_DRIFT_PPM of true.  Each bracket's
 * MONOTONIC readings may be another CPU's TSC than its TSC reading's (a
 * migration between), up to ticks apart: twice ticks off the interval.
 * UINT64_MAX where the interval is too short to tell.
 */
uint64_t tsc__skew_ns(const struct tsc__skew_key *before, const struct tsc__skew_key *after,
		      uint64_t ticks)
{
	uint64_t d = after->t - before->t;
	double per_tick, ns;

	if (after->t <= before->t || ticks >= d / 2 || after->mono_after <= before->mono_before)
		return UINT64_MAX;
	per_tick = (double)(after->mono_after - before->mono_before) / (double)(d - 2 * ticks);
	ns = ceil((double)ticks * per_tick * (1e6 + TSC_BOUND_DRIFT_PPM) /
		  (1e6 - TSC_BOUND_DRIFT_PPM));
	/* And 1 for the double's roundings. */
	return ns < 1e15 ? (uint64_t)ns + 1 : UINT64_MAX;
}

void tsc__bound_note_skew(const char *root, const struct tsc__skew_key *before,
			  const cpu_set_t *measured, uint64_t ticks, bool proven)
{
	struct tsc__skew_key after;
	uint64_t ns = UINT64_MAX;

	/* The lock held across fork(): the child never inherits a note half-written. */
	if (tsc__fork_handlers())
		return;
	/* The after key under it too: of two measurements at once, the later one's stays. */
	pthread_mutex_lock(&noted.lock);
	/* The key the same after as before: nothing it names moved during the measurement. */
	if (proven && before && !tsc__skew_key(root, &after, true) && same_key(before, &after) &&
	    CPU_EQUAL(measured, &after.online))
		ns = tsc__skew_ns(before, &after, ticks);
	__atomic_store_n(&noted.seq, noted.seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	noted.valid = ns != UINT64_MAX;
	if (noted.valid) {
		noted.key = after;
		noted.ns = ns;
	}
	__atomic_store_n(&noted.seq, noted.seq + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&noted.lock);
}

/* The noted skew, if its key holds for root now; else UINT64_MAX. */
static uint64_t noted_skew(const char *root)
{
	struct tsc__skew_key key, now;
	bool valid = false;
	uint64_t ns = 0;
	int tries;

	if (!__atomic_load_n(&noted.seq, __ATOMIC_ACQUIRE))
		return UINT64_MAX;	/* never measured: no file to read */
	for (tries = 0; tries < 100; tries++) {
		uint32_t seq = __atomic_load_n(&noted.seq, __ATOMIC_ACQUIRE);

		if (seq & 1) {
			__builtin_ia32_pause();
			continue;
		}
		valid = noted.valid;
		key = noted.key;
		ns = noted.ns;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&noted.seq, __ATOMIC_RELAXED) == seq)
			break;
	}
	if (tries == 100 || !valid || tsc__skew_key(root, &now, false) || !same_key(&key, &now))
		return UINT64_MAX;
	return ns;
}

/*
 * A migration since the last refresh: the TSCs are another host's, and
 * the module's skew is unknown until it measures them again.  MONOTONIC
 * now, after the read that saw it, is after the migration; as the
 * module's files count it, in the initial time namespace.  This
 * process's own may be offset, by its children's (in
 * /proc/self/timens_offsets) or by none, if it has called
 * unshare(CLONE_NEWTIME) since it was forked: whichever is later.
 */
static uint64_t migration_seen(void)
{
	int64_t mono, boot, now = tsc__ns_now(CLOCK_MONOTONIC);

	tsc__timens_offsets(&mono, &boot);
	return (uint64_t)(mono < 0 ? now - mono : now);
}

/*
 * The module's measurement began after MONOTONIC 'after' (0: any will do):
 * one from before a migration says nothing of the TSCs of the host the VM
 * runs on now.  False if the module cannot say (a module without the file).
 */
static bool measured_after(const char *root, uint64_t after)
{
	uint64_t since;

	return !after || (!tsc__read_u64(root, CPU_DIR "/tsc/measured_since_ns", &since) &&
			  since > after);
}

/*
 * How far apart any two CPUs' TSCs may read, in ns: the module's
 * max_skew_ticks at tsc_khz, if every online CPU is measured, and since
 * the last vmclock disruption this state saw; 0 with one CPU online;
 * without the module, the library's own measurement of these CPUs, if
 * it holds; else UINT64_MAX, unknown.  The refresher (cache) keeps the
 * module's until its generation moves; others read it all.
 */
static uint64_t skew_of(struct state *s, bool cache)
{
	const char *root = root_of(s);
	uint64_t gen, gen_after, ticks, khz, skew = UINT64_MAX;
	uint64_t after = __atomic_load_n(&s->skew_after_ns, __ATOMIC_RELAXED), since_migration = 0;
	cpu_set_t online;
	int cpu;

	if (tsc__read_u64(root, CPU_DIR "/tsc/generation", &gen)) {
		tsc__clear_error();
		if (cache)
			s->skew_gen = 0;
		if (tsc__read_cpulist(root, CPU_DIR "/online", &online, true)) {
			tsc__clear_error();
			return UINT64_MAX;
		}
		return CPU_COUNT(&online) == 1 ? 0 : noted_skew(root);
	}
	if (cache && s->skew_gen == gen + 1 && !after)
		return s->skew_ns;
	if (tsc__read_cpulist(root, CPU_DIR "/online", &online, true))
		goto out;
	if (CPU_COUNT(&online) == 1) {
		skew = 0;	/* one CPU: nothing to be apart from, migrated or not */
		goto out;
	}
	if (!measured_after(root, after))
		goto out;
	since_migration = after;
	if (tsc__read_u64(root, CPU_DIR "/tsc/max_skew_ticks", &ticks) ||
	    tsc__read_u64(root, CPU_DIR "/cpu0/tsc_freq_khz", &khz) || !khz)
		goto out;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		char rel[128], path[4096], buf[32];
		size_t len;

		if (!CPU_ISSET(cpu, &online))
			continue;
		snprintf(rel, sizeof(rel), CPU_DIR "/cpu%d/tsc/status", cpu);
		if (tsc__read_value(root, rel, path, sizeof(path), buf, sizeof(buf), &len))
			goto out;
		buf[strcspn(buf, "\n")] = '\0';
		if (strcmp(buf, "reference") != 0 && strcmp(buf, "measured") != 0)
			goto out;
	}
	if (tsc__read_u64(root, CPU_DIR "/tsc/generation", &gen_after) || gen_after != gen)
		goto out;
	/*
	 * Ticks to ns at tsc_khz, rounded up, and as much more as a clock
	 * within TSC_BOUND_DRIFT_PPM of true can run slower than one
	 * within it the other way: it assumes tsc_khz is as close to true
	 * as the kernel's clock, which it calibrated against.
	 */
	skew = ticks <= UINT64_MAX / (1000000 + TSC_BOUND_DRIFT_PPM) / 1000000 ?
	       (ticks * 1000000 * (1000000 + TSC_BOUND_DRIFT_PPM) +
		khz * (1000000 - TSC_BOUND_DRIFT_PPM) - 1) / (khz * (1000000 - TSC_BOUND_DRIFT_PPM)) :
	       UINT64_MAX;
out:
	tsc__clear_error();
	if (cache) {
		s->skew_ns = skew;
		s->skew_gen = skew == UINT64_MAX ? 0 : gen + 1;	/* unknown: again next time */
		/* Measured since the migration: no longer the question. */
		if (since_migration && skew != UINT64_MAX)
			__atomic_store_n(&s->skew_after_ns, 0, __ATOMIC_RELAXED);
	}
	return skew;
}

/* A page reading: the TSC, REALTIME and MONOTONIC, the offsets; false if unusable. */
struct page_now {
	uint64_t t, real, mono;
	int64_t real_mono, boot_mono;
	uint32_t generation;
	double ns_per_tick;
};

/*
 * The page read, off it (withdrawn: another clocksource, the module
 * gone; or not the kernel's), or busy: a write under way for longer than
 * a reader waits (its writer preempted), or not moved on for longer than
 * it holds (the kernel's tick yet to run after a long pause).  Busy
 * passes; the readings take clock_gettime() meanwhile.
 */
enum page_got { PAGE_READ, PAGE_OFF, PAGE_BUSY };

static enum page_got page_read(const volatile struct tsc_timepage *p, bool rdtscp,
			       struct page_now *r)
{
	const volatile struct tscfk_clock_page *kp = (const volatile void *)p;

	/* As page_begin() (sysclock.c): a write under emulation may take a while. */
	for (int tries = 0; tries < 100000; tries++) {
		uint32_t seq = p->seq;
		struct tscfk_clock_map m;
		uint64_t last, max;

		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (seq & 1) {
			if (!(p->flags & TSC_TIMEPAGE_TSC))
				return PAGE_OFF;
			__builtin_ia32_pause();
			continue;
		}
		if ((p->flags & (TSC__TIMEPAGE_OWN | TSC_TIMEPAGE_GONE)) || p->mult_ns)
			return PAGE_OFF;
		m = (struct tscfk_clock_map){ .mult_ns = 0, .mult = p->mult, .frac = p->frac };
		last = p->cycle_last;
		max = tsc__page_max_delta(kp);
		r->generation = p->generation;
		r->real_mono = (int64_t)(p->real_off - p->mono_off);
		r->boot_mono = (int64_t)(p->boot_off - p->mono_off);
		r->ns_per_tick = ldexp((double)p->mult, -64);
		r->t = rdtscp ? tsc__rdtscp() : tsc_rdtsc_ordered();
		m.off = p->real_off;
		r->real = tscfk_clock_ns(&m, last, r->t);
		m.off = p->mono_off;
		r->mono = tscfk_clock_ns(&m, last, r->t);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (p->seq != seq)
			continue;
		/* Stale: nobody moved it on for longer than it holds. */
		return r->t < last || r->t - last <= max ? PAGE_READ : PAGE_BUSY;
	}
	return PAGE_BUSY;
}

static bool read_kernel_page(const volatile struct tsc_timepage *p, bool rdtscp,
			     struct page_now *r)
{
	return page_read(p, rdtscp, r) == PAGE_READ;
}

/* REALTIME - MONOTONIC and BOOTTIME - MONOTONIC by clock_gettime(), the narrowest of a few. */
static void sample_syscall(struct shot *k)
{
	k->width = UINT64_MAX;
	for (int i = 0; i < SAMPLES; i++) {
		int64_t m1 = tsc__ns_now(CLOCK_MONOTONIC);
		int64_t r = realtime();
		int64_t b = tsc__ns_now(CLOCK_BOOTTIME);
		int64_t m2 = tsc__ns_now(CLOCK_MONOTONIC);

		if ((uint64_t)(m2 - m1) < k->width) {
			k->width = (uint64_t)(m2 - m1);
			k->mono = (uint64_t)m1;
			k->real_mono = r - m1;
			k->boot_mono = b - m1;
		}
	}
}

/* Whether the CPU has rdtscp: 1, 0, or -1 not yet asked (CPUID: no lock, no once). */
static int has_rdtscp = -1;

/*
 * The TSC between two readings of MONOTONIC_RAW, all on one CPU (rdtscp
 * before, at and after say which; without rdtscp, cpu UINT32_MAX: any):
 * the narrowest of a few; width 0 if the thread moved every time.
 */
static void sample_rate(struct rate_pair *r)
{
	int rdtscp = __atomic_load_n(&has_rdtscp, __ATOMIC_RELAXED);

	if (rdtscp < 0) {
		struct tsc__order_cpu cpu;

		tsc__order_cpu(&cpu);
		rdtscp = cpu.rdtscp;
		__atomic_store_n(&has_rdtscp, rdtscp, __ATOMIC_RELAXED);
	}
	*r = (struct rate_pair){ .width = 0 };
	for (int i = 0; i < SAMPLES; i++) {
		unsigned int c0 = UINT32_MAX, c1 = UINT32_MAX, c2 = UINT32_MAX;
		int64_t r1, r2;
		uint64_t t;

		if (rdtscp)
			(void)__builtin_ia32_rdtscp(&c0);
		r1 = raw_now();
		t = rdtscp ? __builtin_ia32_rdtscp(&c1) : tsc_rdtsc_ordered();
		__builtin_ia32_lfence();
		r2 = raw_now();
		if (rdtscp)
			(void)__builtin_ia32_rdtscp(&c2);
		if (c0 != c1 || c1 != c2 || r2 < r1)
			continue;
		if (!r->width || (uint64_t)(r2 - r1) + 1 < r->width)
			*r = (struct rate_pair){ .t = t, .ns = r1, .width = (uint64_t)(r2 - r1) + 1,
						 .cpu = c1 };
	}
}

/*
 * The hypervisor's page read twice, and between the two its counter was
 * disrupted: either field moved.
 */
static bool vm_moved(const struct tsc__vmclock *o, const struct tsc__vmclock *k)
{
	return o->present && k->present &&
	       (o->marker != k->marker || (o->has_gen && k->has_gen && o->gen != k->gen));
}

/*
 * Off the page, what the readings follow and do not show: the kernel's
 * clocksource, and the module's page file, whose inode a reload makes
 * anew.  A refresh compares them with the last (source_moved()); one it
 * could not read ("", UINT64_MAX) is taken as the last.
 */
static void read_source(const char *root, struct shot *k)
{
	char path[4096];
	struct stat st;

	tsc__clocksource(root, k->clocksource, sizeof(k->clocksource));
	tsc__clear_error();
	snprintf(path, sizeof(path), "%s%s", root, TSC__PAGE_FILE);
	if (!stat(path, &st))
		k->page_ino = (uint64_t)st.st_ino;
	else
		k->page_ino = errno == ENOENT ? 0 : UINT64_MAX;
}

/*
 * Off the page both times, from o to clocksource cs and the page file's
 * inode ino: another clocksource, or the module loaded, unloaded or anew.
 */
static bool source_moved(const struct judged *o, const char *cs, uint64_t ino)
{
	return (o->clocksource[0] && cs[0] && strcmp(o->clocksource, cs) != 0) ||
	       (o->page_ino != UINT64_MAX && ino != UINT64_MAX && o->page_ino != ino);
}

/*
 * A state as of now, of page p (the kernel's, or another: then
 * clock_gettime()'s); by the refresher (cache), or by a reader for itself.
 * The clock is read before the NTP state, so that the growth counts from
 * no later than the kernel's maxerror was read: a second's turn between
 * the two would otherwise go uncounted.
 */
static void take(struct state *s, const volatile struct tsc_timepage *p, bool rdtscp,
		 bool cache, struct shot *k, uint64_t *now)
{
	enum page_got got = PAGE_OFF;
	struct page_now r;
	struct tsc__ntp n;

	*k = (struct shot){ .taken = true, .page_ino = UINT64_MAX };
	/*
	 * The rate first: an event after it is seen by this refresh, or by
	 * the next.  Then what the readings follow: on the page, read before
	 * it (the page file then is the page read, or the page is gone by
	 * then); off it, read again after it, so that a switch away in
	 * between is seen there.  One back to tsc just before that read is
	 * on the page by then (the kernel names the clocksource once its
	 * clocks read it), and taken as that, once.
	 */
	if (cache) {
		sample_rate(&k->raw);
		read_source(root_of(s), k);
	}
	if (p && p == s->line.page)
		got = page_read(p, rdtscp, &r);
	if (got != PAGE_READ && cache) {
		read_source(root_of(s), k);
		if (got == PAGE_OFF && p && p == s->line.page)
			got = page_read(p, rdtscp, &r);
	}
	if (got == PAGE_READ) {
		/* The page reads the TSC, whatever the clocksource's name was just before. */
		snprintf(k->clocksource, sizeof(k->clocksource), "tsc");
		k->on_page = true;
		k->page = p;
		k->generation = r.generation;
		k->t = r.t;
		k->ns_per_tick = r.ns_per_tick;
		k->mono = r.mono;
		k->real_mono = r.real_mono;
		k->boot_mono = r.boot_mono;
		*now = r.real;
	} else {
		sample_syscall(k);
		*now = k->mono + (uint64_t)k->real_mono;
		k->busy = got == PAGE_BUSY;
	}
	k->vm_err = tsc__vmclock_read(&k->vm);
	if (cache && vm_moved(&s->vm_seen, &k->vm))
		__atomic_store_n(&s->skew_after_ns, migration_seen(), __ATOMIC_RELAXED);
	tsc__ntp_read(&n);
	k->ntp_mono = (uint64_t)tsc__ns_now(CLOCK_MONOTONIC);
	tsc__bound_base(&n, skew_of(s, cache), k->on_page ? 1 : 0, *now, &k->base);
	k->flags = k->base.flags;
	/* The disruption's bookkeeping reads it: kept with the shot. */
	k->maxerror_us = n.known ? n.maxerror_us : -1;
}

/* The marker moved since shot k's reference: the slow path's check, between refreshes. */
static bool vm_marker_moved(const struct shot *k)
{
	return k->vm_ref.present && *tsc__vmclock_marker() != k->vm_ref.marker;
}

/*
 * The TSC's rate against MONOTONIC_RAW moved by more than
 * TSC_BOUND_DRIFT_PPM: over RATE_MIN_NS at least from the anchor,
 * MONOTONIC_RAW's ns per tick against the reference, beyond both
 * intervals' uncertainty (their brackets, and twice the CPUs' skew where
 * the two pairs are two CPUs').  The first such interval sets the
 * reference, if it is narrow enough (RATE_ERR_MAX); one that moved drops
 * it, so that a change within an interval is counted once, and the next
 * sets it again.  Judged on the kernel's page only, where the bounded
 * readers read the TSC and MONOTONIC_RAW is the TSC at the kernel's
 * rate: it sees that rate (tsc_khz) change.  Elsewhere the bound reads
 * clock_gettime(), whatever the TSC does.  After a resume (the TSC may
 * have restarted), a migration (another host's TSC), a change of path,
 * or a vmclock that would not settle, anchored again at the next refresh.
 */
static bool rate_moved(struct state *s, struct shot *k, bool anew)
{
	const struct rate_pair *a = &s->rate_from;
	uint64_t skew;
	double d_ns, per_tick, err;
	bool changed;

	k->raw.on_page = k->on_page;
	k->raw.skew_ns = k->base.flags & TSC_BOUND_SKEW_UNKNOWN ? UINT64_MAX : k->base.skew_ns;
	if (anew) {
		s->rate_from = (struct rate_pair){ .width = 0 };
		s->rate_ref = 0;
		return false;
	}
	skew = a->cpu == k->raw.cpu && a->cpu != UINT32_MAX ? 0 :
	       a->skew_ns > k->raw.skew_ns ? a->skew_ns : k->raw.skew_ns;
	if (!a->width || !k->raw.width || !a->on_page || !k->on_page || k->raw.t <= a->t ||
	    k->raw.ns <= a->ns || skew == UINT64_MAX) {
		/* Nothing to judge from: anchored here. */
		s->rate_from = k->raw;
		return false;
	}
	if (k->raw.ns - a->ns < RATE_MIN_NS)
		return false;
	d_ns = (double)(k->raw.ns - a->ns);
	per_tick = d_ns / (double)(k->raw.t - a->t);
	err = ((double)a->width + (double)k->raw.width + 2.0 * (double)skew) / d_ns;
	changed = s->rate_ref > 0 &&
		fabs(per_tick / s->rate_ref - 1) > TSC_BOUND_DRIFT_PPM * 1e-6 + err + s->rate_ref_err;
	if (changed) {
		s->rate_ref = 0;
	} else if (s->rate_ref <= 0 && err <= RATE_ERR_MAX) {
		s->rate_ref = per_tick;
		s->rate_ref_err = err;
	}
	s->rate_from = k->raw;
	return changed;
}

/*
 * What shot k saw of the readings' path, for the next judge(); what it
 * could not read of the source, as the last saw.
 */
static struct judged seen_by(const struct shot *k, const struct judged *last)
{
	struct judged j = *last;

	j.taken = true;
	j.unsure = false;
	j.inherited = false;
	j.on_page = k->on_page;
	j.page = k->page;
	j.generation = k->generation;
	j.real_mono = k->real_mono;
	j.boot_mono = k->boot_mono;
	j.width = k->width;
	if (k->clocksource[0])
		memcpy(j.clocksource, k->clocksource, sizeof(j.clocksource));
	if (k->page_ino != UINT64_MAX)
		j.page_ino = k->page_ino;
	j.source_read = k->clocksource[0] && k->page_ino != UINT64_MAX;
	return j;
}

/*
 * The readings' path changed from o to shot k: another page (the module
 * loaded anew, for a state that goes on from another's); the page and
 * clock_gettime(); or off the page, what they follow (source_moved()).
 * A state's own page withdrawn or back always counts: the module takes
 * its file away before it marks its page gone, and the kernel names the
 * clocksource it left tsc for only after the page went, so the source
 * read beside the page may still say it is there.  Between the page and
 * another state's record (count_on()) it counts unless that other read
 * the TSC through clock_gettime() by the same page file: two ways to one
 * clock, a clock set up beside another.  What either could not read of
 * the source counts as a change there.
 */
static bool path_moved(const struct judged *o, const struct shot *k)
{
	const char *off = o->on_page ? k->clocksource : o->clocksource;
	uint64_t ino = o->page_ino;

	if (o->on_page && k->on_page)
		return o->page != k->page;
	if (o->on_page != k->on_page)
		return !o->inherited || !o->source_read || !k->clocksource[0] ||
		       k->page_ino == UINT64_MAX || strcmp(off, "tsc") != 0 || !ino ||
		       ino != k->page_ino;
	return source_moved(o, k->clocksource, k->page_ino);
}

/*
 * The refresher's part: k against the last shot judged; the caller holds
 * refreshing.  A busy page's shot (page_read()) is judged against nothing
 * and leaves nothing to judge the next by: no bound until one is read.
 */
static void judge(struct state *s, struct shot *k)
{
	const struct shot *o = &s->shot;
	struct judged j = o->judged;
	bool step = false, resume = false, path = false, unsure = j.unsure;
	bool vm = vm_moved(&s->vm_seen, &k->vm), rate;
	long maxerror = k->maxerror_us;

	memcpy(k->by_cause, o->by_cause, sizeof(k->by_cause));
	k->disruptions = o->disruptions;
	if (!k->busy) {
		if (j.taken) {
			/*
			 * A generation that moved with the offsets where they
			 * were (the kernel calls its clock set for more than
			 * steps) on the page both times changed nothing a
			 * reading sees.
			 */
			path = path_moved(&j, k);
			if (!path && (!k->on_page || j.generation != k->generation)) {
				uint64_t slack = j.width + k->width;

				/*
				 * A resume moves REALTIME and BOOTTIME against
				 * MONOTONIC alike, by the time asleep; only a
				 * step moves REALTIME against BOOTTIME.
				 */
				step = moved(k->real_mono - k->boot_mono, j.real_mono - j.boot_mono,
					     slack);
				resume = moved(k->boot_mono, j.boot_mono, slack);
			}
		}
		j = seen_by(k, &j);
	} else {
		k->flags |= TSC_BOUND_DISRUPTED;
	}
	k->by_cause[TSC_DISRUPTION_STEP] += step;
	k->by_cause[TSC_DISRUPTION_RESUME] += resume;
	k->by_cause[TSC_DISRUPTION_CLOCKSOURCE] += path;
	k->by_cause[TSC_DISRUPTION_VMCLOCK] += vm;
	rate = rate_moved(s, k, resume || vm || path || k->busy || k->vm_err == -EAGAIN);
	k->by_cause[TSC_DISRUPTION_RATE] += rate;
	k->disruptions += step + resume + path + vm + rate;
	/*
	 * A read that would not settle is compared with no one: the last
	 * good one stays, and the bound is unknown (uncounted) until one does.
	 */
	if (k->vm.present)
		s->vm_seen = k->vm;
	else if (k->vm_err == -EAGAIN)
		k->flags |= TSC_BOUND_DISRUPTED;
	k->vm_ref = s->vm_seen;
	/* One that went on from a state it could not copy starts disrupted, uncounted. */
	if (step || resume || path || vm || rate || (unsure && !k->busy)) {
		j.disrupted = true;
		j.disrupted_maxerror_us = maxerror;
		j.disrupted_mono = k->ntp_mono;
	} else if (j.disrupted && maxerror >= 0) {
		/*
		 * The kernel alone grows it 500 us at each turn of a second;
		 * lower than that, the daemon set it.  The turns counted are
		 * no more than the kernel's: from no earlier than the first
		 * read to no later than this one (a refresher preempted
		 * around either would count one the kernel never added), less
		 * one, since the kernel adds a turn at its next tick, which a
		 * descheduled vCPU may take up to a second to run.
		 */
		uint64_t secs = k->mono > j.disrupted_mono + 1000000000 ?
				(k->mono - j.disrupted_mono) / 1000000000 - 1 : 0;
		long grown = j.disrupted_maxerror_us + (long)(secs * 500);

		if (maxerror < grown && maxerror < PHASE_LIMIT_US)
			j.disrupted = false;
	}
	if (j.disrupted || unsure)
		k->flags |= TSC_BOUND_DISRUPTED;
	k->judged = j;
}

/* Publish k, as the fast path reads it; the caller holds refreshing. */
static void publish(struct state *s, struct shot *k)
{
	struct tsc__bound *l = &s->line;
	uint64_t base = bound_ns(&k->base, k->flags, 0);
	double per_tick = k->on_page ? k->ns_per_tick : 0;

	/* TSC_BOUND_DRIFT_PPM of a tick, rounded up, and a part in 10^6 for the rate's own error. */
	k->growth_frac = base == UINT64_MAX || per_tick <= 0 ? 0 :
			 (uint64_t)ceil(ldexp(per_tick * TSC_BOUND_DRIFT_PPM * 1e-6 * (1 + 1e-6), 64));
	__atomic_store_n(&l->seq, l->seq | 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
#ifdef TSC__TEST_HOOKS
	{
		unsigned int pause_us = __atomic_load_n(&tsc__test_publish_pause_us, __ATOMIC_RELAXED);

		if (pause_us) {
			__atomic_store_n(&tsc__test_publishing, 1, __ATOMIC_RELEASE);
			usleep(pause_us);
			__atomic_store_n(&tsc__test_publishing, 0, __ATOMIC_RELEASE);
		}
	}
#endif
	s->shot = *k;
	l->generation = k->generation;
	/* The marker the readers compare with: the last read that settled. */
	l->vm_marker = k->vm_ref.marker;
	l->flags = k->flags;
	l->disruptions = k->disruptions;
	/*
	 * The page (l->page) is the state's for good.  A shot taken without
	 * it (the page unusable) gives no fast path: max_age 0.
	 */
	l->as_of = k->t;
	l->max_age = per_tick > 0 ? (uint64_t)(REFRESH_NS / per_tick) : 0;
	l->base_ns = base;
	l->growth_frac = k->growth_frac;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&l->seq, (l->seq | 1) + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&s->published, true, __ATOMIC_RELEASE);
}

/* A copy of the published shot: false if a refresh is under way. */
static bool copy_shot(const struct state *s, struct shot *k)
{
	for (int tries = 0; tries < 3; tries++) {
		uint32_t seq = __atomic_load_n(&s->line.seq, __ATOMIC_ACQUIRE);

		if (seq & 1)
			continue;
		*k = s->shot;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&s->line.seq, __ATOMIC_RELAXED) == seq)
			return k->taken;
	}
	return false;
}

/*
 * A refresh publishing copies a shot, a few cache lines: a reader that
 * finds one under way waits that out, boundedly, for the state it gives
 * (true: copied into k).  One that would wait longer (the refresher
 * preempted there, or interrupted by this reader's own signal handler)
 * gives up.  Before the first publish there is nothing to wait for.
 */
static bool publish_waited(const struct state *s, struct shot *k)
{
	if (!__atomic_load_n(&s->published, __ATOMIC_ACQUIRE))
		return false;
	for (int i = 0; i < PUBLISH_SPINS; i++) {
		__builtin_ia32_pause();
		if (copy_shot(s, k))
			return true;
	}
	return false;
}

#define COPY_YIELDS	100	/* a set-up yields this often for a state held up publishing */

/*
 * The state a new one of root goes on from: of those read (published),
 * the one with the most disruptions (of equals, one whose shot could be
 * copied), its shot copied as a reader copies it into k; NULL if none
 * was read.  One held up publishing (its refresher preempted there) is
 * waited for, yielding, a bounded while: then its count alone (the fast
 * path's), and k untaken.
 */
static struct state *go_on_from(const struct state *s, struct shot *k)
{
	struct state *from = NULL;

	for (struct state *o = states; o; o = o->next) {
		struct shot c;
		int tries = 0;

		if (o == s || strcmp(o->root, s->root) != 0 ||
		    !__atomic_load_n(&o->published, __ATOMIC_ACQUIRE))
			continue;
		while (!copy_shot(o, &c) && !publish_waited(o, &c)) {
			if (++tries == COPY_YIELDS) {
				c = (struct shot){ .taken = false };
				c.disruptions = __atomic_load_n(&o->line.disruptions,
								__ATOMIC_RELAXED);
				break;
			}
			sched_yield();
		}
		if (!from || c.disruptions > k->disruptions ||
		    (c.disruptions == k->disruptions && c.taken && !k->taken)) {
			*k = c;
			from = o;
		}
	}
	return from;
}

/*
 * A state no reader has read yet (new, or the root's page-less one, which
 * every set-up makes first) goes on from the others of its root, at each
 * set-up that gets it (go_on_from()): their count, what they judged last,
 * which its first refresh judges against, the hypervisor's marker as they
 * last read it, and the migration their skew waits to be measured since.
 * So a clock set up anew never shows fewer disruptions than one set up
 * before it; one more where it reads by another path than that one did
 * (the page and not, or a page the module has since replaced), or a step
 * or a resume came between; and a disruption not yet over goes on.  One
 * it could not copy leaves it disrupted from its first refresh, uncounted.
 * A state already read keeps its count, which its readers have seen.
 * Under states_lock, and as its refresher: a refresh under way has a
 * reader, and this waits for none.  The others' refreshers never take
 * states_lock, so waiting out their publish is bounded.
 */
static void count_on(struct state *s)
{
	int idle = 0;
	struct state *from;
	uint64_t after;
	struct shot k;

	if (!__atomic_compare_exchange_n(&s->refreshing, &idle, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return;
	if (__atomic_load_n(&s->published, __ATOMIC_ACQUIRE))
		goto out;
	from = go_on_from(s, &k);
	if (!from)
		goto out;
	if (k.taken) {
		s->shot.judged = k.judged;
		s->shot.judged.inherited = true;
		if (k.vm_ref.present)
			s->vm_seen = k.vm_ref;
	} else {
		s->shot.judged = (struct judged)JUDGED_NONE;
		s->shot.judged.unsure = true;
	}
	after = __atomic_load_n(&from->skew_after_ns, __ATOMIC_RELAXED);
	if (after > __atomic_load_n(&s->skew_after_ns, __ATOMIC_RELAXED))
		__atomic_store_n(&s->skew_after_ns, after, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seeded, true, __ATOMIC_RELAXED);
	if (k.disruptions > s->shot.disruptions) {
		s->shot.disruptions = k.disruptions;
		if (k.taken)
			memcpy(s->shot.by_cause, k.by_cause, sizeof(k.by_cause));
		__atomic_store_n(&s->line.disruptions, k.disruptions, __ATOMIC_RELAXED);
	}
out:
	__atomic_store_n(&s->refreshing, 0, __ATOMIC_RELEASE);
}

/* Refresh, if nobody is: true if this call did. */
static bool refresh(struct state *s, const volatile struct tsc_timepage *p, bool rdtscp)
{
	struct shot k;
	uint64_t now;
	int idle = 0;

	if (!__atomic_compare_exchange_n(&s->refreshing, &idle, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return false;
	take(s, p, rdtscp, true, &k, &now);
	judge(s, &k);
	publish(s, &k);
	__atomic_store_n(&s->refreshing, 0, __ATOMIC_RELEASE);
	return true;
}

/* The reading and its bound from shot k, the clock at now, age_ns after it. */
static void result(const struct shot *k, uint64_t now, uint64_t growth_ns, uint64_t age_ns,
		   struct tsc_time_bound *out, struct tsc_bound_terms *terms)
{
	uint32_t flags = k->flags | (age_ns >= STALE_NS ? TSC_BOUND_STALE : 0);
	uint64_t w = bound_ns(&k->base, flags, growth_ns), leap = 0;

	if ((flags & TSC_BOUND_LEAP) && now - k->base.leap_from < 2000000000u) {
		leap = 1000000000u;
		w = w + leap > w ? w + leap : UINT64_MAX;
	}
	*out = (struct tsc_time_bound){
		.earliest = now > w ? now - w : 0,
		.latest = now + w >= now ? now + w : UINT64_MAX,
		.now = now, .flags = flags, .disruptions = k->disruptions,
	};
	if (!terms)
		return;
	terms->now = now;
	terms->maxerror_ns = k->base.maxerror_ns;
	terms->growth_ns = GROWTH_STEP_NS + growth_ns;
	terms->slewing_ns = k->base.slewing_ns;
	terms->reading_ns = k->base.reading_ns;
	terms->skew_ns = k->base.skew_ns;
	terms->leap_ns = leap;
	terms->bound_ns = w;
	terms->esterror_ns = k->base.esterror_ns;
	terms->age_ns = age_ns;
	terms->flags = flags;
	terms->disruptions = k->disruptions;
	memcpy(terms->by_cause, k->by_cause, sizeof(terms->by_cause));
	terms->vmclock_marker = k->vm.present ? k->vm.marker : k->vm_ref.marker;
	terms->vmclock_status = k->vm.present ? k->vm.status :
				k->vm_err == -EACCES ? -2 : k->vm_err == -EAGAIN ? -3 : -1;
}

/*
 * The slow path: refresh if due and nobody is, then read.  A reading
 * that disagrees with the state (a generation moved on, a step seen)
 * refreshes first; if another thread is refreshing, it reads from a
 * state of its own, taken now and not published.
 */
void tsc__bounded(struct tsc__bound *const *slot_b,
		  const volatile struct tsc_timepage *const *slot_p, const uint32_t *use_rdtscp,
		  struct tsc_time_bound *out, struct tsc_bound_terms *terms)
{
	struct tsc__bound *b = __atomic_load_n(slot_b, __ATOMIC_ACQUIRE);
	const volatile struct tsc_timepage *p = __atomic_load_n(slot_p, __ATOMIC_ACQUIRE);
	bool rdtscp = __atomic_load_n(use_rdtscp, __ATOMIC_RELAXED);
	struct state *s = b ? (struct state *)b : &fallback;
	int saved = errno;
	bool vm_tried = false;	/* refreshed for a marker that moved: once is enough */
	struct shot k;

	for (int tries = 0; tries < 3; tries++) {
		bool fresh = false, vm;
		struct page_now r;
		uint64_t now, m;

		if (!copy_shot(s, &k)) {
			fresh = refresh(s, p, rdtscp);
			if (fresh && tries < 2)
				continue;	/* read again, after it */
			if (!copy_shot(s, &k) && !publish_waited(s, &k)) {
				/*
				 * Another thread's refresh under way: its first,
				 * or one held up publishing.  A state of this
				 * reader's own.  Before the first was published,
				 * there is nothing to judge it against, unless the
				 * state goes on from another's; then, or after, it
				 * is not judged (a step, a resume, the hypervisor's
				 * marker, a change of path, a disruption not yet
				 * over): no bound for this reading, as a reader
				 * that finds a refresh under way below.
				 */
				take(s, p, rdtscp, false, &k, &now);
				if (__atomic_load_n(&s->published, __ATOMIC_ACQUIRE) ||
				    __atomic_load_n(&s->seeded, __ATOMIC_RELAXED))
					k.flags |= TSC_BOUND_DISRUPTED;
				k.disruptions = __atomic_load_n(&s->line.disruptions, __ATOMIC_RELAXED);
				result(&k, now, 0, 0, out, terms);
				goto done;
			}
		}
		if (k.on_page) {
			bool usable = p == s->line.page && read_kernel_page(p, rdtscp, &r) &&
				      r.generation == k.generation;
			uint64_t age = usable && r.t > k.t ? r.t - k.t : 0;

			vm = vm_marker_moved(&k);

			/* Refreshed first if the page or the marker moved on, or a second passed. */
			if ((!usable || (vm && !vm_tried) || (double)age * k.ns_per_tick >= REFRESH_NS) &&
			    !fresh && refresh(s, p, rdtscp)) {
				vm_tried |= vm;
				continue;
			}
			if (!usable)
				continue;	/* another thread refreshes: again */
			/* Another thread refreshes, or the page would not settle: no bound yet. */
			if (vm)
				k.flags |= TSC_BOUND_DISRUPTED;
			result(&k, r.real, tsc_mul_frac(age, k.growth_frac),
			       (uint64_t)((double)age * k.ns_per_tick), out, terms);
			goto done;
		}
		if (p == s->line.page && p && read_kernel_page(p, rdtscp, &r)) {
			/* A page again, where the state was taken without: refresh. */
			if (!fresh)
				(void)refresh(s, p, rdtscp);
			continue;
		}
		/*
		 * A second on, or a step back (the difference wraps), or the
		 * hypervisor's marker moved: refreshed first.  If another
		 * thread refreshes, not bounded until it has.
		 */
		now = (uint64_t)realtime();
		vm = vm_marker_moved(&k);
		if ((now - (k.mono + (uint64_t)k.real_mono) >= REFRESH_NS || (vm && !vm_tried)) &&
		    !fresh && refresh(s, p, rdtscp)) {
			vm_tried |= vm;
			continue;
		}
		if (vm)
			k.flags |= TSC_BOUND_DISRUPTED;
		/*
		 * MONOTONIC after REALTIME: the age, counted to no earlier than
		 * the reading; and REALTIME - MONOTONIC, which only a step moves
		 * (or a read preempted between the two: seen again, bracketed).
		 */
		m = (uint64_t)tsc__ns_now(CLOCK_MONOTONIC);
		if (moved((int64_t)(now - m), k.real_mono, k.width)) {
			struct shot c = { .taken = true };

			sample_syscall(&c);
			if (moved(c.real_mono, k.real_mono, k.width + c.width)) {
				if (!fresh && refresh(s, p, rdtscp))
					continue;
				/* Another thread refreshes: not bounded until it has. */
				k.flags |= TSC_BOUND_DISRUPTED;
			}
		}
		{
			uint64_t age = m > k.mono ? m - k.mono : 0;
			uint64_t growth = (uint64_t)ceil((double)age * TSC_BOUND_DRIFT_PPM * 1e-6 *
							 (1 + 1e-6));

			result(&k, now, growth, age, out, terms);
		}
		goto done;
	}
	/* The state would not settle (a generation moving under every try): no bound. */
	*out = (struct tsc_time_bound){ 0, UINT64_MAX, (uint64_t)tsc__ns_now(CLOCK_REALTIME),
					TSC_BOUND_DISRUPTED,
					__atomic_load_n(&s->line.disruptions, __ATOMIC_RELAXED) };
	if (terms) {
		terms->now = out->now;
		terms->bound_ns = UINT64_MAX;
		terms->flags = out->flags;
		terms->disruptions = out->disruptions;
		terms->vmclock_status = -1;
	}
done:
	errno = saved;
}

int tsc__bound_terms(struct tsc__bound *const *slot_b,
		     const volatile struct tsc_timepage *const *slot_p, const uint32_t *use_rdtscp,
		     struct tsc_bound_terms *t)
{
	struct tsc_time_bound b;
	size_t sz = t->sz;

	tsc__clear_error();
	if (sz < sizeof(*t))
		return tsc__fail(-EINVAL, "terms->sz is %zu, under this library's %zu: declare them with TSC_BOUND_TERMS()",
				 sz, sizeof(*t));
	/* A later header's fields, past this library's, are left as they are: zero. */
	memset(t, 0, sizeof(*t));
	t->sz = sz;
	tsc__bounded(slot_b, slot_p, use_rdtscp, &b, t);
	return 0;
}

void tsc__sysclock_bounded_slow(const struct tsc_sysclock *c, struct tsc_time_bound *b)
{
	tsc__bounded(&c->bound, &c->page, &c->use_rdtscp, b, NULL);
}

int tsc_sysclock_bound_terms(const struct tsc_sysclock *c, struct tsc_bound_terms *t)
{
	return tsc__bound_terms(&c->bound, &c->page, &c->use_rdtscp, t);
}
