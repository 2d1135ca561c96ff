// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The system's own clocks from the kernel's mapping (the tsc_freq_khz
 * module's tsc/clock_page), or from clock_gettime() where there is none.
 *
 * The page is mapped once per sysfs root and never unmapped: a reader on
 * another thread may hold its address at any time.  A mapping outlives the
 * module; an unloaded module's page says GONE, and the next
 * tsc_sysclock_init() maps the new one (4 KiB left behind per reload).
 *
 * The page holds the clocks of the initial time namespace.  In a time
 * namespace whose offsets are not zero, clock_gettime() adds them (the
 * vDSO has a page of its own for that); the library takes that path then.
 * The module refuses mmap() there (EOPNOTSUPP), but a mapping made before
 * a move is kept, so which namespace a process is in, the library also
 * learns by evidence: a page reading of MONOTONIC and BOOTTIME must lie
 * between two clock_gettime() calls, at init and again in the child of
 * every fork() (pthread_atfork), since a parent's unshare(CLONE_NEWTIME)
 * moves its children, not itself, and /proc/self/timens_offsets shows the
 * children's namespace.  A child whose clocks the page does not tell has
 * the page replaced, at the same address, by one that sends every reader
 * to clock_gettime().
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tsc_clock_page.h"

/* The public view is the first cache line of the module's layout. */
#define SAME(field) \
	_Static_assert(offsetof(struct tsc_timepage, field) == \
		       offsetof(struct tscfk_clock_page, field), #field " moved")
SAME(version);
SAME(flags);
SAME(seq);
SAME(generation);
SAME(mult_ns);
SAME(cycle_last);
SAME(mult);
SAME(frac);
SAME(real_off);
SAME(mono_off);
SAME(boot_off);
_Static_assert(sizeof(struct tsc_timepage) == 64, "one cache line");
_Static_assert(TSC_TIMEPAGE_TSC == TSCFK_CLOCK_TSC && TSC_TIMEPAGE_GONE == TSCFK_CLOCK_GONE,
	       "flags differ");
_Static_assert(offsetof(struct tsc_sysclock, sz) == 64, "the hot line overflowed");

#ifdef TSC__TEST_HOOKS
unsigned int tsc__test_slow_path_spin;
unsigned long tsc__test_page_waits_abandoned;
#endif

/* What a clock without a usable page reads: seq odd, no TSC. */
const struct tsc_timepage tsc__syscall_page __attribute__((aligned(64))) = {
	.version = TSCFK_CLOCK_PAGE_VERSION,
	.seq = 1,
};

/* Each root's page, newest first; entries live as long as the process. */
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mapped {
	struct mapped *next;
	const volatile struct tsc_timepage *page;
	char root[];
} *mapped;

/* Map root's clock page: 0, or a negative errno and the reason. */
static int map_page(const char *root, const volatile struct tsc_timepage **out)
{
	char path[512];
	struct stat st;
	void *p;
	int fd, err;

	snprintf(path, sizeof(path), "%s%s", root, TSC__PAGE_FILE);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		if (err == ENOENT)
			return tsc__fail(-ENOENT, "no %s: the tsc_freq_khz module (1.1 or later) is not loaded",
					 path);
		return tsc__fail(-err, "%s: %s", path, strerror(err));
	}
	/* A page wholly past the file's end would be a SIGBUS at first read. */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_size < (off_t)sizeof(struct tsc_timepage)) {
		close(fd);
		return tsc__fail(-EPROTO, "%s: not a file of a clock page's size", path);
	}
	p = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, fd, 0);
	err = errno;
	close(fd);
	if (p == MAP_FAILED && err == EOPNOTSUPP)
		return tsc__fail(-err, "mmap of %s: refused in a time namespace with offsets: the page holds the initial namespace's clocks",
				 path);
	if (p == MAP_FAILED)
		return tsc__fail(-err, "mmap of %s: %s", path, strerror(err));
	if (((const volatile struct tsc_timepage *)p)->version < 1) {
		munmap(p, (size_t)sysconf(_SC_PAGESIZE));
		return tsc__fail(-EPROTO, "%s: layout version 0, not a clock page", path);
	}
	*out = p;
	return 0;
}

/*
 * The page of root, mapped once; mapped anew if the one held is of an
 * unloaded module.  The old mapping stays: a reader may still be in it.
 */
static int page_of(const char *root, const volatile struct tsc_timepage **out)
{
	struct mapped *m;
	int err = 0;

	pthread_mutex_lock(&map_lock);
	for (m = mapped; m && strcmp(m->root, root) != 0; m = m->next)
		;
	if (!m) {
		size_t len = strlen(root) + 1;

		m = calloc(1, sizeof(*m) + len);
		if (!m) {
			err = tsc__fail(-ENOMEM, "out of memory");
			goto out;
		}
		memcpy(m->root, root, len);
		m->next = mapped;
		mapped = m;
	}
	if (!m->page || (m->page->flags & TSC_TIMEPAGE_GONE))
		err = map_page(root, &m->page);
	if (!err)
		*out = m->page;
out:
	pthread_mutex_unlock(&map_lock);
	return err;
}

/*
 * The offsets of CLOCK_MONOTONIC and CLOCK_BOOTTIME (which CLOCK_REALTIME
 * has none of) in the time namespace of this process's children, which
 * is its own unless it called unshare(CLONE_NEWTIME) since it was
 * forked, in ns; 0 for none.  No file (a kernel before 5.6, or no
 * /proc): none.
 */
void tsc__timens_offsets(int64_t *mono_ns, int64_t *boot_ns)
{
	char buf[256], *line, *next;
	ssize_t n;
	int fd = open("/proc/self/timens_offsets", O_RDONLY | O_CLOEXEC);

	*mono_ns = *boot_ns = 0;
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	/* "monotonic 1000 0": a name, seconds, nanoseconds. */
	for (line = buf; *line; line = next) {
		size_t name = strcspn(line, " \t");
		char *end;
		long long sec = strtoll(line + name, &end, 10);
		long long nsec = strtoll(end, &end, 10);

		next = line + strcspn(line, "\n");
		if (*next)
			next++;
		if (name == 9 && !strncmp(line, "monotonic", 9))
			*mono_ns = (int64_t)sec * 1000000000 + nsec;
		else if (name == 8 && !strncmp(line, "boottime", 8))
			*boot_ns = (int64_t)sec * 1000000000 + nsec;
	}
}

/*
 * Those offsets: 0 if none, 1 and the reason if there are.  The weaker
 * evidence, for a page that cannot be read now (page_tells_our_clocks()).
 */
static int offsets_for_children(char *why, size_t size)
{
	int64_t mono, boot;

	tsc__timens_offsets(&mono, &boot);
	if (mono || boot) {
		int64_t off = mono ? mono : boot;

		snprintf(why, size, "clock_gettime(): the time namespace offsets %s by %lld s %lld ns, which the kernel's page does not hold",
			 mono ? "monotonic" : "boottime", (long long)(off / 1000000000),
			 (long long)(off % 1000000000));
		return 1;
	}
	return 0;
}

/*
 * The page *where points to, loaded anew each time (a disciplined clock's
 * writer swaps pages), once its seq is even; NULL for no page (a clock
 * never initialised, zeroed), for a page not to be used (seq odd, no
 * TSC) that *where still points to, unchanged, or once *tries reaches
 * 100000 (a write that never ends).  A page left by a swap (odd, no TSC)
 * that *where no longer points to, or that was written again since its
 * seq was read (refilled, and perhaps given back), is read afresh.  seq
 * odd with TSC is a write under way: wait for it, briefly; the kernel
 * writes a few dozen bytes.
 */
static const volatile struct tsc_timepage *
page_begin(const volatile struct tsc_timepage *const *where, uint32_t *seq, int *tries)
{
	for (; *tries < 100000; ++*tries) {
		const volatile struct tsc_timepage *p = __atomic_load_n(where, __ATOMIC_ACQUIRE);

		if (!p)
			return NULL;
#ifdef TSC__TEST_HOOKS
		for (unsigned int i = __atomic_load_n(&tsc__test_slow_path_spin, __ATOMIC_RELAXED);
		     i; i--)
			__builtin_ia32_pause();
#endif
		*seq = p->seq;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		/* Even, and still the one given: not one a sync filled and has yet to give. */
		if (!(*seq & 1)) {
			if (__atomic_load_n(where, __ATOMIC_ACQUIRE) != p)
				continue;
			return p;
		}
		if (!(p->flags & TSC_TIMEPAGE_TSC)) {
			if (__atomic_load_n(where, __ATOMIC_ACQUIRE) != p ||
			    __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE) != *seq)
				continue;
			return NULL;
		}
		__builtin_ia32_pause();
	}
#ifdef TSC__TEST_HOOKS
	__atomic_fetch_add(&tsc__test_page_waits_abandoned, 1, __ATOMIC_RELAXED);
#endif
	return NULL;
}

/*
 * One reading of a page: the TSC, the page's cycle_last, the clock, the
 * bound it is read to, and the clock at cycle_last + bound (the most a
 * reader within the bound can have had from the page); whether the page
 * is the library's own, and how far before cycle_last the TSC read, in
 * ns (0 if not before).
 */
struct page_reading {
	uint64_t t, last, ns, bound, at_bound, behind_ns;
	bool own;
};

/*
 * One reading of clock (TSC__SYSCLOCK_*) from the page *where points to,
 * the TSC read ordered (rdtscp, or lfence; rdtsc), as the fast path
 * orders, bounded by bound (a page its readers sync: by its own
 * max_cycles, bound being when they sync; any other of the library's own
 * pages: by its own too where that is less, so that a bound loaded
 * before a swap to a hold, a page of bound 0, is not the hold's): false
 * where page_begin() gives no page.
 */
static bool read_page(const volatile struct tsc_timepage *const *where, int clock,
		      bool rdtscp, uint64_t bound, struct page_reading *r)
{
	const volatile struct tsc_timepage *p;
	uint32_t seq;

	for (int tries = 0; (p = page_begin(where, &seq, &tries)); tries++) {
		const volatile struct tscfk_clock_page *kp = (const volatile void *)p;
		struct tscfk_clock_map m = {
			.mult_ns = p->mult_ns, .mult = p->mult, .frac = p->frac,
			.off = clock == TSC__SYSCLOCK_REALTIME ? p->real_off :
			       clock == TSC__SYSCLOCK_MONOTONIC ? p->mono_off : p->boot_off,
		};
		uint64_t last = p->cycle_last, b = bound;
		uint16_t flags = p->flags;
		uint64_t t;

		if ((flags & TSC__TIMEPAGE_OWN) &&
		    ((flags & TSC__TIMEPAGE_READERS) || kp->max_cycles < b))
			b = kp->max_cycles;
		t = rdtscp ? tsc__rdtscp() : tsc_rdtsc_ordered();
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (p->seq == seq) {
			/* Whole ns per tick times a gap of 2^40 and more: far enough. */
			uint64_t gap = t < last ? last - t : 0;

			*r = (struct page_reading){
				t, last, tscfk_clock_ns(&m, last, t), b,
				tscfk_clock_ns(&m, last, last + b),
				tsc_mul_frac(gap, m.mult) + (gap < (1ull << 40) ? gap : 1ull << 40) * m.mult_ns,
				flags & TSC__TIMEPAGE_OWN,
			};
			return true;
		}
	}
	return false;
}

/*
 * Does the kernel's page tell this process's MONOTONIC and BOOTTIME?  A
 * page reading must lie between two clock_gettime() calls: the page is
 * the kernel's own mapping, the same arithmetic on the same TSC.  In a
 * time namespace with offsets it is off by them.  A few tries each:
 * across an NTP adjustment the page and the vDSO differ by a nanosecond
 * for a moment (the ABI document), and a try may be preempted.  1 if they
 * agree, 0 and the reason if not; for a page that cannot be read now,
 * what /proc/self/timens_offsets says.
 */
static int page_tells_our_clocks(const volatile struct tsc_timepage *p, char *why, size_t size)
{
	static const struct {
		int clock;
		clockid_t id;
		const char *name;
	} clocks[] = {
		{ TSC__SYSCLOCK_MONOTONIC, CLOCK_MONOTONIC, "MONOTONIC" },
		{ TSC__SYSCLOCK_BOOTTIME, CLOCK_BOOTTIME, "BOOTTIME" },
	};

	for (size_t i = 0; i < sizeof(clocks) / sizeof(clocks[0]); i++) {
		int64_t off = 0;
		int tries;

		for (tries = 0; tries < 5; tries++) {
			int64_t a = tsc__ns_now(clocks[i].id), b;
			struct page_reading r;

			if (!read_page(&p, clocks[i].clock, false, 0, &r))
				return !offsets_for_children(why, size);
			b = tsc__ns_now(clocks[i].id);
			if ((int64_t)r.ns >= a && (int64_t)r.ns <= b)
				break;
			off = a + (b - a) / 2 - (int64_t)r.ns;
		}
		if (tries == 5) {
			snprintf(why, size, "clock_gettime(): this process's %s is %lld ns off the kernel's page (a time namespace's offset), which holds the initial namespace's clocks",
				 clocks[i].name, (long long)off);
			return 0;
		}
	}
	return 1;
}

/*
 * The system's own sysfs, whose page is the kernel's and must tell this
 * process's clocks: the default root (/sys, or where TSC_SYSFS_ROOT
 * points it).  Another root a caller names holds a page of its own, a
 * test's, which need not.
 */
static bool system_root(const char *root)
{
	return strcmp(root, tsc__sysfs_root(NULL)) == 0;
}

uint64_t tsc__page_max_delta(const volatile struct tscfk_clock_page *p)
{
	uint64_t mult = p->kernel_mult, max = INT64_MAX;

	if (p->version >= 2 && p->max_cycles)
		max = p->max_cycles;
	else if (mult)	/* clocks_calc_max_nsecs(): what mult, and 11 % more, keep in 64 bits */
		max = UINT64_MAX / (mult + mult * 11 / 100);
	/* Below 2^63: a reading before cycle_last, which wraps, is past it. */
	return max < INT64_MAX ? max : INT64_MAX;
}

/*
 * A fork's child whose clocks the page does not tell: in its place, at
 * the same address, a page that sends every reader to clock_gettime()
 * (seq odd, no TSC) and says GONE, so that the next init maps the
 * module's afresh, and finds out for itself.
 */
static void replace_in_child(struct mapped *m)
{
	size_t size = (size_t)sysconf(_SC_PAGESIZE);
	struct tscfk_clock_page *p = mmap((void *)m->page, size, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

	/* Refused (out of memory): the page stays, there is nothing better. */
	if (p == MAP_FAILED)
		return;
	p->version = TSCFK_CLOCK_PAGE_VERSION;
	p->flags = TSCFK_CLOCK_GONE;
	p->seq = 1;
	(void)mprotect(p, size, PROT_READ);
}

/*
 * fork(): the locks of the mapped pages and of the disciplined clocks are
 * held across it, so that the child finds both lists whole; then the
 * child's clocks are checked.  Only the system's page is held to the
 * child's clocks.
 */
static void fork_prepare(void)
{
	pthread_mutex_lock(&map_lock);
	tsc__discipline_fork_lock();
	tsc__bound_fork_lock();
}

static void fork_parent(void)
{
	tsc__bound_fork_unlock();
	tsc__discipline_fork_unlock();
	pthread_mutex_unlock(&map_lock);
}

static void fork_child(void)
{
	char why[256];

	tsc__bound_forked();
	tsc__discipline_forked();
	tsc__time_forked();
	for (struct mapped *m = mapped; m; m = m->next) {
		if (m->page && system_root(m->root) && !(m->page->flags & TSC_TIMEPAGE_GONE) &&
		    !page_tells_our_clocks(m->page, why, sizeof(why)))
			replace_in_child(m);
	}
	pthread_mutex_unlock(&map_lock);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static int fork_err;

static void register_fork_handlers(void)
{
	fork_err = pthread_atfork(fork_prepare, fork_parent, fork_child);
}

int tsc__fork_handlers(void)
{
	pthread_once(&fork_once, register_fork_handlers);
	return fork_err;
}

/*
 * The path without the kernel's mapping: a disciplined clock if asked for
 * and possible, clock_gettime() otherwise; t->why holds why there is no
 * kernel mapping, and gets the rest.
 */
static void without_kernel(const struct tsc__clock_target *t, const char *root,
			   enum tsc_sysclock_discipline disc, bool inherit,
			   const struct tsc_freq *freq)
{
	const struct tsc__discipline_slots at = { t->page, t->bound };
	char no_kernel[sizeof(((struct tsc_sysclock *)0)->why)];
	struct tsc__discipline *d;
	int n;

	if (disc == TSC_DISCIPLINE_NONE)
		return;
	/* "clock_gettime(): " leads the reason: the rest says why. */
	snprintf(no_kernel, sizeof(no_kernel), "%s", t->why + strlen("clock_gettime(): "));
	if (tsc__discipline_start(&at, root, disc, inherit, freq, t->why, t->why_size, &d)) {
		snprintf(t->why, t->why_size, "clock_gettime(): no disciplined clock: %.250s; and %.200s",
			 tsc_last_error(), no_kernel);
		tsc__clear_error();
		return;
	}
	__atomic_store_n(t->disc, d, __ATOMIC_RELEASE);
	*t->path = TSC_SYSCLOCK_DISCIPLINED;
	n = (int)strlen(t->why);
	snprintf(t->why + n, t->why_size - (size_t)n, "; not exact: %s", no_kernel);
}

void tsc__clock_stop(const struct tsc__clock_target *t)
{
	struct tsc__discipline *d = *t->disc;

	/* Disciplined before: its helper stopped first, or it would publish again. */
	if (d) {
		tsc__discipline_stop(d);
		__atomic_store_n(t->disc, NULL, __ATOMIC_RELEASE);
	}
	__atomic_store_n(t->page, &tsc__syscall_page, __ATOMIC_RELEASE);
	*t->path = TSC_SYSCLOCK_SYSCALL;
}

int tsc__clock_setup(const struct tsc__clock_target *t, const char *root,
		     enum tsc_sysclock_discipline disc, enum tsc_sysclock_order order,
		     bool inherit, const struct tsc_freq *freq)
{
	const volatile struct tsc_timepage *p = &tsc__syscall_page;
	struct tsc__order_cpu cpu;
	uint32_t use_rdtscp;
	int err;

	tsc__order_cpu(&cpu);
	err = tsc__order_pick(&cpu, order, &use_rdtscp);
	if (err)
		return err;
	if (tsc__fork_handlers())
		return tsc__fail(-fork_err, "pthread_atfork: %s", strerror(fork_err));
	root = tsc__sysfs_root(root);
	/* Either way orders: a reader may see the old one or the new. */
	__atomic_store_n(t->use_rdtscp, use_rdtscp, __ATOMIC_RELAXED);
	*t->path = TSC_SYSCLOCK_SYSCALL;
	/* The bounded readers' state: clock_gettime()'s, unless the kernel's page is read. */
	__atomic_store_n(t->bstate, tsc__bound_get(root, NULL), __ATOMIC_RELEASE);
	if (page_of(root, &p)) {
		snprintf(t->why, t->why_size, "clock_gettime(): %s", tsc_last_error());
		tsc__clear_error();
		without_kernel(t, root, disc, inherit, freq);
		return 0;
	}
	/* A disciplined clock follows clock_gettime(), the namespace's. */
	if (system_root(root) && !page_tells_our_clocks(p, t->why, t->why_size)) {
		without_kernel(t, root, disc, inherit, freq);
		return 0;
	}
	/* The page follows the kernel from now on, whatever it says now. */
	if (p->flags & TSC_TIMEPAGE_TSC) {
		*t->path = TSC_SYSCLOCK_KERNEL;
		snprintf(t->why, t->why_size,
			 "the kernel's own mapping from the TSC to its clocks (tsc_freq_khz's clock_page, generation %u): exact",
			 (unsigned int)p->generation);
	} else {
		char cs[32];

		tsc__clocksource(root, cs, sizeof(cs));
		snprintf(t->why, t->why_size,
			 "clock_gettime(): the kernel's clocks do not read the TSC (clocksource %s); reads take the page's fast path again when they do",
			 cs[0] ? cs : "unknown");
		without_kernel(t, root, disc, inherit, freq);
		if (*t->path == TSC_SYSCLOCK_DISCIPLINED)
			return 0;
	}
	/* The page, then its bound: see tsc__clock_slow(). */
	__atomic_store_n(t->page, p, __ATOMIC_RELEASE);
	__atomic_store_n(t->bound, tsc__page_max_delta((const volatile void *)p),
			 __ATOMIC_RELEASE);
	{
		struct tsc__bound *b = tsc__bound_get(root, p);

		if (b)
			__atomic_store_n(t->bstate, b, __ATOMIC_RELEASE);
	}
	return 0;
}

/* A struct tsc_sysclock's own fields, as tsc__clock_setup() sets them. */
static struct tsc__clock_target target_of(struct tsc_sysclock *c)
{
	return (struct tsc__clock_target){
		.page = &c->page, .bound = &c->max_delta, .use_rdtscp = &c->use_rdtscp,
		.path = &c->path, .why = c->why, .why_size = sizeof(c->why), .disc = &c->disc,
		.bstate = &c->bound,
	};
}

/* An init that failed once the clock was torn down: it says so, and err. */
static int failed(struct tsc_sysclock *c, int err)
{
	snprintf(c->why, sizeof(c->why), "clock_gettime(): tsc_sysclock_init() failed: %s",
		 tsc_last_error());
	return err;
}

int tsc_sysclock_init(struct tsc_sysclock *c, const struct tsc_sysclock_opts *opts)
{
	enum tsc_sysclock_discipline disc = TSC_DISCIPLINE_NONE;
	enum tsc_sysclock_order order = TSC_ORDER_AUTO;
	const struct tsc__clock_target t = target_of(c);
	const char *root = NULL;
	bool inherit = false;
	size_t sz;
	int err;

	/*
	 * First of all, a page that sends every read to clock_gettime(): a
	 * clock that failed to initialise still reads the time, and threads
	 * reading a clock initialised again see the old page or the new one,
	 * never none.  (The page pointer is at offset 0, in any clock.)
	 */
	tsc__clear_error();
	if (c->sz < offsetof(struct tsc_sysclock, reserved)) {
		__atomic_store_n(&c->page, &tsc__syscall_page, __ATOMIC_RELEASE);
		return tsc__fail(-EINVAL, "clock->sz is %zu: declare the clock with TSC_SYSCLOCK()",
				 c->sz);
	}
	tsc__clock_stop(&t);
	if (opts) {
		err = tsc__opts_check(opts, opts->sz, sizeof(*opts), "TSC_SYSCLOCK_OPTS");
		if (err)
			return failed(c, err);
		root = TSC__OPT(opts, struct tsc_sysclock_opts, sysfs_root);
		disc = TSC__OPT(opts, struct tsc_sysclock_opts, discipline);
		if (disc < TSC_DISCIPLINE_NONE || disc > TSC_DISCIPLINE_READERS)
			return failed(c, tsc__fail(-EINVAL, "discipline %d: not one of enum tsc_sysclock_discipline",
						   (int)disc));
		order = TSC__OPT(opts, struct tsc_sysclock_opts, order);
		inherit = TSC__OPT(opts, struct tsc_sysclock_opts, helper_inherit);
		if (TSC__OPT(opts, struct tsc_sysclock_opts, adjtimex_allowed))
			tsc__adjtimex_allow();
	}
	sz = c->sz;
	memset(&c->hot_reserved32, 0, (sz < sizeof(*c) ? sz : sizeof(*c)) -
	       offsetof(struct tsc_sysclock, hot_reserved32));
	c->sz = sz;
	c->path = TSC_SYSCLOCK_SYSCALL;
	err = tsc__clock_setup(&t, root, disc, order, inherit, NULL);
	return err ? failed(c, err) : 0;
}

int tsc_sysclock_sync(struct tsc_sysclock *c)
{
	tsc__clear_error();
	if (!c->disc && c->path == TSC_SYSCLOCK_DISCIPLINED)
		return tsc__fail(-EINVAL, "a disciplined clock no more: tsc_sysclock_fini() was called");
	if (!c->disc)
		return tsc__fail(-EINVAL, "not a disciplined clock: %s", c->why);
	return tsc__discipline_sync(c->disc);
}

void tsc_sysclock_fini(struct tsc_sysclock *c)
{
	const struct tsc__clock_target t = target_of(c);
	enum tsc_sysclock_path path = c->path;

	tsc__clock_stop(&t);
	c->path = path;		/* as tsc_sysclock_sync(3) says */
}

static uint64_t gettime(int clock)
{
	static const clockid_t ids[] = { CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME };

	return (uint64_t)tsc__ns_now(ids[clock]);
}

/*
 * Ordered as the fast path orders, whichever reader came here; and not
 * from a stale page, which nobody moved on for longer than it holds, but
 * clock_gettime()'s.  MONOTONIC and BOOTTIME from a stale page are never
 * below the page at its bound, the most any reader within the bound had
 * from it: a page ahead of the system's clocks (a disciplined one may be
 * by its error, or after a suspend by what the TSC counted and MONOTONIC
 * did not) holds there until they catch up, rather than going back.  A
 * kernel's page more than TSC__FLOOR_MAX_NS ahead is not held to: only a
 * TSC that jumped puts the system's own clock there.  REALTIME, which the
 * system's steps may take back, is held only on the library's own page,
 * only by up to TSC__FLOOR_MAX_NS (its error): further ahead, the system's
 * REALTIME was stepped back, and the reading follows it.
 *
 * A reading before the page's cycle_last counts as cycle_last, as the
 * kernel counts it (this CPU's TSC a little behind the one that wrote
 * it), but on the library's own page more than TSC__SKEW_NS before: that
 * TSC was reset (a resume from S3), and the page tells nothing of now,
 * so the reading is a stale one's; and on a hold page (bound 0) any
 * reading but its start is, whose REALTIME is the system's.
 *
 * A clock its readers sync gives them a bound of a period, past which
 * they come here and the first of them syncs; the page itself is read to
 * its own max_cycles (read_page()), so that the others need not wait for
 * that sync, nor leave the page for clock_gettime() meanwhile.
 *
 * The bound is loaded before the page, which its writers store first
 * (release, both): a new bound comes with its new page.  An old bound
 * with a new page is looser for a moment; a new bound, shorter, with the
 * old page would send readers here early, and hold them below the old
 * page's readings.
 */
uint64_t tsc__clock_slow(const volatile struct tsc_timepage *const *page,
			 const uint64_t *bound, const uint32_t *use_rdtscp,
			 struct tsc__discipline *d, int clock)
{
	struct page_reading r;
	uint64_t max_delta, ns;
	int saved = errno;

	if (clock < TSC__SYSCLOCK_REALTIME || clock > TSC__SYSCLOCK_BOOTTIME)
		clock = TSC__SYSCLOCK_MONOTONIC;
	/* A clock its readers sync: this one may, first. */
	if (d)
		tsc__discipline_poll(d, tsc_rdtsc_ordered());
	max_delta = __atomic_load_n(bound, __ATOMIC_ACQUIRE);
	if (!read_page(page, clock, __atomic_load_n(use_rdtscp, __ATOMIC_RELAXED), max_delta, &r)) {
		ns = gettime(clock);
	} else if (r.t >= r.last ? r.t - r.last <= r.bound :
		   !r.own || (r.bound && r.behind_ns <= TSC__SKEW_NS)) {
		ns = r.ns;
	} else {
		ns = gettime(clock);
		if (r.at_bound > ns && (clock == TSC__SYSCLOCK_REALTIME ?
					r.own && r.at_bound - ns <= TSC__FLOOR_MAX_NS :
					r.own || r.at_bound - ns <= TSC__FLOOR_MAX_NS))
			ns = r.at_bound;
	}
	errno = saved;
	return ns;
}

uint64_t tsc__sysclock_slow_bounded(const struct tsc_sysclock *c, int clock)
{
	return tsc__clock_slow(&c->page, &c->max_delta, &c->use_rdtscp,
			       __atomic_load_n(&c->disc, __ATOMIC_ACQUIRE), clock);
}

uint64_t tsc__sysclock_slow(const struct tsc_sysclock *c, int clock)
{
	return tsc__sysclock_slow_bounded(c, clock);
}

int tsc__discipline_helper(const struct tsc_sysclock *c, pthread_t *thread)
{
	return tsc__discipline_thread(c->disc, thread);
}

int tsc_sysclock_rate(const struct tsc_sysclock *c, uint64_t *millihz)
{
	uint32_t seq;

	tsc__clear_error();
	for (int tries = 0; ; tries++) {
		const volatile struct tsc_timepage *p = __atomic_load_n(&c->page, __ATOMIC_ACQUIRE);
		/* The rest of the module's layout, beyond the first cache line. */
		const volatile struct tscfk_clock_page *kp;
		struct tscfk_clock_page k = { 0 };

		if (!p || p == &tsc__syscall_page)
			return tsc__fail(-ENODATA, "no rate: %s", c->why[0] ? c->why :
					 "the clock was not initialised");
		p = page_begin(&c->page, &seq, &tries);
		if (!p)
			break;
		kp = (const volatile void *)p;
		k.flags = kp->flags;
		k.cycle_interval = kp->cycle_interval;
		k.ntp_tick = kp->ntp_tick;
		k.max_cycles = kp->max_cycles;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (p->seq != seq)
			continue;
		if ((k.flags & TSC__TIMEPAGE_OWN) && !k.max_cycles)
			return tsc__fail(-ENODATA, "no rate: the clock holds still after a suspend until the system's MONOTONIC catches up (tsc_sysclock_sync(3))");
		*millihz = tscfk_clock_rate_millihz(&k);
		if (!*millihz)
			return tsc__fail(-ERANGE, "the page's cycle_interval %llu and ntp_tick %llu give no rate",
					 (unsigned long long)k.cycle_interval,
					 (unsigned long long)k.ntp_tick);
		return 0;
	}
	return tsc__fail(-ENODATA, "no rate: the kernel's clocks do not read the TSC now");
}
