/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libtsc: the x86 Time Stamp Counter for userspace, trusted.
 *
 * Quick start: the time in one call, with no declaration and no init
 * (link with `pkg-config --libs libtsc`, or -ltsc; static: add -lm -pthread).
 *
 *	uint64_t now = tsc_realtime_ns();	CLOCK_REALTIME in ns; also
 *						tsc_monotonic_ns(), tsc_boottime_ns()
 *	uint64_t t0 = tsc_ticks();		the TSC itself
 *	uint64_t ns = tsc_delta_to_ns(tsc_ticks() - t0);	ticks to ns
 *	uint64_t khz = tsc_khz();		the TSC's frequency (tsc_hz() in Hz)
 *	const char *why;
 *	tsc_time_path(&why);			how the clock reads, and why
 *	struct tsc_time_bound b;
 *	tsc_realtime_bounded(&b);		REALTIME, and the interval UTC is in
 *
 * Every reader is ordered (a reading taken after seeing another thread's
 * is never earlier) unless its name ends in _unordered.  The first read
 * sets the clock up: where the tsc_freq_khz module is loaded, the kernel's
 * own mapping from the TSC, exactly clock_gettime()'s; else a clock of the
 * library's own that its readers slew onto the system's (no thread; within
 * about a microsecond while the system's rate holds, and off by up to a
 * second's worth of a change of it, 0.5 ms at NTP's 500 ppm, until the
 * next sync: tsc_time_setup(3), NOTES); else clock_gettime().
 * tsc_time_setup(3) chooses otherwise; tsc(7) has the rest.
 *
 * Below: clocks and frequencies of a program's own (struct tsc_sysclock,
 * struct tsc_clock, struct tsc_freq), and whether TSC readings agree
 * across CPUs (struct tsc_report).  Functions return 0 or a negative
 * errno, and tsc_last_error() says why in words; nothing prints.  A man
 * page per function.
 */
#ifndef LIBTSC_H
#define LIBTSC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Names whose meaning the 1.3 rule contradicts (every reader is ordered
 * unless its name ends in _unordered; a name that takes an absolute
 * reading says so) stay, with a warning where a program uses them;
 * TSC_NO_DEPRECATION_WARNINGS, defined before this header, silences it.
 * The init functions' results must be checked: a clock that failed reads
 * clock_gettime() at best.
 */
#ifdef TSC_NO_DEPRECATION_WARNINGS
#define TSC__DEPRECATED(why)
#else
#define TSC__DEPRECATED(why) __attribute__((deprecated(why)))
#endif
#define TSC__MUST_CHECK __attribute__((warn_unused_result))

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The front door (1.3): tsc_time_setup(3) ---- */

/* How a system clock reads the time; tsc_sysclock_init(3). */
enum tsc_sysclock_path {
	TSC_SYSCLOCK_NONE = 0,
	TSC_SYSCLOCK_KERNEL,	/* the kernel's own mapping: its clocks, exactly */
	TSC_SYSCLOCK_SYSCALL,	/* clock_gettime(), for the reason in why */
	TSC_SYSCLOCK_DISCIPLINED, /* the library's own mapping, slewed onto the system's */
};

/* CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME in ns, as clock_gettime() gives them. */
static inline uint64_t tsc_realtime_ns(void);
static inline uint64_t tsc_monotonic_ns(void);
static inline uint64_t tsc_boottime_ns(void);
/* The same, the TSC read in no order with earlier loads: for stamps within one thread. */
static inline uint64_t tsc_realtime_ns_unordered(void);
static inline uint64_t tsc_monotonic_ns_unordered(void);
static inline uint64_t tsc_boottime_ns_unordered(void);
/* The TSC, read once every earlier load has completed; and in no order. */
static inline uint64_t tsc_ticks(void);
static inline uint64_t tsc_ticks_unordered(void);
/* A number of TSC ticks (a difference of two readings) in ns, and back. */
uint64_t tsc_delta_to_ns(uint64_t ticks);
uint64_t tsc_delta_to_ticks(uint64_t ns);
/* The TSC's frequency, rounded; 0 if none is known (tsc_last_error() says why). */
uint64_t tsc_hz(void);
uint64_t tsc_khz(void);
/* How the clock reads the time, and (if why) why, in words. */
enum tsc_sysclock_path tsc_time_path(const char **why);

/* Options: declare with TSC_TIME_OPTS(name, .field = value, ...). */
struct tsc_time_opts {
	size_t sz;		/* set by TSC_TIME_OPTS */
	/*
	 * Where the kernel's own mapping cannot be used, clock_gettime():
	 * never a disciplined clock, whose readings may be ahead of the
	 * kernel's by its error (a deadline for clock_nanosleep() or a
	 * timerfd computed from one may fire that much early).
	 */
	bool exact_or_syscall;
	/* A disciplined clock synced by a thread of the library's, not by its readers. */
	bool helper;
	unsigned char tsc__reserved_1_3[6];	/* zero: see struct tsc_sysclock_opts */
	size_t :0;		/* later fields start here: see struct tsc_opts */
	bool adjtimex_allowed;	/* as in struct tsc_sysclock_opts (1.4) */
	unsigned char tsc__reserved_1_4[7];	/* zero */
	size_t :0;		/* and here */
};

/* Set the clock up now, as opts says (NULL: the default); 0 or a negative errno. */
TSC__MUST_CHECK int tsc_time_setup(const struct tsc_time_opts *opts);

/*
 * The macros that declare a struct (TSC_OPTS() and the others) set its sz,
 * which tells the library which version of the struct the caller has.
 * In C they take designated initialisers for the other fields.  In C++,
 * where those came only with C++20 and g++ warns of each field they leave
 * out, the name alone gives a value-initialised struct with sz set (a
 * constant initialiser from C++17 on), whose fields are then set by
 * assignment; with fields, the macros expand as in C.
 */
#ifdef __cplusplus
#if __cplusplus >= 201703L
#define TSC__CXX_CONSTEXPR constexpr
#else
#define TSC__CXX_CONSTEXPR
#endif
#define TSC__CXX_BARE(type, name)					\
	type name = []() TSC__CXX_CONSTEXPR {				\
		type tsc__v = {};					\
		tsc__v.sz = sizeof(type);				\
		return tsc__v;						\
	}()
#define TSC__CXX_FIELDS(type, name, ...) type name = { .sz = sizeof(type), __VA_ARGS__ }
/* The 17th argument: TSC__CXX_BARE for a name alone, TSC__CXX_FIELDS with fields. */
#define TSC__CXX_PICK(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, \
		      a16, which, ...) which
#define TSC__CXX_DECLARE(type, ...)					\
	TSC__CXX_PICK(__VA_ARGS__, TSC__CXX_FIELDS, TSC__CXX_FIELDS, TSC__CXX_FIELDS, \
		      TSC__CXX_FIELDS, TSC__CXX_FIELDS, TSC__CXX_FIELDS, TSC__CXX_FIELDS, \
		      TSC__CXX_FIELDS, TSC__CXX_FIELDS, TSC__CXX_FIELDS, TSC__CXX_FIELDS, \
		      TSC__CXX_FIELDS, TSC__CXX_FIELDS, TSC__CXX_FIELDS, TSC__CXX_FIELDS, \
		      TSC__CXX_BARE, )(type, __VA_ARGS__)
#else
/*
 * Called with an empty last argument: a name alone is then standard C
 * (ISO C wants an argument for a macro's "..."), and so is the
 * initialiser's trailing comma.
 */
#define TSC__DECLARE(type, name, ...) type name = { .sz = sizeof(type), __VA_ARGS__ }
#endif

#ifdef __cplusplus
#define TSC_TIME_OPTS(...) TSC__CXX_DECLARE(struct tsc_time_opts, __VA_ARGS__)
#else
#define TSC_TIME_OPTS(...) TSC__DECLARE(struct tsc_time_opts, __VA_ARGS__, )
#endif

/* Where a frequency came from; tsc_freq_get() ranks them as tsc(7) says. */
enum tsc_source {
	TSC_SOURCE_NONE = 0,
	TSC_SOURCE_SYSFS,	/* /sys/devices/system/cpu/cpu0/tsc_freq_khz */
	TSC_SOURCE_CPUID,	/* CPUID leaf 0x15 with its crystal */
	TSC_SOURCE_HYPERVISOR,	/* CPUID leaf 0x40000010 of a known hypervisor */
	TSC_SOURCE_CALIBRATION,	/* measured against CLOCK_MONOTONIC_RAW */
	TSC_SOURCE_PERF,	/* the kernel's conversion on a perf event's page */
};

/*
 * What a frequency's precision_ppm is relative to: every value is a rate
 * as some clock or figure gives it, and its precision says how far it may
 * be from that rate.  Two values confirm each other only if their
 * references differ; a calibration against CLOCK_MONOTONIC_RAW on the tsc
 * clocksource measures that clocksource's rate, made from the kernel's
 * tsc_khz (tsc(7), "Precision").
 */
enum tsc_reference {
	TSC_REFERENCE_UNSTATED = 0,	/* filled by a libtsc before 1.2 */
	TSC_REFERENCE_KERNEL,		/* the tsc clocksource's rate, MONOTONIC_RAW's: from tsc_khz */
	TSC_REFERENCE_HYPERVISOR,	/* the rate the hypervisor states for the guest's TSC */
	TSC_REFERENCE_CLOCKSOURCE,	/* CLOCK_MONOTONIC_RAW on a clocksource other than tsc */
	TSC_REFERENCE_TRUE,		/* the TSC's true rate: a rated crystal, a 1% estimate */
};

/*
 * Room in detail for the chosen source's account and every other
 * source's reason for being skipped, each in full (the library checks
 * this at build time): a reason is never cut short.
 */
#define TSC_DETAIL_SIZE 4096

/* A frequency: exactly num / den Hz. */
struct tsc_freq {
	enum tsc_source source;
	uint64_t num, den;
	double hz;		/* num / den, for display */
	/*
	 * How far hz may be from the rate of precision_of, in ppm, in at
	 * least 95% of cases (one meaning for every source): a calibration's
	 * two standard errors plus its clock's resolution at both ends; a
	 * rounding where that is all (a hypervisor's kHz, the kernel's
	 * multipliers); a crystal's stated tolerance; 1% for a kernel
	 * estimate maybe unrefined.
	 */
	double precision_ppm;
	enum tsc_reference precision_of;
	uint32_t reserved32;	/* zero: room to grow without a break */
	/*
	 * A hard bound, in ppm, on how far hz is from the rate of
	 * precision_of, where the source has one: sysfs and perf, which
	 * differ from the tsc clocksource's rate by the kernel's roundings of
	 * tsc_khz alone.
	 * 0: none (a measurement, a nominal crystal or hypervisor figure, a
	 * kernel estimate; a libtsc before 1.3).
	 */
	double bound_ppm;
	uint64_t reserved[2];	/* zero */
	/* Where exactly it came from, and why each better source was not used. */
	char detail[TSC_DETAIL_SIZE];
};

/* Options: declare with TSC_OPTS(name, .field = value, ...). */
struct tsc_opts {
	size_t sz;		/* sizeof(struct tsc_opts), set by TSC_OPTS */
	/* Root of sysfs; NULL: $TSC_SYSFS_ROOT if set, else "/sys". */
	const char *sysfs_root;
	/* Use only this source; TSC_SOURCE_NONE: the best available. */
	enum tsc_source source;
	/* Calibrations: stop at this precision or this time (0: 0.1 ppm, 1000 ms). */
	double calibrate_ppm;
	unsigned int calibrate_max_ms;
	/*
	 * Calibrate as well and fail with -ERANGE if the chosen value and
	 * the calibration differ by more than verify_ppm (0: 100 ppm).
	 */
	bool verify;
	double verify_ppm;
	/*
	 * Take a nominal source (CPUID's crystal, the hypervisor's leaf) as
	 * it is.  By default a 20 ms calibration must agree with it within
	 * verify_ppm, or the next source is tried.
	 */
	bool trust_nominal;
	/*
	 * Later fields start here, past the padding, so that the size tells
	 * every version apart (a field in the padding would not change it).
	 * A version's fields end with a named reserved field where they
	 * would leave padding (see struct tsc_sysclock_opts).
	 */
	size_t :0;
};

#ifdef __cplusplus
#define TSC_OPTS(...) TSC__CXX_DECLARE(struct tsc_opts, __VA_ARGS__)
#else
#define TSC_OPTS(...) TSC__DECLARE(struct tsc_opts, __VA_ARGS__, )
#endif

/*
 * Conversion parameters: ns = ticks * ns_int + ((ticks * ns_frac) >> 64),
 * ticks = ns * tk_int + ((ns * tk_frac) >> 64).  The fractions are rounded
 * up, so a result is the exact one rounded down, or one more.
 */
struct tsc_conv {
	uint64_t ns_int, ns_frac;
	uint64_t tk_int, tk_frac;
};

/*
 * A clock reading the TSC; read-only after tsc_clock_init().  Declare it
 * with TSC_CLOCK() (on the heap: aligned_alloc(64, ...), zeroed, sz set by
 * hand; see tsc_clock_init(3)): the library writes no further than sz, so a program
 * built against this header keeps working with a later libtsc whose
 * clock has grown, and a later program with this one.
 *
 * A read touches the first 64 bytes only, and the struct is aligned to
 * them: one cache line.  At TSC reading t the clock says
 * tsc_ticks_to_ns(&conv, t) - mono_off: converting the whole reading and
 * subtracting costs one instruction less than subtracting the anchor
 * first, and needs no care for readings before it.
 */
struct tsc_clock {
	/* What a read touches. */
	struct tsc_conv conv;
	uint64_t mono_off;	/* tsc_ticks_to_ns(base_ticks) - base_mono_ns */
	uint64_t real_off;	/* the same for CLOCK_REALTIME */
	/*
	 * A sequence counter for a clock that changes while it is read.
	 * The readers below do not read it, and live on in programs: so a
	 * clock tsc_clock_init() made never changes, in any libtsc, and
	 * seq stays 0.  A changing clock will have an init of its own,
	 * whose readers check seq.
	 */
	uint32_t seq;
	uint32_t hot_reserved[3];	/* zero */

	/* What the library keeps, reads never touch. */
	size_t sz;		/* sizeof(struct tsc_clock), set by TSC_CLOCK */
	uint64_t base_ticks;	/* TSC at the anchor */
	uint64_t base_mono_ns;	/* CLOCK_MONOTONIC at the anchor */
	uint64_t base_real_ns;	/* CLOCK_REALTIME at the anchor */
	uint64_t base_raw_ns;	/* CLOCK_MONOTONIC_RAW at the anchor */
	uint64_t base_boot_ns;	/* CLOCK_BOOTTIME at the anchor */
	char clocksource[32];	/* the kernel's at the anchor, "" if unknown */
	uint64_t reserved[8];	/* zero */
	struct tsc_freq freq;
} __attribute__((aligned(64)));

#ifdef __cplusplus
#define TSC_CLOCK(name) TSC__CXX_BARE(struct tsc_clock, name)
#else
#define TSC_CLOCK(name) struct tsc_clock name = { .sz = sizeof(struct tsc_clock) }
#endif

/* Why the last call that failed in this thread failed; "" if none did. */
const char *tsc_last_error(void);
const char *tsc_source_name(enum tsc_source source);
/* "kernel", "hypervisor", "clocksource", "true", "unstated"; since 1.2. */
const char *tsc_reference_name(enum tsc_reference reference);

/* Each source on its own: -ENOENT, -ENODATA, -EINVAL... with a reason. */
int tsc_freq_from_sysfs(struct tsc_freq *f, const char *sysfs_root);
int tsc_freq_from_cpuid(struct tsc_freq *f);
int tsc_freq_from_hypervisor(struct tsc_freq *f);
int tsc_freq_from_perf(struct tsc_freq *f);
int tsc_freq_calibrate(struct tsc_freq *f, double target_ppm,
		       unsigned int max_ms);

/* The best source, or the one opts asks for; opts may be NULL. */
int tsc_freq_get(struct tsc_freq *f, const struct tsc_opts *opts);

/* Difference between two frequencies, in ppm of b. */
double tsc_freq_diff_ppm(const struct tsc_freq *a, const struct tsc_freq *b);

TSC__MUST_CHECK int tsc_conv_init(struct tsc_conv *c, uint64_t num, uint64_t den);

/*
 * Find the frequency (as tsc_freq_get()) and anchor the clock.  After it
 * returns, any number of threads may read the clock without locking.
 */
TSC__MUST_CHECK int tsc_clock_init(struct tsc_clock *clk, const struct tsc_opts *opts);

/*
 * Is the clock still right?  0, or a negative errno with the reason, and
 * then read clock_gettime() instead: -ERANGE, the TSC reads before the
 * anchor or the clock's rate is off CLOCK_MONOTONIC_RAW's by more than
 * the frequency's precision; -ESTALE, the system was suspended since the
 * anchor; -ENODEV, the kernel no longer keeps time with the TSC.  Costs a
 * few clock_gettime() calls and two sysfs reads: call it now and then,
 * not per reading (tsc_clock_check(3)).
 */
int tsc_clock_check(const struct tsc_clock *clk);

/* ---- The system's own clocks at the cost of rdtsc (libtsc 1.1) ---- */

/*
 * The kernel's mapping from a TSC reading to its clocks, as the
 * tsc_freq_khz module publishes it (tsc/clock_page, layout version 1 and
 * later, whose first 64 bytes these are), rewritten at every timekeeper
 * update.  At TSC reading t >= cycle_last, CLOCK_X is
 * (t * mult + frac) / 2^64 + t * mult_ns + X_off, the kernel's own result.
 */
struct tsc_timepage {
	uint16_t version;
	uint16_t flags;		/* TSC_TIMEPAGE_TSC, TSC_TIMEPAGE_GONE */
	uint32_t seq;		/* odd: being written, or not to be used */
	uint32_t generation;	/* changes at steps, resumes, clocksource changes */
	uint32_t mult_ns;
	uint64_t cycle_last;
	uint64_t mult;
	uint64_t frac;
	uint64_t real_off;
	uint64_t mono_off;
	uint64_t boot_off;
};

#define TSC_TIMEPAGE_TSC	0x1	/* the kernel's clocks read the TSC */
#define TSC_TIMEPAGE_GONE	0x2	/* the module was unloaded */

/* Where no kernel mapping is, a disciplined clock, if asked for (1.1). */
enum tsc_sysclock_discipline {
	TSC_DISCIPLINE_NONE = 0,	/* clock_gettime() instead */
	TSC_DISCIPLINE_HELPER,		/* a thread of the library's syncs it */
	TSC_DISCIPLINE_CALLER,		/* the caller calls tsc_sysclock_sync() */
	TSC_DISCIPLINE_READERS,		/* its readers sync it in passing, no thread (1.3) */
};

struct tsc__discipline;
struct tsc__bound;

/*
 * CLOCK_REALTIME, CLOCK_MONOTONIC and CLOCK_BOOTTIME as the kernel keeps
 * them, NTP slewing, steps, leap seconds and suspend included, read with
 * one rdtsc where the module's page is there and the kernel's clocks read
 * the TSC; where not, clock_gettime(), or if asked for, a disciplined
 * clock of the library's (tsc_sysclock_sync(3)), also one rdtsc, as close
 * to the system's as the quick start says.  Declare with TSC_SYSCLOCK()
 * (on the heap: aligned_alloc(64, ...), zeroed, sz set by hand); any
 * number of threads may read it once tsc_sysclock_init() returned.
 */
struct tsc_sysclock {
	/* What a read touches: the page, kernel's or the library's. */
	const volatile struct tsc_timepage *page;
	/*
	 * How the ordered readers read the TSC (1.2): 0 lfence; rdtsc, 1
	 * rdtscp.  tsc_sysclock_init() picks (enum tsc_sysclock_order).
	 */
	uint32_t use_rdtscp;
	uint32_t hot_reserved32;	/* zero */
	/*
	 * How many TSC ticks past the page's cycle_last a reading may be
	 * (1.2): past it the page is stale, and the reading is
	 * clock_gettime()'s (MONOTONIC and BOOTTIME held at the page's
	 * value at the bound while that is ahead: the kernel's page up to
	 * 10 ms).  The kernel's page: its clocksource's max_cycles
	 * (minutes); the library's disciplined one: three sync
	 * periods, with the helper 1.25 s (a lease its sync a second
	 * renews), synced by its readers a period, past which the first of
	 * them syncs (1.3), 0 for a page that holds still after a suspend.
	 * Below 2^63, so that a reading before cycle_last, whose
	 * difference wraps, is past it too.
	 * tsc_sysclock_init() sets it.
	 */
	uint64_t max_delta;
	/*
	 * What its bounded reader reads besides the page (1.4): the
	 * library's, set by tsc_sysclock_init().
	 */
	struct tsc__bound *bound;
	uint64_t hot_reserved[4];	/* zero */

	/* What the library keeps. */
	size_t sz;		/* sizeof(struct tsc_sysclock), set by TSC_SYSCLOCK */
	enum tsc_sysclock_path path;	/* at init; reads follow the kernel since */
	char why[512];		/* why that path, in words */
	struct tsc__discipline *disc;	/* the library's, when disciplined */
	uint64_t reserved[7];	/* zero */
} __attribute__((aligned(64)));

#ifdef __cplusplus
#define TSC_SYSCLOCK(name) TSC__CXX_BARE(struct tsc_sysclock, name)
#else
#define TSC_SYSCLOCK(name)						\
	struct tsc_sysclock name = { .sz = sizeof(struct tsc_sysclock) }
#endif

/*
 * How the ordered readers (tsc_sysclock_realtime() and the others, not the
 * _unordered ones) read the TSC, so that a reading taken after seeing
 * another thread's is never earlier: each waits for every earlier load
 * (1.2).
 */
enum tsc_sysclock_order {
	TSC_ORDER_AUTO = 0,	/* the cheaper of the two below that order here */
	TSC_ORDER_LFENCE,	/* lfence; rdtsc, as the kernel's vDSO reads it */
	TSC_ORDER_RDTSCP,	/* rdtscp */
};

/* Options: declare with TSC_SYSCLOCK_OPTS(name, .field = value, ...). */
struct tsc_sysclock_opts {
	size_t sz;		/* set by TSC_SYSCLOCK_OPTS */
	const char *sysfs_root;	/* as in struct tsc_opts */
	size_t :0;		/* later fields start here: see struct tsc_opts */
	enum tsc_sysclock_discipline discipline;	/* 1.1 */
	size_t :0;		/* and here */
	enum tsc_sysclock_order order;	/* 1.2 */
	/*
	 * The helper keeps the caller's scheduling policy and CPUs, as a
	 * new thread does (1.2).  By default it runs under SCHED_OTHER on
	 * the housekeeping CPUs: online, not isolated, not nohz_full.
	 */
	bool helper_inherit;
	/*
	 * A version's fields leave no padding: an initialiser need not zero
	 * padding, and a library older than the field would take a stray
	 * byte there for a field it does not know (EINVAL).  Always zero.
	 */
	unsigned char tsc__reserved_1_2[3];
	size_t :0;		/* and here */
	/*
	 * This process may call adjtimex() to read the kernel's NTP state:
	 * it has no seccomp filter, or its filter allows the call (1.4).
	 * Otherwise libtsc calls it only where no filter is on the process,
	 * as a filter may kill the process for it (systemd's
	 * SystemCallFilter= and ProtectClock= refuse it): the bounded read
	 * then says TSC_BOUND_UNSYNCED, and a disciplined clock takes its
	 * rate from MONOTONIC alone.  From the call that sets it on, for
	 * the clocks set up from then on, on threads with as many seccomp
	 * filters as the caller's (one added since may forbid the call).
	 */
	bool adjtimex_allowed;
	unsigned char tsc__reserved_1_4[7];	/* zero */
	size_t :0;		/* and here */
};

#ifdef __cplusplus
#define TSC_SYSCLOCK_OPTS(...) TSC__CXX_DECLARE(struct tsc_sysclock_opts, __VA_ARGS__)
#else
#define TSC_SYSCLOCK_OPTS(...) TSC__DECLARE(struct tsc_sysclock_opts, __VA_ARGS__, )
#endif

/* 0, or a negative errno for a clock that cannot be read at all. */
TSC__MUST_CHECK int tsc_sysclock_init(struct tsc_sysclock *c,
				      const struct tsc_sysclock_opts *opts);

/*
 * The rate, in millihertz, at which the clock counts the TSC now: on the
 * kernel's page, its timekeeper's, NTP's frequency correction included;
 * disciplined, the library's.  -ENODATA (and the reason) while the clock
 * reads clock_gettime().
 */
int tsc_sysclock_rate(const struct tsc_sysclock *c, uint64_t *millihz);

/*
 * A disciplined clock's sync, for TSC_DISCIPLINE_CALLER: call about once
 * a second, from any thread.  0, -EAGAIN (the system's clocks read too
 * far apart to sample, or a reader is syncing it: again later), -EINVAL
 * if not disciplined.
 */
int tsc_sysclock_sync(struct tsc_sysclock *c);

/*
 * Stop a disciplined clock's helper thread; the clock reads clock_gettime()
 * until initialised again.  Threads may go on reading it: its pages are
 * kept (a few hundred bytes), as the module's mapping is.
 */
void tsc_sysclock_fini(struct tsc_sysclock *c);

/*
 * The readers' way out of their fast path, when the page's seq is odd,
 * its ticks last a ns or more, or a reading is not within max_delta of
 * its cycle_last: not for calling directly.  _bounded (1.2) is the one
 * this header's readers call, so that a program built with it needs a
 * library that sets max_delta; tsc__sysclock_slow, the same, stays for
 * programs built with 1.1's.
 */
uint64_t tsc__sysclock_slow_bounded(const struct tsc_sysclock *c, int clock);
uint64_t tsc__sysclock_slow(const struct tsc_sysclock *c, int clock);

/* ---- The time with a hard bound on its error (1.4): tsc_realtime_bounded(3) ---- */

/*
 * A reading of CLOCK_REALTIME and the interval true UTC lies in, as long
 * as the NTP daemon's maxerror is honest and the system clock's rate is
 * within TSC_BOUND_DRIFT_PPM of true, per second it counts (the kernel's
 * own assumption): a hard bound, never a standard deviation.  Where
 * nothing bounds it (TSC_BOUND_UNSYNCED, TSC_BOUND_DISRUPTED),
 * [0, UINT64_MAX].
 */
struct tsc_time_bound {
	uint64_t earliest;	/* ns since the epoch: true UTC is no earlier */
	uint64_t latest;	/* nor later */
	uint64_t now;		/* CLOCK_REALTIME, as tsc_realtime_ns() reads it */
	uint32_t flags;		/* TSC_BOUND_* */
	uint32_t disruptions;	/* disruptions seen on this clock's path: tsc_realtime_bounded(3) */
};

/* No NTP daemon keeps the clock: STA_UNSYNC, maxerror at 16 s, or no adjtimex(). */
#define TSC_BOUND_UNSYNCED	0x1
/*
 * A disruption was counted since the NTP daemon last stated its maxerror
 * (the time stepped, the system resumed, the kernel's clocks read another
 * clocksource or the module came or went, the hypervisor disrupted the
 * VM's counter, the TSC's rate moved): that statement is of another time,
 * or of a clock read another way.  Until it states a new one.  Also,
 * uncounted, while the module's page cannot be read.
 */
#define TSC_BOUND_DISRUPTED	0x2
/* A leap second is due at the end of the UTC day (STA_INS, STA_DEL). */
#define TSC_BOUND_LEAP		0x4
/* The CPUs' TSCs were not all measured against each other: not in the bound. */
#define TSC_BOUND_SKEW_UNKNOWN	0x8
/* The NTP state could not be read again for 2 s: the bound grows from the last. */
#define TSC_BOUND_STALE		0x10

/* The system clock's rate error the bound allows, as the kernel's maxerror does. */
#define TSC_BOUND_DRIFT_PPM	500

/* What counts as a disruption, by cause (struct tsc_bound_terms). */
enum tsc_disruption {
	TSC_DISRUPTION_STEP = 0,	/* REALTIME stepped: settimeofday(), ADJ_SETOFFSET, a leap second */
	TSC_DISRUPTION_RESUME,		/* the system resumed from a suspend */
	TSC_DISRUPTION_CLOCKSOURCE,	/* the kernel's clocks read another clock, or the module came or went */
	TSC_DISRUPTION_VMCLOCK,		/* /dev/vmclock0's disruption marker or VM generation moved */
	TSC_DISRUPTION_RATE,		/* on the page, the TSC's rate against MONOTONIC_RAW moved > 500 ppm */
	TSC_DISRUPTION_CAUSES,
};

/* The bound's terms, each in ns: tsc_time_bound_terms(3). */
struct tsc_bound_terms {
	size_t sz;		/* set by TSC_BOUND_TERMS */
	uint64_t now;		/* CLOCK_REALTIME at which they hold */
	uint64_t maxerror_ns;	/* the kernel's maxerror as last read */
	uint64_t growth_ns;	/* since: its next step, 500 us, and TSC_BOUND_DRIFT_PPM of the age */
	uint64_t slewing_ns;	/* the offset the kernel is still slewing out (PLL, adjtime()) */
	uint64_t reading_ns;	/* the reading's own error: 1 on the kernel's page, 0 clock_gettime() */
	uint64_t skew_ns;	/* how far apart the CPUs' TSCs may read (0 if unknown) */
	uint64_t leap_ns;	/* 1 s within a second of a leap second, else 0 */
	uint64_t bound_ns;	/* the sum: now - earliest, latest - now; UINT64_MAX: none */
	uint64_t esterror_ns;	/* the kernel's esterror: a typical error, not in the bound */
	uint64_t age_ns;	/* how long ago the NTP state was read */
	uint32_t flags;		/* TSC_BOUND_* */
	uint32_t disruptions;	/* all causes */
	uint32_t by_cause[8];	/* by enum tsc_disruption */
	uint64_t vmclock_marker;	/* /dev/vmclock0's disruption_marker, as last read */
	/* and its clock_status (VMCLOCK_STATUS_*); -1 none, -2 not this process's, -3 mid-write */
	int32_t vmclock_status;
	size_t :0;		/* later fields start here: see struct tsc_opts */
};

#ifdef __cplusplus
#define TSC_BOUND_TERMS(...) TSC__CXX_DECLARE(struct tsc_bound_terms, __VA_ARGS__)
#else
#define TSC_BOUND_TERMS(...) TSC__DECLARE(struct tsc_bound_terms, __VA_ARGS__, )
#endif

/* CLOCK_REALTIME and its bound, the front door's; and a struct tsc_sysclock's. */
static inline void tsc_realtime_bounded(struct tsc_time_bound *b);
static inline void tsc_sysclock_realtime_bounded(const struct tsc_sysclock *c,
						 struct tsc_time_bound *b);
/* The terms of the bound a reading now would have: 0, or -EINVAL (sz). */
int tsc_time_bound_terms(struct tsc_bound_terms *t);
int tsc_sysclock_bound_terms(const struct tsc_sysclock *c, struct tsc_bound_terms *t);

/*
 * The bounded readers' way out of their fast path (not for calling
 * directly): the state older than a second (a reader refreshes it), a
 * page not the kernel's, a clock not set up.
 */
void tsc__sysclock_bounded_slow(const struct tsc_sysclock *c, struct tsc_time_bound *b);
void tsc__time_bounded_slow(struct tsc_time_bound *b);

/* ---- Can TSC readings be compared across CPUs? ---- */

enum tsc_cpu_status {
	TSC_CPU_UNMEASURED = 0,	/* offline, not allowed, or no result */
	TSC_CPU_REFERENCE,	/* the others are measured against it */
	TSC_CPU_MEASURED,
};

/* One CPU's TSC against the reference CPU's, read at the same instant. */
struct tsc_cpu_offset {
	int cpu;
	enum tsc_cpu_status status;
	int64_t offset;		/* estimate, ticks */
	int64_t min, max;	/* the offset is certainly within [min, max] */
	uint32_t rounds;	/* probes the result rests on */
	bool consistent;	/* all probes agree: a constant offset */
};

enum tsc_offsets_source {
	TSC_OFFSETS_NONE = 0,	/* fewer than two CPUs to compare */
	TSC_OFFSETS_MODULE,	/* the tsc_freq_khz module measured them */
	TSC_OFFSETS_USERSPACE,	/* this library measured them */
};

struct tsc_report {
	/* The CPU, from CPUID. */
	bool invariant_tsc;	/* 0x80000007 EDX[8]: constant rate, never stops */
	bool rdtscp;		/* 0x80000001 EDX[27] */
	bool tsc_adjust;	/* 7 EBX[1]: the TSC_ADJUST MSR */
	/* The kernel. */
	char clocksource[32];	/* current clocksource, "" if unknown */
	int kernel_unstable;	/* the module's tsc/unstable: 1, 0; -1 unknown */
	/* The offsets. */
	enum tsc_offsets_source offsets_source;
	int reference_cpu;	/* -1 when nothing was measured */
	unsigned int ncpus;
	struct tsc_cpu_offset *cpus;	/* ncpus entries, by CPU number */
	uint64_t max_skew_ticks;	/* bound on any two CPUs' difference */
	bool monotonic;		/* all measured, consistent, none stepped back vs the reference */
	uint64_t reserved[8];	/* zero: room to grow without a break */
	/* The verdict: safe to compare TSC readings across CPUs? */
	bool trustworthy;
	char verdict[512];	/* "yes: ..." or "no: ...; ..." in words */
};

struct tsc_report_opts {
	size_t sz;		/* set by TSC_REPORT_OPTS */
	const char *sysfs_root;	/* as in struct tsc_opts */
	bool userspace;		/* measure in userspace even if the module is there */
	unsigned int max_ms;	/* userspace measurement time limit (0: 1000) */
	unsigned int min_rounds; /* probes wanted per CPU (0: 256) */
	size_t :0;		/* later fields start here: see struct tsc_opts */
};

#ifdef __cplusplus
#define TSC_REPORT_OPTS(...) TSC__CXX_DECLARE(struct tsc_report_opts, __VA_ARGS__)
#else
#define TSC_REPORT_OPTS(...) TSC__DECLARE(struct tsc_report_opts, __VA_ARGS__, )
#endif

/* Fill r; free it with tsc_report_free().  opts may be NULL. */
int tsc_report_get(struct tsc_report *r, const struct tsc_report_opts *opts);
void tsc_report_free(struct tsc_report *r);

/* ---- Inline fast paths ---- */

/* (a * frac) / 2^64: one 64x64->128 multiplication. */
static inline uint64_t tsc_mul_frac(uint64_t a, uint64_t frac)
{
	__extension__ typedef unsigned __int128 tsc_u128;

	return (uint64_t)(((tsc_u128)a * frac) >> 64);
}

static inline uint64_t tsc_ticks_to_ns(const struct tsc_conv *c, uint64_t ticks)
{
	return ticks * c->ns_int + tsc_mul_frac(ticks, c->ns_frac);
}

static inline uint64_t tsc_ns_to_ticks(const struct tsc_conv *c, uint64_t ns)
{
	return ns * c->tk_int + tsc_mul_frac(ns, c->tk_frac);
}

/* The TSC as it is, in no order with the instructions around it: fastest. */
static inline uint64_t tsc__rdtsc(void)
{
	uint64_t t;

	__asm__ __volatile__("rdtsc; shl $32, %%rdx; or %%rdx, %%rax"
			     : "=a"(t) : : "rdx");
	return t;
}

/* 1.0's name for tsc_ticks_unordered(): unordered, which its name does not say. */
TSC__DEPRECATED("tsc_rdtsc() reads in no order: tsc_ticks_unordered(), or tsc_ticks() ordered")
static inline uint64_t tsc_rdtsc(void)
{
	return tsc__rdtsc();
}

/*
 * The TSC after every earlier instruction has completed, loads included:
 * lfence first.  (A lock-prefixed instruction would not do: it does not
 * order rdtsc on AMD.)  On AMD this rests on LFENCE being dispatch
 * serialising: CPUID says so from Zen 3 on, and on older CPUs Linux sets
 * the MSR bit that makes it so; the system clocks, which cannot tell,
 * use rdtscp there (order.c).
 */
static inline uint64_t tsc_rdtsc_ordered(void)
{
	uint64_t t;

	__asm__ __volatile__("lfence; rdtsc; shl $32, %%rdx; or %%rdx, %%rax"
			     : "=a"(t) : : "rdx", "memory");
	return t;
}

/*
 * The TSC after every earlier instruction has completed, and before any
 * later one starts: lfence on both sides.  The start of a timed section:
 * tsc_rdtsc_ordered() alone lets the section's first instructions run
 * before its read, which suits the end of a section, not its start.
 */
static inline uint64_t tsc_rdtsc_start(void)
{
	uint64_t t;

	__asm__ __volatile__("lfence; rdtsc; lfence; shl $32, %%rdx; or %%rdx, %%rax"
			     : "=a"(t) : : "rdx", "memory");
	return t;
}

/*
 * A struct tsc_clock's time (tsc_clock_init(3)): CLOCK_MONOTONIC or
 * CLOCK_REALTIME as at the anchor, advancing at the TSC's rate since (not
 * NTP's), in ns.
 *
 * tsc_clock_at() converts an absolute TSC reading, as tsc_ticks() gives
 * one; a difference of two is tsc_ticks_to_ns(&clk->conv, d).
 * tsc_clock_now() and tsc_clock_realtime() read the TSC once every
 * earlier load has completed, so that a stamp taken after seeing another
 * thread's is never earlier (the end of a timed section, too);
 * tsc_now_start() reads it before anything after it as well (the start
 * of one); the _unordered readers read it in no order, for stamps
 * compared within one thread.  A clock whose tsc_clock_init() failed
 * (1.3) reads clock_gettime() through them, not 0.
 */
static inline uint64_t tsc_clock_at(const struct tsc_clock *clk, uint64_t reading)
{
	return tsc_ticks_to_ns(&clk->conv, reading) - clk->mono_off;
}

/* 1.0's name for tsc_clock_at(), which said "ns" and took "ticks". */
TSC__DEPRECATED("tsc_clock_ns() takes an absolute TSC reading: tsc_clock_at(); a tick delta: tsc_ticks_to_ns(&clk->conv, d)")
static inline uint64_t tsc_clock_ns(const struct tsc_clock *clk, uint64_t ticks)
{
	return tsc_clock_at(clk, ticks);
}

#define TSC__READ_UNORDERED	0
#define TSC__READ_ORDERED	1
#define TSC__READ_START		2

/*
 * The readers' way out of their fast path: a TSC under 1 GHz (a tick a
 * whole ns or more), or a clock whose init failed (no conversion at all),
 * which reads clock_gettime(): not for calling directly (1.3).
 */
uint64_t tsc__clock_read_slow(const struct tsc_clock *clk, int realtime, int how);

/*
 * The clocks ask whether a tick lasts a whole ns or more, or the clock
 * has no conversion, before they read the TSC, not after: then no
 * register has to live across the read.  At 1 GHz and up (every x86-64
 * CPU but a few embedded parts) what is left is one multiplication,
 * which the out-of-order core overlaps with rdtsc: now_bench measures
 * the unordered read at the cost of a bare rdtsc.  Both paths give the
 * same result.
 */
static inline uint64_t tsc__clock_read(const struct tsc_clock *clk, int realtime, int how)
{
	uint64_t t;

	if (__builtin_expect(clk->conv.ns_int != 0 || clk->conv.ns_frac == 0, 0))
		return tsc__clock_read_slow(clk, realtime, how);
	t = how == TSC__READ_UNORDERED ? tsc__rdtsc() :
	    how == TSC__READ_ORDERED ? tsc_rdtsc_ordered() : tsc_rdtsc_start();
	return tsc_mul_frac(t, clk->conv.ns_frac) - (realtime ? clk->real_off : clk->mono_off);
}

static inline uint64_t tsc_clock_now(const struct tsc_clock *clk)
{
	return tsc__clock_read(clk, 0, TSC__READ_ORDERED);
}

static inline uint64_t tsc_clock_now_unordered(const struct tsc_clock *clk)
{
	return tsc__clock_read(clk, 0, TSC__READ_UNORDERED);
}

/* Its CLOCK_REALTIME: it follows no later step or slewing of the system's. */
static inline uint64_t tsc_clock_realtime(const struct tsc_clock *clk)
{
	return tsc__clock_read(clk, 1, TSC__READ_ORDERED);
}

static inline uint64_t tsc_clock_realtime_unordered(const struct tsc_clock *clk)
{
	return tsc__clock_read(clk, 1, TSC__READ_UNORDERED);
}

/* The start of a timed section: the TSC read before anything after it too. */
static inline uint64_t tsc_now_start(const struct tsc_clock *clk)
{
	return tsc__clock_read(clk, 0, TSC__READ_START);
}

/* 1.0's name for tsc_clock_now(), the end of a timed section. */
static inline uint64_t tsc_now_ordered(const struct tsc_clock *clk)
{
	return tsc__clock_read(clk, 0, TSC__READ_ORDERED);
}

/* 1.0's name for tsc_clock_now_unordered(): unordered, which its name does not say. */
TSC__DEPRECATED("tsc_now() reads in no order: tsc_clock_now_unordered(), or tsc_clock_now() ordered")
static inline uint64_t tsc_now(const struct tsc_clock *clk)
{
	return tsc__clock_read(clk, 0, TSC__READ_UNORDERED);
}

/* 1.0's name for tsc_clock_realtime_unordered(). */
TSC__DEPRECATED("tsc_now_realtime() reads in no order: tsc_clock_realtime_unordered(), or tsc_clock_realtime() ordered")
static inline uint64_t tsc_now_realtime(const struct tsc_clock *clk)
{
	return tsc__clock_read(clk, 1, TSC__READ_UNORDERED);
}

/*
 * The TSC once every earlier load has completed, by rdtscp (which also
 * waits for every earlier instruction on both vendors): the ordered
 * system clocks' other way, where it is the cheaper one.
 */
static inline uint64_t tsc__rdtscp(void)
{
	uint64_t t;

	__asm__ __volatile__("rdtscp; shl $32, %%rdx; or %%rdx, %%rax"
			     : "=a"(t) : : "rcx", "rdx", "memory");
	return t;
}

/*
 * The system clocks from the page.  What the fast path tests, it tests
 * before the rdtsc, so that nothing waits for the reading but the
 * arithmetic; the sequence count is checked again after it.  No page (a
 * clock never initialised), seq odd (a write under way, or a page not to
 * be used), a page no longer the clock's (a disciplined clock's, which a
 * sync may write again before it gives it back) and a TSC under 1 GHz
 * leave the fast path for tsc__sysclock_slow_bounded().  On x86 loads are not reordered with loads: a
 * compiler barrier is the acquire the reads need.
 *
 * The ordered readers read the TSC only once every earlier load has
 * completed (lfence; rdtsc, or rdtscp), as the kernel's vDSO does: a
 * reading taken after seeing another thread's (an acquire load of it) is
 * never earlier.  A plain rdtsc may run before those loads, and give a
 * time before the one seen: the unordered readers are for stamps compared
 * within one thread.  A reading before the page's cycle_last (this CPU's
 * TSC a little behind the one the kernel last read) counts as cycle_last,
 * as the kernel counts it; one more than max_delta past it is not
 * extrapolated (a page nobody updates: a helper starved or gone with a
 * fork, a vCPU stopped for minutes) but clock_gettime()'s, held at the
 * page's value at the bound while that is ahead; so is one on the
 * library's own page far before its cycle_last, a TSC reset by a resume
 * (tsc__sysclock_slow_bounded(); tsc_sysclock_init(3) says when not).
 */
#define TSC__SYSCLOCK_REALTIME	0
#define TSC__SYSCLOCK_MONOTONIC	1
#define TSC__SYSCLOCK_BOOTTIME	2

/*
 * One reading from the page *slot gives, bounded by *bound: 1 and *ns, or
 * 0 where the slow path must read (see above).  The bound is loaded
 * before the page, which their writers store the other way round
 * (tsc__sysclock_slow_bounded()); and the page, once its seq is read, is
 * still the one given, not one a disciplined clock's sync has written
 * again and not given (yet, or ever).
 */
static inline int tsc__page_read(const volatile struct tsc_timepage *const *slot,
				 const uint32_t *use_rdtscp_p, const uint64_t *bound,
				 int clock, int ordered, uint64_t *ns)
{
	const uint64_t max_delta = __atomic_load_n(bound, __ATOMIC_ACQUIRE);
	const volatile struct tsc_timepage *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	const uint32_t use_rdtscp = __atomic_load_n(use_rdtscp_p, __ATOMIC_RELAXED);
	__extension__ unsigned __int128 x;
	uint32_t seq;
	uint64_t off;

	if (__builtin_expect(!p, 0))
		return 0;
	do {
		uint64_t t, last;

		seq = p->seq;
		__asm__ __volatile__("" : : : "memory");
		if (__builtin_expect((seq & 1) | p->mult_ns, 0))
			return 0;
		if (__builtin_expect(__atomic_load_n(slot, __ATOMIC_RELAXED) != p, 0))
			return 0;
		off = clock == TSC__SYSCLOCK_REALTIME ? p->real_off :
		      clock == TSC__SYSCLOCK_MONOTONIC ? p->mono_off : p->boot_off;
		last = p->cycle_last;
		if (!ordered)
			t = tsc__rdtsc();
		else if (use_rdtscp)
			t = tsc__rdtscp();
		else
			t = tsc_rdtsc_ordered();
		/*
		 * One unsigned compare, as the vDSO's: a reading before
		 * cycle_last (which wraps) or too far past it leaves the fast
		 * path, and the slow one counts the first as cycle_last and
		 * gives the second clock_gettime().
		 */
		if (__builtin_expect(t - last > max_delta, 0))
			return 0;
		x = t;
		x = x * p->mult + p->frac;
		__asm__ __volatile__("" : : : "memory");
	} while (__builtin_expect(p->seq != seq, 0));
	*ns = (uint64_t)(x >> 64) + off;
	return 1;
}

static inline uint64_t tsc__sysclock_read(const struct tsc_sysclock *c, int clock, int ordered)
{
	uint64_t v;

	/* Atomic loads, plain moves on x86: init and a sync may rewrite them. */
	if (__builtin_expect(tsc__page_read(&c->page, &c->use_rdtscp, &c->max_delta,
					    clock, ordered, &v), 1))
		return v;
	return tsc__sysclock_slow_bounded(c, clock);
}

/* CLOCK_REALTIME, in ns since the epoch, as clock_gettime() gives it. */
static inline uint64_t tsc_sysclock_realtime(const struct tsc_sysclock *c)
{
	return tsc__sysclock_read(c, TSC__SYSCLOCK_REALTIME, 1);
}

/* CLOCK_MONOTONIC, in ns. */
static inline uint64_t tsc_sysclock_monotonic(const struct tsc_sysclock *c)
{
	return tsc__sysclock_read(c, TSC__SYSCLOCK_MONOTONIC, 1);
}

/* CLOCK_BOOTTIME, in ns. */
static inline uint64_t tsc_sysclock_boottime(const struct tsc_sysclock *c)
{
	return tsc__sysclock_read(c, TSC__SYSCLOCK_BOOTTIME, 1);
}

/*
 * The same clocks with a plain rdtsc, which the CPU may run before earlier
 * loads: cheaper on some CPUs, and right for stamps compared within one
 * thread, but a reading taken after seeing another thread's may be
 * earlier than it (1.2; tsc(7)).
 */
static inline uint64_t tsc_sysclock_realtime_unordered(const struct tsc_sysclock *c)
{
	return tsc__sysclock_read(c, TSC__SYSCLOCK_REALTIME, 0);
}

static inline uint64_t tsc_sysclock_monotonic_unordered(const struct tsc_sysclock *c)
{
	return tsc__sysclock_read(c, TSC__SYSCLOCK_MONOTONIC, 0);
}

static inline uint64_t tsc_sysclock_boottime_unordered(const struct tsc_sysclock *c)
{
	return tsc__sysclock_read(c, TSC__SYSCLOCK_BOOTTIME, 0);
}

/* ---- The front door's readers (1.3) ---- */

/*
 * What the front door's readers touch: a system clock's first cache line
 * (its page, how to order, its bound), the library's own, which sets it
 * up at the first read (tsc__time_slow()).  One cache line, for good.
 */
struct tsc__time {
	const volatile struct tsc_timepage *page;
	uint32_t use_rdtscp;
	uint32_t reserved32;
	uint64_t max_delta;
	struct tsc__bound *bound;	/* 1.4 */
	uint64_t reserved[4];
} __attribute__((aligned(64)));

extern struct tsc__time tsc__time;

/* The front door's slow path, which sets the clock up first if need be. */
uint64_t tsc__time_slow(int clock);

static inline uint64_t tsc__time_read(int clock, int ordered)
{
	uint64_t v;

	if (__builtin_expect(tsc__page_read(&tsc__time.page, &tsc__time.use_rdtscp,
					    &tsc__time.max_delta, clock, ordered, &v), 1))
		return v;
	return tsc__time_slow(clock);
}

static inline uint64_t tsc_realtime_ns(void)
{
	return tsc__time_read(TSC__SYSCLOCK_REALTIME, 1);
}

static inline uint64_t tsc_monotonic_ns(void)
{
	return tsc__time_read(TSC__SYSCLOCK_MONOTONIC, 1);
}

static inline uint64_t tsc_boottime_ns(void)
{
	return tsc__time_read(TSC__SYSCLOCK_BOOTTIME, 1);
}

static inline uint64_t tsc_realtime_ns_unordered(void)
{
	return tsc__time_read(TSC__SYSCLOCK_REALTIME, 0);
}

static inline uint64_t tsc_monotonic_ns_unordered(void)
{
	return tsc__time_read(TSC__SYSCLOCK_MONOTONIC, 0);
}

static inline uint64_t tsc_boottime_ns_unordered(void)
{
	return tsc__time_read(TSC__SYSCLOCK_BOOTTIME, 0);
}

/* ---- The bounded readers (1.4) ---- */

/*
 * What they read besides the page: the bound at a TSC reading and its
 * growth since, refreshed from the kernel's NTP state by the first reader
 * to find it a second old (tsc__sysclock_bounded_slow()).  One cache
 * line, written under seq as the page is.  Taken on the kernel's page
 * (page) at its generation and the hypervisor's disruption marker: a
 * reading of another page, or of one whose generation moved on (a step,
 * a resume, another clocksource), or after the marker moved (a live
 * migration), takes the slow path, which counts the disruption before it
 * returns.
 */
struct tsc__bound {
	uint32_t seq;		/* odd: being written */
	uint32_t generation;	/* the page's, when taken */
	uint32_t flags;		/* TSC_BOUND_* */
	uint32_t disruptions;
	const volatile struct tsc_timepage *page;	/* the page it holds for; NULL: none */
	uint64_t as_of;		/* TSC reading it was taken at */
	uint64_t max_age;	/* ticks past as_of it holds for: then a refresh */
	uint64_t base_ns;	/* the bound at as_of */
	uint64_t growth_frac;	/* its growth per tick, ns * 2^64 */
	uint64_t vm_marker;	/* *tsc__vm_marker, when taken */
} __attribute__((aligned(64)));

/*
 * /dev/vmclock0's disruption_marker, which its hypervisor moves after a
 * live migration; a constant 0 where the process has none mapped.
 */
extern const volatile uint64_t *tsc__vm_marker;

/*
 * REALTIME from the kernel's page *slot, read as tsc__page_read() reads
 * it, ordered, and the bound from *bslot, within its max_age of its
 * as_of: 1, or 0 where the slow path must read.  Inlined whatever the
 * compiler would choose: a call costs more than the bound's arithmetic.
 */
static inline __attribute__((always_inline))
int tsc__bounded_read(const volatile struct tsc_timepage *const *slot,
		      const uint32_t *use_rdtscp_p, const uint64_t *max_delta_p,
		      struct tsc__bound *const *bslot, struct tsc_time_bound *out)
{
	const uint64_t max_delta = __atomic_load_n(max_delta_p, __ATOMIC_ACQUIRE);
	const struct tsc__bound *b = __atomic_load_n(bslot, __ATOMIC_ACQUIRE);
	const volatile struct tsc_timepage *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	const volatile uint64_t *vm = __atomic_load_n(&tsc__vm_marker, __ATOMIC_ACQUIRE);
	const volatile struct tsc__bound *vb = b;
	__extension__ unsigned __int128 x;
	uint64_t t, off, last, as_of, max_age, base, growth, w, real;
	uint32_t seq, bseq, flags, dis;

	if (__builtin_expect(!b || !p, 0))
		return 0;
	bseq = vb->seq;
	__asm__ __volatile__("" : : : "memory");
	seq = p->seq;
	__asm__ __volatile__("" : : : "memory");
	if (__builtin_expect((bseq & 1) | (seq & 1) | p->mult_ns, 0))
		return 0;
	if (__builtin_expect(vb->page != p || p->generation != vb->generation, 0))
		return 0;
	/* Everything loaded before the TSC is read: after it, only arithmetic waits. */
	off = p->real_off;
	last = p->cycle_last;
	as_of = vb->as_of;
	max_age = vb->max_age;
	base = vb->base_ns;
	growth = vb->growth_frac;
	flags = vb->flags;
	dis = vb->disruptions;
	/* A leap second due today: the slow path widens the bound across it. */
	if (__builtin_expect(flags & TSC_BOUND_LEAP, 0))
		return 0;
	t = __atomic_load_n(use_rdtscp_p, __ATOMIC_RELAXED) ? tsc__rdtscp() : tsc_rdtsc_ordered();
	if (__builtin_expect(t - last > max_delta || t - as_of > max_age, 0))
		return 0;
	x = t;
	x = x * p->mult + p->frac;
	w = base + tsc_mul_frac(t - as_of, growth);
	__asm__ __volatile__("" : : : "memory");
	/*
	 * The marker after the TSC: a guest migrated before the reading
	 * (between any load above and it) reads the new one here.
	 */
	if (__builtin_expect(p->seq != seq || vb->seq != bseq || *vm != vb->vm_marker, 0))
		return 0;
	real = (uint64_t)(x >> 64) + off;
	out->now = real;
	out->flags = flags;
	out->disruptions = dis;
	if (__builtin_expect(flags & (TSC_BOUND_UNSYNCED | TSC_BOUND_DISRUPTED), 0)) {
		out->earliest = 0;
		out->latest = UINT64_MAX;
		return 1;
	}
	/* w is seconds at most: real + w does not wrap. */
	out->earliest = real > w ? real - w : 0;
	out->latest = real + w;
	return 1;
}

static inline void tsc_sysclock_realtime_bounded(const struct tsc_sysclock *c,
						 struct tsc_time_bound *b)
{
	if (!__builtin_expect(tsc__bounded_read(&c->page, &c->use_rdtscp, &c->max_delta,
						&c->bound, b), 1))
		tsc__sysclock_bounded_slow(c, b);
}

static inline void tsc_realtime_bounded(struct tsc_time_bound *b)
{
	if (!__builtin_expect(tsc__bounded_read(&tsc__time.page, &tsc__time.use_rdtscp,
						&tsc__time.max_delta, &tsc__time.bound, b), 1))
		tsc__time_bounded_slow(b);
}

/* lfence; rdtsc: every CPU this library orders with (tsc_rdtsc_ordered()). */
static inline uint64_t tsc_ticks(void)
{
	return tsc_rdtsc_ordered();
}

static inline uint64_t tsc_ticks_unordered(void)
{
	return tsc__rdtsc();
}

#ifdef __cplusplus
}
#endif

#endif /* LIBTSC_H */
