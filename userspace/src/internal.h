/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libtsc internals: shared by the sources, and by the unit tests and fuzz
 * targets, which reach the pure functions below directly.  Nothing here is
 * exported (libtsc.map).
 */
#ifndef TSC_INTERNAL_H
#define TSC_INTERNAL_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "libtsc.h"

#include "cpulist.h"
#include "tsc_offset.h"

/* The frequencies anything here accepts: 1 MHz to 20 GHz. */
#define TSC_MIN_HZ	1000000ull
#define TSC_MAX_HZ	20000000000ull

/*
 * A field of a caller's options struct, whose size it says in o->sz: the
 * value if that struct (from an older or newer header) has the field, 0 if
 * it ends before it.
 */
#define TSC__OPT(o, type, field) \
	((o)->sz >= offsetof(type, field) + sizeof((o)->field) ? (o)->field : 0)

/*
 * An options struct of sz bytes, of which this library knows the first
 * 'known': 0, or -EINVAL if sz cannot be (the macro that sets it was not
 * used) or a field this library does not know is set, which it would
 * otherwise ignore without a word.
 */
int tsc__opts_check(const void *opts, size_t sz, size_t known, const char *macro);

/* clock.c: clock_gettime(id) in ns; -1 if it ever failed. */
int64_t tsc__ns_now(clockid_t id);

/* order.c: what the CPU offers to order a TSC read after earlier loads. */
struct tsc__order_cpu {
	bool amd;		/* AMD or Hygon: LFENCE orders only where said */
	bool rdtscp;
	bool lfence_serializing;	/* CPUID 0x80000021 EAX[2] */
};
void tsc__order_cpu(struct tsc__order_cpu *o);
/*
 * The ordered readers' way for want on that CPU: *use_rdtscp 0 or 1, or
 * -EOPNOTSUPP (rdtscp asked for, none) or -EINVAL, and the reason.
 */
int tsc__order_pick(const struct tsc__order_cpu *cpu, enum tsc_sysclock_order want,
		    uint32_t *use_rdtscp);

/* sysclock.c: the page of a clock that reads clock_gettime(). */
extern const struct tsc_timepage tsc__syscall_page;
/*
 * How far past cycle_last a kernel's page may be read: its max_cycles
 * (layout 2), or for a layout-1 page the bound the kernel derives from
 * its mult the same way; at most INT64_MAX, so that a reading before
 * cycle_last, whose difference wraps, is past it too.
 */
struct tscfk_clock_page;
uint64_t tsc__page_max_delta(const volatile struct tscfk_clock_page *p);
struct tsc__discipline;
/*
 * The readers' slow path, for a clock whose page, bound and TSC read are
 * at these addresses, disciplined by d (NULL: not, or not by its
 * readers): tsc__sysclock_slow_bounded()'s, and the front door's.
 */
uint64_t tsc__clock_slow(const volatile struct tsc_timepage *const *page,
			 const uint64_t *bound, const uint32_t *use_rdtscp,
			 struct tsc__discipline *d, int clock);
/*
 * A clock's fields: what its readers read (page, bound, use_rdtscp) and
 * what the library keeps; a struct tsc_sysclock's own, or the front
 * door's (time.c).
 */
struct tsc__clock_target {
	const volatile struct tsc_timepage **page;
	uint64_t *bound;
	uint32_t *use_rdtscp;
	enum tsc_sysclock_path *path;
	char *why;
	size_t why_size;
	struct tsc__discipline **disc;
	struct tsc__bound **bstate;	/* the bounded readers' state (1.4) */
};
/* The clock reads clock_gettime(), its discipline (if any) stopped. */
void tsc__clock_stop(const struct tsc__clock_target *t);
/*
 * Set a stopped clock up, as tsc_sysclock_init(3) says; a disciplined
 * one at frequency freq (NULL: tsc_freq_get()'s).  0, or a negative
 * errno and the reason.
 */
int tsc__clock_setup(const struct tsc__clock_target *t, const char *root,
		     enum tsc_sysclock_discipline disc, enum tsc_sysclock_order order,
		     bool inherit, const struct tsc_freq *freq);
/*
 * A stale kernel page's readers read clock_gettime(), held at the page's
 * value at its bound while that is ahead by up to this: the kernel's page
 * is the system's clock, and one further ahead only a TSC that jumped.
 * The library's own pages hold their readers wherever the bound puts
 * them (a second or a few ahead at most, by construction).
 */
#define TSC__FLOOR_MAX_NS	10000000
/*
 * A flag of the library's own (disciplined) pages, beside the module's
 * TSC and GONE in the page's flags; the module never sets it
 * (common/tsc_clock_page.h).
 */
#define TSC__TIMEPAGE_OWN	0x8000
/*
 * And of one its readers sync: they are given a bound of a period, past
 * which the first of them syncs, while the page itself may be read to its
 * max_cycles (tsc__clock_slow()).
 */
#define TSC__TIMEPAGE_READERS	0x4000
/*
 * A TSC reading more than this below an own page's cycle_last is not a
 * CPU's TSC a little behind another's (the kernel keeps them within a
 * few hundred ticks, or does not offer tsc at all) but a TSC that was
 * reset, as a resume from S3 does on bare metal.
 */
#define TSC__SKEW_NS		1000000

/* bound.c: the time with a bound on its error. */
/* The kernel's NTP state, as adjtimex() gives it. */
struct tsc__ntp {
	bool known;		/* it could be read: no seccomp filter, no error */
	int state;		/* adjtimex()'s result: TIME_OK... */
	int status;		/* STA_* */
	long maxerror_us, esterror_us;
	uint64_t slewing_ns;	/* the PLL's offset and adjtime()'s remainder, still to slew */
};
/* Read it now (a seccomp filter on the process: not known, not asked). */
void tsc__ntp_read(struct tsc__ntp *n);
/* The bound's terms at a refresh, and its flags. */
struct tsc__bound_base {
	uint32_t flags;
	uint64_t maxerror_ns, slewing_ns, reading_ns, skew_ns, esterror_ns;
	uint64_t leap_from;	/* with TSC_BOUND_LEAP: REALTIME a second before the leap */
};
/*
 * From n, the CPUs' skew in ns (UINT64_MAX: unknown), the reading's own
 * error and REALTIME now: pure.
 */
void tsc__bound_base(const struct tsc__ntp *n, uint64_t skew_ns, uint64_t reading_ns,
		     uint64_t now, struct tsc__bound_base *b);
/* The state for the kernel's page of root (NULL: clock_gettime()'s); NULL out of memory. */
struct tsc__bound *tsc__bound_get(const char *root, const volatile struct tsc_timepage *page);
/* A bounded reading (and its terms, if asked) of the clock at these slots. */
void tsc__bounded(struct tsc__bound *const *slot_b,
		  const volatile struct tsc_timepage *const *slot_p, const uint32_t *use_rdtscp,
		  struct tsc_time_bound *out, struct tsc_bound_terms *terms);
/* vmclock.c: the hypervisor's clock page, /dev/vmclock0 (where a VM has one). */
struct tsc__vmclock {
	bool present;		/* read: the device is there and this process may */
	bool has_gen;		/* the hypervisor keeps vm_generation_counter */
	uint8_t status;		/* its clock_status (VMCLOCK_STATUS_*) */
	uint64_t marker;	/* disruption_marker */
	uint64_t gen;		/* vm_generation_counter, with has_gen */
};
/*
 * Its fields, consistent (its seqcount): 0; -ENODEV none, -EACCES one
 * this process may not open, -EAGAIN one that would not settle.
 */
int tsc__vmclock_read(struct tsc__vmclock *v);
/* Its disruption_marker (tsc__vm_marker), mapping it first; a constant 0 where there is none. */
const volatile uint64_t *tsc__vmclock_marker(void);
/*
 * What a measurement of the CPUs' skew holds for: the CPUs online, each
 * one's stay online (its topology directory, made anew when it comes
 * online), BOOTTIME - MONOTONIC (a sleep moves it) and the vmclock
 * device (a migration moves its marker).  And a TSC reading between two
 * of MONOTONIC, which with the one after the measurement gives the
 * clock's ns per tick.
 */
struct tsc__skew_key {
	cpu_set_t online;
	uint64_t stays;			/* the online CPUs' topology inodes, hashed */
	int64_t boot_mono;
	uint64_t width;			/* how far boot_mono may be off */
	struct tsc__vmclock vm;
	uint64_t t;			/* the TSC, read between: */
	int64_t mono_before, mono_after;
};
/*
 * The key of root (NULL: the system's) now, with the TSC bracket if
 * rate: 0, or -errno where it cannot be told (no online file, a CPU
 * without its topology directory: a container's sysfs, say).
 */
int tsc__skew_key(const char *root, struct tsc__skew_key *k, bool rate);
/* ticks in ns, at most, by the rate between two keys' brackets; UINT64_MAX unknown. */
uint64_t tsc__skew_ns(const struct tsc__skew_key *before, const struct tsc__skew_key *after,
		      uint64_t ticks);
/*
 * tsc_report_get()'s measurement in userspace, under root: the CPUs
 * measured and their max_skew_ticks, proven (trustworthy) or not, with
 * the key taken before it.  It replaces any earlier one: the bound's
 * skew term where the module gives none, while the key holds.
 */
void tsc__bound_note_skew(const char *root, const struct tsc__skew_key *before,
			  const cpu_set_t *measured, uint64_t ticks, bool proven);
/* Around fork() (sysclock.c's handlers), as tsc__discipline_fork_lock() and kin. */
void tsc__bound_fork_lock(void);
void tsc__bound_fork_unlock(void);
void tsc__bound_forked(void);
/* The terms of a reading now (terms->sz checked first): 0 or -EINVAL. */
int tsc__bound_terms(struct tsc__bound *const *slot_b,
		     const volatile struct tsc_timepage *const *slot_p, const uint32_t *use_rdtscp,
		     struct tsc_bound_terms *t);
/* sysclock.c: its fork handlers registered (once): 0 or pthread_atfork()'s error. */
int tsc__fork_handlers(void);
/* The time namespace offsets of this process's children (their own, mostly), in ns. */
void tsc__timens_offsets(int64_t *mono_ns, int64_t *boot_ns);
/* The unit tests' own: adjtimex() replaced (NULL: the kernel's). */
struct timex;
extern int (*tsc__test_adjtimex)(struct timex *tx);
/* ... and REALTIME stepped by this much, as the bounded readers' slow path reads it. */
extern int64_t tsc__test_realtime_step_ns;
/* ... and BOOTTIME ahead of MONOTONIC by this much more: a sleep, to the skew's note. */
extern int64_t tsc__test_sleep_ns;
/* ... and MONOTONIC_RAW faster by this many ppm from base on, to the TSC's rate check. */
extern int64_t tsc__test_raw_ppm;
extern int64_t tsc__test_raw_base;
/* ... and a refresh pauses this long in the middle of publishing (publishing set meanwhile). */
extern unsigned int tsc__test_publish_pause_us;
extern int tsc__test_publishing;
/* ... and the vmclock device read from this file (before the first bounded read). */
extern const char *tsc__test_vmclock_path;
/*
 * discipline.c: whether this thread may call adjtimex(): no seccomp
 * filter is on it (a filter may kill the process for the call), or the
 * caller said its filters allow the call (the options' adjtimex_allowed,
 * which tsc__adjtimex_allow() records) and the thread has as many.
 */
bool tsc__adjtimex_callable(void);
void tsc__adjtimex_allow(void);

/* The disciplined system clock (discipline.c). */
struct tsc__discipline;
/* Where a disciplined clock's readers find its page and that page's bound. */
struct tsc__discipline_slots {
	const volatile struct tsc_timepage **page;
	uint64_t *bound;
};
/*
 * Start one, synced as mode says (not NONE), at the frequency freq (NULL:
 * tsc_freq_get()'s on root); why gets what it is, in words.  0 and *out,
 * or a negative errno and the reason.
 */
int tsc__discipline_start(const struct tsc__discipline_slots *at, const char *root,
			  enum tsc_sysclock_discipline mode, bool inherit,
			  const struct tsc_freq *freq, char *why, size_t why_size,
			  struct tsc__discipline **out);
/* The module's clock page, under a sysfs root. */
#define TSC__PAGE_FILE	"/devices/system/cpu/tsc/clock_page"
/* The helper thread's name (tsc_sysclock_sync(3) documents it). */
#define TSC__HELPER_NAME	"libtsc-sync"
/*
 * The rate correction a sync applies for an error of err ns over a horizon
 * of horizon ns (0: none known), and that horizon: the longest of the last
 * TSC__DISCIPLINE_INTERVALS intervals between syncs, interval (ns, 0 for
 * one not measured) pushed in first.
 */
#define TSC__DISCIPLINE_INTERVALS	4
double tsc__discipline_corr(int64_t err, uint64_t horizon);
uint64_t tsc__discipline_horizon(uint64_t *intervals, uint64_t interval);
/*
 * MONOTONIC's rate over MONOTONIC_RAW's as the kernel's NTP state sets it
 * this second (kernel/time/ntp.c): tick (us per 1/user_hz s), freq (ppm,
 * scaled by 2^16), the share of the PLL's offset the kernel slews out
 * this second (what is left, offset, over 2^(2 + constant) - 1) and
 * adjtime()'s slew (500 us a second while adjtime_us is left).  0 where
 * it cannot be told: a PPS discipline corrects its whole offset each
 * second.
 */
struct timex;
double tsc__discipline_kernel_rate(const struct timex *tx, long adjtime_us, long user_hz);
/*
 * The TSC's rate in MONOTONIC_RAW ns, from two bases of (TSC, RAW), the
 * older 32 to 64 s back: 0 until half a second is seen, and again after a
 * gap; where interval_rate (the last interval's, 0: none) is more than
 * noise from it, that rate, and the bases start again from the last
 * sample (last_t, last_ns, which the caller keeps).
 */
struct tsc__raw_base {
	uint64_t t[2], ns[2];
	uint64_t last_t, last_ns;	/* RAW at the caller's last sample */
};
double tsc__discipline_raw_rate(struct tsc__raw_base *b, uint64_t t, uint64_t ns, bool gap,
				double interval_rate, double noise);
/*
 * The unit tests' own (built with TSC__TEST_HOOKS; nothing else defines
 * it): a disciplined clock's next this-many samples read too wide to use.
 */
extern unsigned int tsc__test_wide_samples;
/* ... the samples' offsets of REALTIME and BOOTTIME read this much low (noise); */
extern int64_t tsc__test_sample_offset_ns;
/* ... and a slow-path reader pauses this many times between loading a page and its seq. */
extern unsigned int tsc__test_slow_path_spin;
/* Counted for them: the waits for a page's write that a reader gave up (100000 pauses). */
extern unsigned long tsc__test_page_waits_abandoned;
/* ... and a struct tsc_clock's anchor to this clock id fails (-1: none). */
extern int tsc__test_anchor_fails;
/*
 * And a resume, as a clock sees it: a TSC reset ticks below what it
 * reads, and asleep_ns that the TSC counted and MONOTONIC did not.
 */
void tsc__test_resume(struct tsc__discipline *d, uint64_t ticks, uint64_t asleep_ns);
/* ... and the system's clock set (its next sync takes REALTIME's offset as sampled). */
void tsc__test_clock_set(struct tsc__discipline *d);
/* ... and how many times its helper woke to sync. */
unsigned int tsc__test_wakeups(const struct tsc__discipline *d);
/* The helper thread of a disciplined clock: 0, or -ENOENT if it has none. */
int tsc__discipline_thread(const struct tsc__discipline *d, pthread_t *thread);
int tsc__discipline_helper(const struct tsc_sysclock *c, pthread_t *thread);
int tsc__discipline_sync(struct tsc__discipline *d);
/*
 * A reader past the page at TSC reading t: a clock synced by its readers
 * syncs now if due and nobody else is (tsc__discipline_poll()).  Safe in
 * a signal handler; errno kept.
 */
void tsc__discipline_poll(struct tsc__discipline *d, uint64_t t);
void tsc__discipline_stop(struct tsc__discipline *d);
/* Whether it still reads its own page (not finished, withdrawn, or a fork's child's). */
bool tsc__discipline_usable(const struct tsc__discipline *d);
/*
 * How many ticks past cycle_last the disciplined page is read: three sync
 * periods, the period the longest of intervals (ns; CONVERGE_S at least),
 * each interval counted at most twice the longest before it, at
 * ns_per_tick.
 */
uint64_t tsc__discipline_max_delta(const uint64_t *intervals, double ns_per_tick);
/*
 * Around fork() (sysclock.c's pthread_atfork handlers): the lock of the
 * list of disciplined clocks taken before, released after in the parent;
 * in the child, tsc__discipline_forked() sends every disciplined clock to
 * clock_gettime(), as it has no helper and may not sync
 * (tsc__discipline_sync() refuses), and releases the lock.
 */
void tsc__discipline_fork_lock(void);
/* front.c: the front door's part of it, in the child. */
void tsc__time_forked(void);
void tsc__discipline_fork_unlock(void);
void tsc__discipline_forked(void);

/*
 * The most one account in a frequency's detail takes, its NUL included:
 * a source's own (each writes at most this much) and a skipped source's
 * reason (tsc_last_error()'s buffer).  freq.c checks that detail has room
 * for one of each source.
 */
#define TSC__REASON_SIZE	512

/* Record why, for tsc_last_error(), and return err (a negative errno). */
int tsc__fail(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void tsc__clear_error(void);

/*
 * sources.c: tsc_freq_from_sysfs(), saying whether the value may be the
 * kernel's unrefined boot estimate (the TSC marked unstable); then its
 * precision is TSC__UNREFINED_PPM, the 1% the kernel itself allows it.
 */
#define TSC__UNREFINED_PPM	10000.0
int tsc__freq_from_sysfs(struct tsc_freq *f, const char *root, bool *unrefined);

/*
 * value.c: how far, at most, as a fraction, the rate tsc_khz gives is from
 * the tsc clocksource's rate (TSC_REFERENCE_KERNEL):
 * the rounding of its clocksource's mult.  NAN outside 1 MHz..20 GHz.
 */
double tsc__kernel_rounding(uint64_t khz);

/*
 * value.c: fill f from num/den Hz, precision_ppm of the rate of ref;
 * -ERANGE outside TSC_MIN_HZ..TSC_MAX_HZ.
 */
int tsc__freq_set(struct tsc_freq *f, enum tsc_source source, uint64_t num,
		  uint64_t den, double precision_ppm, enum tsc_reference ref);

/* sysfs.c: the root ($TSC_SYSFS_ROOT, "/sys"), and one-value files. */
const char *tsc__sysfs_root(const char *root);
int tsc__read_value(const char *root, const char *rel, char *path, size_t path_size,
		    char *buf, size_t size, size_t *len);
int tsc__read_u64(const char *root, const char *rel, uint64_t *v);
int tsc__read_s64(const char *root, const char *rel, int64_t *v);
/* A file that holds 0 or 1; any other number is -EINVAL, naming the file. */
int tsc__read_flag(const char *root, const char *rel, bool *v);
/* The kernel's current clocksource ("tsc", "hpet"...), "" if unreadable. */
void tsc__clocksource(const char *root, char *out, size_t size);
/* Whether tsc is among the available clocksources: 1, 0, -1 if unknown. */
int tsc__tsc_available(const char *root);
/*
 * How the kernel came by tsc_khz: 1, it took it as known (CPU flag
 * tsc_known_freq: from CPUID, an MSR or the hypervisor; never measured);
 * 0, it measured it at boot; -1, nothing says.  The module's file, else
 * /proc/cpuinfo where root is the system's own.
 */
int tsc__kernel_known_freq(const char *root);

/* Parsers, pure: the fuzz targets call them with any bytes. */
int tsc__parse_u64(const char *buf, size_t len, uint64_t *val);
int tsc__parse_s64(const char *buf, size_t len, int64_t *val);
int tsc__parse_khz(const char *buf, size_t len, uint64_t *khz);
int tsc__parse_cpulist_count(const char *buf, size_t len, unsigned int *count);
int tsc__parse_cpulist(const char *buf, size_t len, cpu_set_t *set);
/*
 * A CPU list file of the sysfs root into *set (housekeeping.c); unless
 * must, an absent, empty or "(null)" one is no CPU, not an error.
 */
int tsc__read_cpulist(const char *root, const char *rel, cpu_set_t *set, bool must);

/*
 * housekeeping.c: the online CPUs neither isolated nor nohz_full under
 * root; -ENODEV if none, or a file's error.
 */
int tsc__housekeeping_cpus(const char *root, cpu_set_t *set);

struct tsc__cpuid {
	uint32_t eax, ebx, ecx, edx;
};

/*
 * A TSC crystal's tolerance, over temperature and age: quartz is tens of
 * ppm, and the ratio in leaf 0x15 is exact.
 */
#define TSC__CRYSTAL_PPM	100.0

/*
 * What the sources ask the machine, CPUID and the perf page: this
 * machine's (tsc__this_machine), or a test's.  A NULL perf: no perf page.
 */
struct tsc__machine {
	void (*cpuid)(void *ctx, uint32_t leaf, struct tsc__cpuid *r);
	void *ctx;
	int (*perf)(struct tsc_freq *f);
};
extern const struct tsc__machine tsc__this_machine;

/* perf.c: the kernel's TSC conversion on a perf event's mmap page. */
int tsc__freq_from_perf_page(struct tsc_freq *f);
/* The rate that conversion implies; -ERANGE if it is not one. */
int tsc__freq_from_perf_mult(struct tsc_freq *f, uint32_t mult, uint16_t shift);
struct perf_event_mmap_page;
/* Its fields, consistent: 0, -ENODATA without cap_user_time, -EAGAIN. */
int tsc__perf_read_page(volatile struct perf_event_mmap_page *pg, uint32_t *mult,
			uint16_t *shift);
/* perf_event_open() failed with errno err: the reason, and -err. */
int tsc__perf_open_failed(int err);

int tsc__freq_from_cpuid(struct tsc_freq *f, const struct tsc__machine *src);
int tsc__freq_from_hypervisor(struct tsc_freq *f, const struct tsc__machine *src);
/* Leaf 0x16's base MHz, a nominal figure; 0 if there is none. */
uint32_t tsc__base_mhz(const struct tsc__machine *src);

/*
 * tsc_freq_get() on the given CPUID; opts->sysfs_root still says where
 * the kernel's files are.
 */
int tsc__freq_get(struct tsc_freq *f, const struct tsc_opts *opts,
		  const struct tsc__machine *cpuid);

/* Leaf 0x15 (and 0x16, NULL if absent) into f. */
int tsc__freq_from_leaf15(struct tsc_freq *f, const struct tsc__cpuid *l15,
			  const struct tsc__cpuid *l16);
/* Leaf 0x40000010 into f. */
int tsc__freq_from_leaf40000010(struct tsc_freq *f,
				const struct tsc__cpuid *leaf);

/* The clocks a calibration reads, replaceable for tests. */
struct tsc__calib_clock {
	uint64_t (*ticks)(void *ctx);	/* ordered TSC read */
	uint64_t (*ns)(void *ctx);	/* the reference clock, ns */
	uint64_t res_ns;		/* its resolution (clock_getres) */
	bool res_exact;			/* res_ns is its quantum: do not measure */
	int (*cpu)(void *ctx);		/* the CPU it runs on; NULL: one CPU */
	void *ctx;
	/* What it runs at: the kernel's tsc_khz if it is the TSC itself. */
	enum tsc_reference ref;
	const char *name;		/* for detail: "tsc", "hpet"... */
};

int tsc__calibrate(struct tsc_freq *f, const struct tsc__calib_clock *clk,
		   double target_ppm, uint64_t max_ns);

/* probe.c: offsets measured in userspace. */
struct tsc__event {
	uint32_t cpu;	/* index into the list of CPUs probed */
	uint64_t tsc;
};

void tsc__probe_decode(const struct tsc__event *log, size_t n, unsigned int ref,
		       struct tscfk_offset_est *est, bool *warp);
/*
 * Race threads on cpus[0..n) until each has min_rounds probes against
 * cpus[ref], or max_ms pass; est[i] gets cpus[i]'s probes.
 */
int tsc__probe_offsets(const int *cpus, unsigned int n, unsigned int ref,
		       unsigned int min_rounds, unsigned int max_ms,
		       struct tscfk_offset_est *est, bool *warp);

#endif /* TSC_INTERNAL_H */
