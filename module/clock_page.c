// SPDX-License-Identifier: GPL-2.0
/*
 * tsc/clock_page and tsc/timekeeper_freq_millihz: the timekeeper's own
 * mapping from a TSC reading to CLOCK_REALTIME, MONOTONIC, BOOTTIME, TAI
 * and MONOTONIC_RAW, published at every timekeeper update (the vDSO gets
 * the same numbers, in a layout of its own that is no ABI).  The layout
 * and the reader's arithmetic: common/tsc_clock_page.h.
 *
 * Mappings outlive the module: after an rmmod they read GONE, never
 * zeros, and nothing in them may lead back into the module's code or
 * data, which are gone.  So:
 *
 *  - The page is the module's own allocation, in no page cache and on no
 *    LRU list: nothing reclaims, evicts or migrates it.  mmap() puts it
 *    in the page table at once (vm_insert_page()), and each page-table
 *    entry holds a reference to it, which fork() copies (VM_MIXEDMAP):
 *    the last mapping to go frees it, with or without the module.
 *  - Nothing is mapped later, so the mapping needs no fault handler and
 *    keeps the kernel's own empty vm_operations.  (A page-table entry
 *    that its process zaps itself, with MADV_DONTNEED, comes back as
 *    SIGBUS, not as another page.)
 *  - The mapping is moved to an internal, empty file (shmem's, or ramfs
 *    without CONFIG_SHMEM) whose operations are the kernel's.  kernfs
 *    then leaves it alone: it neither wraps it nor, when the sysfs file
 *    is removed at rmmod, unmaps it.  Nothing of shmem's maps anything.
 *  - Each mapping gets a file of its own for that file's inode, made with
 *    the mapper's credentials as anon_inode_getfile() makes one, on an
 *    S_PRIVATE inode.  Security modules check a mapping's file again at
 *    every mprotect(), even to PROT_NONE: SELinux first asks whether the
 *    caller may use a file another domain made (fd:use), then whether it
 *    may read the inode.  The file is the caller's own, so the first
 *    holds, and the inode is private, which passes the second.  One file
 *    made at load, in modprobe's domain, would deny a confined user that
 *    (Debian's refpolicy gives user_t no fd:use on kmod_t).  No open: no
 *    security module's open check, fanotify permission event or lease,
 *    none of which may wait here, under the mapper's mmap_lock.
 *  - Read-only: PROT_WRITE and PROT_EXEC are refused, and VM_MAYWRITE and
 *    VM_MAYEXEC cleared, so that neither mprotect() nor a forced write
 *    (ptrace, /proc/PID/mem) can add them later.
 *
 * The page holds the initial time namespace's clocks.  In a namespace
 * whose offsets are not zero, clock_gettime() adds them to MONOTONIC,
 * MONOTONIC_RAW and BOOTTIME (the vDSO has a page per namespace for
 * that; this one page cannot be both): read() adds them to its copy, and
 * mmap() is refused there, so that no reader gets another namespace's
 * clocks from us unasked.  A mapping made before a move (setns(), or a
 * child of unshare(CLONE_NEWTIME) that inherits it) keeps the initial
 * namespace's.
 *
 * The page's own seq is the userspace protocol, odd also while the page
 * is not to be used.  The module's readers (read() and the rate file)
 * follow a seqcount of their own, so that nothing a user can do is
 * waited for inside the timekeeper's update, where the notifier runs.
 */
#include <linux/clocksource.h>
#include <linux/device.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/notifier.h>
#include <linux/pvclock_gtod.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/seqlock.h>
#include <linux/shmem_fs.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/time_namespace.h>
#include <linux/timekeeper_internal.h>

#include "compat.h"
#include "tscfk.h"
#include "tsc_clock_page.h"

static struct file *anchor;	/* its inode is what mappings map */
static struct page *page;
static struct tscfk_clock_page *cp;

/*
 * Written around every write of the page, by one writer at a time: the
 * notifier, under the timekeeper's lock with interrupts off, and the
 * unload, once the notifier is unregistered, with interrupts off too (as
 * a seqcount that an interrupt writes must be, for lockdep and on its
 * own terms).  So a writer never waits, and is never preempted while a
 * reader spins on it.
 */
static seqcount_t snap_seq = SEQCNT_ZERO(snap_seq);

/*
 * A reader gives up after this many tries and this long, both: far more
 * than an update takes (a microsecond or so, a tick's worth under
 * emulation), so only a writer stopped from outside, such as a preempted
 * vCPU, makes it.  Tries, so that the reader's own preemption does not
 * count; time, so that a fast CPU's tries do not run out first.
 */
#define SNAPSHOT_MAX_NS		(10 * NSEC_PER_MSEC)
#define SNAPSHOT_MIN_TRIES	1000

static void state_of(struct tscfk_clock_state *s, const struct timekeeper *tk)
{
	s->cycle_last = tk->tkr_mono.cycle_last;
	s->mult = tk->tkr_mono.mult;
	s->shift = tk->tkr_mono.shift;
	s->xtime_sec = tk->xtime_sec;
	s->xtime_nsec = tk->tkr_mono.xtime_nsec;
	s->wall_to_mono_ns = timespec64_to_ns(&tk->wall_to_monotonic);
	s->mono_to_boot_ns = timespec64_to_ns(&tk->monotonic_to_boot);
	s->tai_offset_s = tk->tai_offset;
	s->raw_mult = tk->tkr_raw.mult;
	s->raw_shift = tk->tkr_raw.shift;
	s->raw_cycle_last = tk->tkr_raw.cycle_last;
	s->raw_sec = tk->raw_sec;
	s->raw_nsec = tk->tkr_raw.xtime_nsec;
	s->cycle_interval = tk->cycle_interval;
	s->ntp_tick = tk->ntp_tick;
	s->max_cycles = tk->tkr_mono.clock->max_cycles;
}

/*
 * The page's seqcount, written by hand: the counter lives in the page, in
 * the layout userspace reads.  Each smp_wmb() pairs with the read barrier
 * a reader puts between its two reads of seq and the fields.  seq is odd
 * while the page is written, and stays odd while it is not to be used
 * (the clocks do not read the TSC, or the module is gone): a reader's
 * fast path tests one bit for all of it, and looks at flags only then.
 */
static void write_begin(void)
{
	write_seqcount_begin(&snap_seq);
	WRITE_ONCE(cp->seq, (cp->seq + 1) | 1);	/* odd, and changed */
	smp_wmb();	/* seq odd before any field changes */
}

static void write_end(bool usable)
{
	smp_wmb();	/* every field written before seq is even again */
	if (usable)
		WRITE_ONCE(cp->seq, cp->seq + 1);
	write_seqcount_end(&snap_seq);
}

/*
 * Called at every update of the core timekeeper (the auxiliary clocks of
 * 6.17 on do not call it), inside its write section: interrupts off, the
 * timekeeper's raw lock held, every reader of the kernel's clocks
 * spinning meanwhile.  Takes no lock and waits for nothing.
 */
static int gtod_notify(struct notifier_block *nb, unsigned long was_set,
		       void *priv)
{
	const struct timekeeper *tk = priv;
	const struct clocksource *clock = tk->tkr_mono.clock;
	struct tscfk_clock_state s;
	u32 flags = 0;

	state_of(&s, tk);
	write_begin();
	if (tscfk_clock_events_note(tk) || was_set)
		cp->generation++;
	if (clock->vdso_clock_mode == VDSO_CLOCKMODE_TSC &&
	    !tscfk_clock_page_fill(cp, &s))
		flags |= TSCFK_CLOCK_TSC;
	cp->flags = flags;
	write_end(flags & TSCFK_CLOCK_TSC);
	return NOTIFY_DONE;
}

static struct notifier_block gtod_nb = {
	.notifier_call = gtod_notify,
};

/*
 * A consistent copy of the page, without a lock: retried while a writer
 * is at work, and given up (-EBUSY) once both bounds above are passed.
 * local_clock() times it, as it reads no timekeeper state that the writer
 * holds.
 */
static int snapshot(struct tscfk_clock_page *snap)
{
	u64 deadline = local_clock() + SNAPSHOT_MAX_NS;
	unsigned int seq, tries = 0;

	for (;;) {
		seq = raw_read_seqcount(&snap_seq);
		if (!(seq & 1)) {
			memcpy(snap, cp, sizeof(*snap));
			if (!read_seqcount_retry(&snap_seq, seq))
				return 0;
		}
		if (++tries >= SNAPSHOT_MIN_TRIES && local_clock() >= deadline)
			return -EBUSY;
		cpu_relax();
	}
}

/*
 * What the calling task's time namespace adds to MONOTONIC (and
 * MONOTONIC_RAW) and to BOOTTIME, in ns: 0 in the initial one, and
 * without CONFIG_TIME_NS.  Fixed once a task has entered the namespace.
 */
static bool timens_offsets(s64 *mono, s64 *boot)
{
	struct timespec64 m = {}, b = {};

	timens_add_monotonic(&m);
	timens_add_boottime(&b);
	*mono = timespec64_to_ns(&m);
	*boot = timespec64_to_ns(&b);
	return *mono || *boot;
}

/*
 * read(): the page as a mapping in the reader's time namespace would see
 * it, for tools without mmap().
 */
static ssize_t clock_page_read(struct file *file, struct kobject *kobj,
			       __tscfk_bin_read_const struct bin_attribute *attr,
			       char *buf, loff_t off, size_t count)
{
	struct tscfk_clock_page snap;
	s64 mono, boot;
	size_t n = 0;
	int err;

	err = snapshot(&snap);
	if (err)
		return err;
	if (timens_offsets(&mono, &boot)) {
		snap.mono_off += mono;
		snap.raw.off += mono;
		snap.boot_off += boot;
	}
	/* sysfs has cut count to the file's size, PAGE_SIZE. */
	if (off < sizeof(snap)) {
		n = min_t(size_t, count, sizeof(snap) - off);
		memcpy(buf, (char *)&snap + off, n);
	}
	memset(buf + n, 0, count - n);
	return count;
}

static int clock_page_mmap(struct file *file, struct kobject *kobj,
			   __tscfk_bin_mmap_const struct bin_attribute *attr,
			   struct vm_area_struct *vma)
{
	struct inode *inode = file_inode(anchor);
	struct file *mine;
	s64 mono, boot;

	if (vma->vm_pgoff || vma->vm_end - vma->vm_start != PAGE_SIZE)
		return -EINVAL;
	if (vma->vm_flags & (VM_WRITE | VM_EXEC))
		return -EACCES;
	if (timens_offsets(&mono, &boot))
		return -EOPNOTSUPP;
	ihold(inode);
	mine = alloc_file_pseudo(inode, anchor->f_path.mnt, "tsc_clock_page",
				 O_RDONLY, anchor->f_op);
	if (IS_ERR(mine)) {
		iput(inode);
		return PTR_ERR(mine);
	}
	vm_flags_clear(vma, VM_MAYWRITE | VM_MAYEXEC);
	/* mremap() cannot grow it past the one page there is. */
	vm_flags_set(vma, VM_DONTEXPAND);
	vma_set_file(vma, mine);
	fput(mine);
	/* Takes a reference for the page-table entry; VM_MIXEDMAP. */
	return vm_insert_page(vma, vma->vm_start, page);
}

struct bin_attribute tscfk_clock_page_attr = {
	.attr = { .name = "clock_page", .mode = 0444 },
	.size = PAGE_SIZE,
	.read = clock_page_read,
	.mmap = clock_page_mmap,
};

/* Only while the clocks read the TSC: otherwise the rate is another clock's. */
static ssize_t timekeeper_freq_millihz_show(struct device *dev,
					    struct device_attribute *attr,
					    char *buf)
{
	struct tscfk_clock_page snap;
	u64 millihz;
	int err;

	err = snapshot(&snap);
	if (err)
		return err;
	if (!(snap.flags & TSCFK_CLOCK_TSC))
		return -ENODATA;
	millihz = tscfk_clock_rate_millihz(&snap);
	if (!millihz)
		return -ENODATA;
	return sysfs_emit(buf, "%llu\n", millihz);
}

struct device_attribute tscfk_timekeeper_freq_attr =
	__ATTR_RO(timekeeper_freq_millihz);

int tscfk_clock_page_init(void)
{
	int err;

	anchor = tscfk_shmem_file_setup("tsc_clock_page", 0,
					TSCFK_SHMEM_NORESERVE);
	if (IS_ERR(anchor))
		return PTR_ERR(anchor);
	/*
	 * It stays empty: nobody may write, truncate or punch it, which a
	 * privileged user could try through /proc/PID/map_files/.  Private,
	 * where shmem_kernel_file_setup() did not make it so (6.1).
	 */
	inode_set_flags(file_inode(anchor), S_IMMUTABLE | S_PRIVATE,
			S_IMMUTABLE | S_PRIVATE);
	page = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!page) {
		err = -ENOMEM;
		goto err_anchor;
	}
	cp = page_address(page);
	cp->version = TSCFK_CLOCK_PAGE_VERSION;
	/* Fills the page at once, under the timekeeper's lock. */
	err = pvclock_gtod_register_notifier(&gtod_nb);
	if (err)
		goto err_page;
	return 0;

err_page:
	__free_page(page);
err_anchor:
	fput(anchor);
	return err;
}

/*
 * After the sysfs files are gone: no new mapping can start.  The page and
 * the anchor's inode live on in the mappings there are, whose page-table
 * entries and files hold them.
 */
void tscfk_clock_page_exit(void)
{
	unsigned long irqflags;

	/* Returns after any update under way: it takes the timekeeper's lock. */
	pvclock_gtod_unregister_notifier(&gtod_nb);
	local_irq_save(irqflags);
	write_begin();
	cp->flags = TSCFK_CLOCK_GONE;
	cp->generation++;
	write_end(false);
	local_irq_restore(irqflags);
	put_page(page);
	fput(anchor);
}
