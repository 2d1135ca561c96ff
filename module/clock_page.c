// SPDX-License-Identifier: GPL-2.0
/*
 * tsc/clock_page and tsc/timekeeper_freq_millihz: the timekeeper's own
 * mapping from a TSC reading to CLOCK_REALTIME, MONOTONIC, BOOTTIME, TAI
 * and MONOTONIC_RAW, published at every timekeeper update (the vDSO gets
 * the same numbers, in a layout of its own that is no ABI).  The layout
 * and the reader's arithmetic: common/tsc_clock_page.h.
 *
 * The page belongs to an internal shmem file (ramfs without CONFIG_SHMEM),
 * not to the module: a mapping is a mapping of that file, so it holds the
 * file and the page but not the module, and stays valid after an rmmod,
 * which marks the page GONE before letting go of it.  Mappings are
 * read-only: PROT_WRITE and PROT_EXEC are refused, and VM_MAYWRITE cleared
 * so that mprotect() cannot add them later.
 */
#include <linux/clocksource.h>
#include <linux/device.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/notifier.h>
#include <linux/pagemap.h>
#include <linux/pvclock_gtod.h>
#include <linux/shmem_fs.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/timekeeper_internal.h>

#include "compat.h"
#include "tscfk.h"
#include "tsc_clock_page.h"

static struct file *page_file;
static struct page *page;
static struct tscfk_clock_page *cp;

/*
 * Serialises the writers (the timekeeper's notifier, under the
 * timekeeper's raw lock with interrupts off, and the unload) with the
 * module's own readers, which take a snapshot.  Userspace cannot take it:
 * it follows cp->seq.  Raw, as it nests in the timekeeper's raw lock.
 */
static DEFINE_RAW_SPINLOCK(page_lock);

/* What changes the page's generation besides the kernel's was_set. */
static const struct clocksource *last_clock;
static ktime_t last_offs_boot;

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
}

/*
 * The seqcount write side, by hand: the counter lives in the page, in the
 * layout userspace reads.  Each smp_wmb() pairs with the read barrier a
 * reader puts between its two reads of seq and the fields.  seq is odd
 * while the page is written, and stays odd while it is not to be used
 * (the clocks do not read the TSC, or the module is gone): a reader's
 * fast path tests one bit for all of it, and looks at flags only then.
 */
static void write_begin(void)
{
	WRITE_ONCE(cp->seq, (cp->seq + 1) | 1);	/* odd, and changed */
	smp_wmb();	/* seq odd before any field changes */
}

static void write_end(bool usable)
{
	smp_wmb();	/* every field written before seq is even again */
	if (usable)
		WRITE_ONCE(cp->seq, cp->seq + 1);
}

/* Called under the timekeeper's lock at every update: no sleeping. */
static int gtod_notify(struct notifier_block *nb, unsigned long was_set,
		       void *priv)
{
	const struct timekeeper *tk = priv;
	const struct clocksource *clock = tk->tkr_mono.clock;
	struct tscfk_clock_state s;
	u32 flags = 0;

	state_of(&s, tk);
	raw_spin_lock(&page_lock);
	write_begin();
	if (was_set || clock != last_clock || tk->offs_boot != last_offs_boot)
		cp->generation++;
	last_clock = clock;
	last_offs_boot = tk->offs_boot;
	if (clock->vdso_clock_mode == VDSO_CLOCKMODE_TSC &&
	    !tscfk_clock_page_fill(cp, &s))
		flags |= TSCFK_CLOCK_TSC;
	cp->flags = flags;
	write_end(flags & TSCFK_CLOCK_TSC);
	raw_spin_unlock(&page_lock);
	return NOTIFY_DONE;
}

static struct notifier_block gtod_nb = {
	.notifier_call = gtod_notify,
};

static void snapshot(struct tscfk_clock_page *snap)
{
	unsigned long irqflags;

	raw_spin_lock_irqsave(&page_lock, irqflags);
	*snap = *cp;
	raw_spin_unlock_irqrestore(&page_lock, irqflags);
}

/* read(): the page as a mapping sees it, for tools without mmap(). */
static ssize_t clock_page_read(struct file *file, struct kobject *kobj,
			       __tscfk_bin_const struct bin_attribute *attr,
			       char *buf, loff_t off, size_t count)
{
	struct tscfk_clock_page snap;
	size_t n = 0;

	snapshot(&snap);
	/* sysfs has cut count to the file's size, PAGE_SIZE. */
	if (off < sizeof(snap)) {
		n = min_t(size_t, count, sizeof(snap) - off);
		memcpy(buf, (char *)&snap + off, n);
	}
	memset(buf + n, 0, count - n);
	return count;
}

static int clock_page_mmap(struct file *file, struct kobject *kobj,
			   __tscfk_bin_const struct bin_attribute *attr,
			   struct vm_area_struct *vma)
{
	if (vma->vm_pgoff || vma->vm_end - vma->vm_start != PAGE_SIZE)
		return -EINVAL;
	if (vma->vm_flags & (VM_WRITE | VM_EXEC))
		return -EACCES;
	vm_flags_clear(vma, VM_MAYWRITE | VM_MAYEXEC);
	/* mremap() cannot grow it past the one page there is. */
	vm_flags_set(vma, VM_DONTEXPAND);
	/*
	 * The mapping becomes one of page_file, and kernfs, seeing vm_file
	 * changed, leaves it alone: its removal at rmmod will not unmap it.
	 */
	vma_set_file(vma, page_file);
	return page_file->f_op->mmap(page_file, vma);
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

	snapshot(&snap);
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

	page_file = shmem_file_setup("tsc_clock_page", PAGE_SIZE,
				     TSCFK_SHMEM_NORESERVE);
	if (IS_ERR(page_file))
		return PTR_ERR(page_file);
	/*
	 * Nobody may write, truncate or punch the file, which a privileged
	 * user could reach through /proc/PID/map_files/: a dropped page would
	 * fault in as zeros, an even seq and a clock at 0.
	 */
	file_inode(page_file)->i_flags |= S_IMMUTABLE;
	/*
	 * The timekeeper writes through the kernel's address: the page stays
	 * where it is, held by the module and kept off the LRU, so it is
	 * never reclaimed nor written back (it needs no dirtying), and it is
	 * not movable, since a pinned page would block memory offlining and
	 * CMA where a movable one is expected.
	 */
	mapping_set_unevictable(page_file->f_mapping);
	page = shmem_read_mapping_page_gfp(page_file->f_mapping, 0, GFP_KERNEL);
	if (IS_ERR(page)) {
		err = PTR_ERR(page);
		goto err_file;
	}
	cp = page_address(page);
	cp->version = TSCFK_CLOCK_PAGE_VERSION;
	/* Fills the page at once, under the timekeeper's lock. */
	err = pvclock_gtod_register_notifier(&gtod_nb);
	if (err)
		goto err_page;
	return 0;

err_page:
	put_page(page);
err_file:
	fput(page_file);
	return err;
}

/* After the sysfs files are gone: no new mapping can start. */
void tscfk_clock_page_exit(void)
{
	unsigned long irqflags;

	/* Returns after any update under way: it holds the same lock. */
	pvclock_gtod_unregister_notifier(&gtod_nb);
	raw_spin_lock_irqsave(&page_lock, irqflags);
	write_begin();
	cp->flags = TSCFK_CLOCK_GONE;
	cp->generation++;
	write_end(false);
	raw_spin_unlock_irqrestore(&page_lock, irqflags);
	put_page(page);
	fput(page_file);
}
