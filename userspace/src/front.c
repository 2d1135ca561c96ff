// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The front door: one process-wide system clock that its first read sets
 * up, with no declaration and no init (tsc_realtime_ns() and the other
 * readers, inline in libtsc.h), and the TSC's frequency for tick deltas.
 *
 * The clock is set up as tsc_sysclock_init(3) sets a struct tsc_sysclock
 * up (tsc__clock_setup()): the kernel's page where the module is loaded,
 * else a clock disciplined by its own readers (no thread; a helper if
 * asked), else clock_gettime().  What its readers touch is the exported
 * tsc__time, one cache line that never grows: a program may hold a copy
 * of it (a copy relocation), made at link time.  The rest is kept here.
 *
 * Until it is set up, tsc__time.page is NULL and every read comes here:
 * the first to come sets it up; any other that comes meanwhile reads
 * clock_gettime() rather than wait (a try-lock), so that a reader in a
 * signal handler never waits for the thread it interrupted.  Calls that
 * are not readers (tsc_time_setup(), tsc_time_path()) wait on the lock,
 * asleep, for a set-up under way.  The frequency is a second once-only
 * setup of its own, made by the first call that needs it: the clock does
 * not (where it is disciplined, it starts from a short calibration and
 * measures the rest).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "internal.h"

_Static_assert(sizeof(struct tsc__time) == 64, "tsc__time is one cache line, for good");
_Static_assert(offsetof(struct tsc__time, page) == offsetof(struct tsc_sysclock, page) &&
	       offsetof(struct tsc__time, use_rdtscp) == offsetof(struct tsc_sysclock, use_rdtscp) &&
	       offsetof(struct tsc__time, max_delta) == offsetof(struct tsc_sysclock, max_delta) &&
	       offsetof(struct tsc__time, bound) == offsetof(struct tsc_sysclock, bound),
	       "the front door's hot line is a system clock's");

struct tsc__time tsc__time;

static struct {
	pthread_mutex_t lock;		/* held while the clock is set up */
	bool set;			/* it was (read without the lock by readers) */
	struct tsc_time_opts opts;	/* as tsc_time_setup() was last given */
	enum tsc_sysclock_path path;
	char why[512];
	struct tsc__discipline *disc;
} clk = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct {
	pthread_once_t once;
	int err;
	char why[TSC__REASON_SIZE];
	struct tsc_freq f;
	struct tsc_conv conv;
} freq = { .once = PTHREAD_ONCE_INIT };

static struct tsc__clock_target target(void)
{
	return (struct tsc__clock_target){
		.page = &tsc__time.page, .bound = &tsc__time.max_delta,
		.use_rdtscp = &tsc__time.use_rdtscp, .path = &clk.path,
		.why = clk.why, .why_size = sizeof(clk.why), .disc = &clk.disc,
		.bstate = &tsc__time.bound,
	};
}

/* Set the clock up as clk.opts says; the caller holds the lock. */
static int set_up(void)
{
	const struct tsc__clock_target t = target();
	enum tsc_sysclock_discipline how = clk.opts.exact_or_syscall ? TSC_DISCIPLINE_NONE :
					   clk.opts.helper ? TSC_DISCIPLINE_HELPER :
					   TSC_DISCIPLINE_READERS;
	int err;

	tsc__clock_stop(&t);
	err = tsc__clock_setup(&t, NULL, how, TSC_ORDER_AUTO, false, NULL);
	if (err)
		snprintf(clk.why, sizeof(clk.why), "clock_gettime(): setting the clock up failed: %s",
			 tsc_last_error());
	__atomic_store_n(&clk.set, true, __ATOMIC_RELEASE);
	return err;
}

/*
 * The clock, set up by this thread if nobody has: true if it is; false
 * if another thread is setting it up (wait is false: a reader, which
 * does not wait).
 */
static bool ensure(bool wait)
{
	if (__atomic_load_n(&clk.set, __ATOMIC_ACQUIRE))
		return true;
	if (wait)
		pthread_mutex_lock(&clk.lock);
	else if (pthread_mutex_trylock(&clk.lock))
		return false;
	if (!clk.set) {
		(void)set_up();	/* a failure reads clock_gettime(), and why says so */
		tsc__clear_error();
	}
	pthread_mutex_unlock(&clk.lock);
	return true;
}

/*
 * A reader's set-up, if none was made: errno kept around it (it opens
 * files); the reads after keep errno themselves.
 */
static inline void reader_ensure(void)
{
	if (!__atomic_load_n(&clk.set, __ATOMIC_ACQUIRE)) {
		int saved = errno;

		(void)ensure(false);
		errno = saved;
	}
}

uint64_t tsc__time_slow(int clock)
{
	/*
	 * Where the clock is clock_gettime(), every read comes here: once it
	 * is set up, this costs what the struct reader's slow path does (a
	 * tail call; tsc__clock_slow() keeps errno itself).
	 */
	reader_ensure();
	return tsc__clock_slow(&tsc__time.page, &tsc__time.max_delta, &tsc__time.use_rdtscp,
			       __atomic_load_n(&clk.disc, __ATOMIC_ACQUIRE), clock);
}

/*
 * A bounded reading, the clock set up first if need be (a reader: it
 * does not wait; tsc__bounded() keeps errno itself).
 */
void tsc__time_bounded_slow(struct tsc_time_bound *b)
{
	reader_ensure();
	tsc__bounded(&tsc__time.bound, &tsc__time.page, &tsc__time.use_rdtscp, b, NULL);
}

int tsc_time_bound_terms(struct tsc_bound_terms *t)
{
	(void)ensure(true);
	return tsc__bound_terms(&tsc__time.bound, &tsc__time.page, &tsc__time.use_rdtscp, t);
}

int tsc_time_setup(const struct tsc_time_opts *opts)
{
	struct tsc_time_opts o = { .sz = sizeof(o) };
	int err;

	tsc__clear_error();
	if (opts) {
		err = tsc__opts_check(opts, opts->sz, sizeof(*opts), "TSC_TIME_OPTS");
		if (err)
			return err;
		o.exact_or_syscall = TSC__OPT(opts, struct tsc_time_opts, exact_or_syscall);
		o.helper = TSC__OPT(opts, struct tsc_time_opts, helper);
		if (o.exact_or_syscall && o.helper)
			return tsc__fail(-EINVAL, "exact_or_syscall and helper: a helper disciplines a clock that exact_or_syscall refuses");
		if (TSC__OPT(opts, struct tsc_time_opts, adjtimex_allowed))
			tsc__adjtimex_allow();
	}
	/* Not a reader: this waits for a set-up under way on another thread. */
	pthread_mutex_lock(&clk.lock);
	clk.opts = o;
	err = set_up();
	pthread_mutex_unlock(&clk.lock);
	return err;
}

enum tsc_sysclock_path tsc_time_path(const char **why)
{
	enum tsc_sysclock_path path;

	(void)ensure(true);
	path = clk.path;
	if (why)
		*why = clk.why;
	return path;
}

/*
 * The frequency, once: tsc_freq_get()'s best, as a struct tsc_clock's.
 * A failure stays, with its reason.
 */
static void get_freq(void)
{
	freq.err = tsc_freq_get(&freq.f, NULL);
	if (!freq.err)
		freq.err = tsc_conv_init(&freq.conv, freq.f.num, freq.f.den);
	if (freq.err)
		snprintf(freq.why, sizeof(freq.why), "%s", tsc_last_error());
}

/* The frequency's conversion, or NULL and the reason. */
static const struct tsc_conv *conv(void)
{
	pthread_once(&freq.once, get_freq);
	if (!freq.err)
		return &freq.conv;
	tsc__fail(freq.err, "no TSC frequency: %s", freq.why);
	return NULL;
}

uint64_t tsc_delta_to_ns(uint64_t ticks)
{
	const struct tsc_conv *c = conv();

	return c ? tsc_ticks_to_ns(c, ticks) : 0;
}

uint64_t tsc_delta_to_ticks(uint64_t ns)
{
	const struct tsc_conv *c = conv();

	return c ? tsc_ns_to_ticks(c, ns) : 0;
}

/* num / den, rounded to the nearest multiple of unit. */
static uint64_t rounded(uint64_t unit)
{
	__extension__ typedef unsigned __int128 u128;
	u128 den;

	if (!conv())
		return 0;
	den = (u128)freq.f.den * unit;
	return (uint64_t)(((u128)freq.f.num + den / 2) / den);
}

uint64_t tsc_hz(void)
{
	return rounded(1);
}

uint64_t tsc_khz(void)
{
	return rounded(1000);
}

/*
 * In a fork's child, the only thread: the clock goes on as the child
 * finds it (the fork handlers saw to its page), but a disciplined one
 * the child may not keep (a helper's, which does not run here) reads
 * clock_gettime(), and says so.  A set-up under way on another thread of
 * the parent is made again by the child's first read.  No lock taken, no
 * formatting: the child of a threaded parent may call little more than
 * async-signal-safe functions.
 */
void tsc__time_forked(void)
{
	static const char gone[] = "clock_gettime(): a fork's child, where the parent's disciplined clock does not run (tsc_time_setup() sets one up here)";

	pthread_mutex_init(&clk.lock, NULL);
	if (clk.disc && !tsc__discipline_usable(clk.disc)) {
		clk.disc = NULL;
		clk.path = TSC_SYSCLOCK_SYSCALL;
		memcpy(clk.why, gone, sizeof(gone));
	}
}
