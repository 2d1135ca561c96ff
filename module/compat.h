/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels this module builds against, in one
 * place.  Which side each takes, Kbuild finds out by compiling the
 * programs of module/compat/ (compat-probes.h): so a kernel we never saw,
 * with its vendor's backports, takes the right one too.  Where an API has
 * two shapes, both are probed, and a kernel that has neither stops the
 * build here, naming the probes (compat-probes.h.log says what its
 * compiler answered), rather than failing later in code that assumed
 * one.
 */
#ifndef TSCFK_COMPAT_H
#define TSCFK_COMPAT_H

#include <linux/device.h>
#include <linux/mm.h>
#include <linux/rcupdate.h>
#include <linux/sched/isolation.h>
#include <asm/msr.h>

#include "compat-probes.h"

/* bus_get_dev_root() replaced direct use of bus->dev_root in 6.3. */
#if !defined(TSCFK_HAVE_BUS_GET_DEV_ROOT) && !defined(TSCFK_HAVE_BUS_DEV_ROOT_FIELD)
#error "neither bus_get_dev_root() nor bus->dev_root (module/compat-probes.h.log)"
#endif
#ifndef TSCFK_HAVE_BUS_GET_DEV_ROOT
static inline struct device *bus_get_dev_root(struct bus_type *bus)
{
	return get_device(bus->dev_root);
}
#endif

/* tscfk_cpu_isolated() below needs housekeeping_test_cpu() on every kernel. */
#ifndef TSCFK_HAVE_HOUSEKEEPING_DOMAIN
#error "no housekeeping_test_cpu(), HK_TYPE_DOMAIN, HK_TYPE_TICK (module/compat-probes.h.log)"
#endif

/*
 * cpu_is_isolated() came in 6.2 (and to Debian's 6.1 with a stable update):
 * a CPU outside the housekeeping set of the scheduler domains or the tick.
 */
#ifndef TSCFK_HAVE_CPU_IS_ISOLATED
static inline bool cpu_is_isolated(int cpu)
{
	return !housekeeping_test_cpu(cpu, HK_TYPE_DOMAIN) ||
	       !housekeeping_test_cpu(cpu, HK_TYPE_TICK);
}
#endif

/*
 * A CPU its administrator isolated: outside the scheduler's domains
 * (isolcpus=, an isolated cpuset partition) or outside the tick's
 * housekeeping (nohz_full=).  6.12's cpu_is_isolated() says all of it;
 * 7.2's and 7.3's no longer count nohz_full= (the kernel folded its
 * housekeeping types together), whose CPUs want nothing of ours either.
 * So both halves, on every kernel.
 *
 * Under rcu_read_lock(): 7.2 and 7.3 replace the HK_TYPE_DOMAIN mask at
 * run time when a cpuset partition changes (housekeeping_update(): swap,
 * synchronize_rcu(), kfree()), and only RCU, or the hotplug lock held for
 * writing, keeps the old one alive while it is read.  Our callers hold
 * the hotplug lock for reading at most.  Older kernels ignore the lock,
 * which costs nothing there.  The answer may be stale once it is
 * returned, as it always could: a cpuset may isolate the CPU just after.
 */
static inline bool tscfk_cpu_isolated(int cpu)
{
	bool isolated;

	rcu_read_lock();
	isolated = cpu_is_isolated(cpu) ||
		   !housekeeping_test_cpu(cpu, HK_TYPE_TICK);
	rcu_read_unlock();
	return isolated;
}

/*
 * vm_flags_clear() and vm_flags_set() came in 6.3, when vm_flags became
 * writable only through helpers that also take the VMA's lock.
 */
#if !defined(TSCFK_HAVE_VM_FLAGS_SET) && !defined(TSCFK_HAVE_VM_FLAGS_FIELD)
#error "neither vm_flags_set() nor a writable vm_flags (module/compat-probes.h.log)"
#endif
#ifndef TSCFK_HAVE_VM_FLAGS_SET
static inline void vm_flags_clear(struct vm_area_struct *vma,
				  unsigned long flags)
{
	vma->vm_flags &= ~flags;
}

static inline void vm_flags_set(struct vm_area_struct *vma,
				unsigned long flags)
{
	vma->vm_flags |= flags;
}
#endif

/*
 * A bin_attribute's callbacks take it const, and an attribute group's
 * bin_attrs lists const ones, where the transition that began in 6.13
 * has ended.  Each step on its own: mmap() took it const in 6.13, read()
 * only in 6.16 (6.13 to 6.15 have a const read_new() beside read()).
 */
#if !defined(TSCFK_HAVE_CONST_BIN_MMAP) && !defined(TSCFK_HAVE_MUTABLE_BIN_MMAP)
#error "a bin_attribute's mmap() fits neither probe (module/compat-probes.h.log)"
#endif
#if !defined(TSCFK_HAVE_CONST_BIN_READ) && !defined(TSCFK_HAVE_MUTABLE_BIN_READ)
#error "a bin_attribute's read() fits neither probe (module/compat-probes.h.log)"
#endif
#if !defined(TSCFK_HAVE_CONST_BIN_ATTRS) && !defined(TSCFK_HAVE_MUTABLE_BIN_ATTRS)
#error "an attribute_group's bin_attrs fits neither probe (module/compat-probes.h.log)"
#endif
#ifdef TSCFK_HAVE_CONST_BIN_MMAP
#define __tscfk_bin_mmap_const const
#else
#define __tscfk_bin_mmap_const
#endif
#ifdef TSCFK_HAVE_CONST_BIN_READ
#define __tscfk_bin_read_const const
#else
#define __tscfk_bin_read_const
#endif
#ifdef TSCFK_HAVE_CONST_BIN_ATTRS
#define __tscfk_bin_list_const const
#else
#define __tscfk_bin_list_const
#endif

/* The MSR readers that return a u64 were called rdmsrl_*() until 6.16. */
#if !defined(TSCFK_HAVE_RDMSRQ) && !defined(TSCFK_HAVE_RDMSRL)
#error "neither rdmsrq_safe*() nor rdmsrl_safe*() (module/compat-probes.h.log)"
#endif
#ifndef TSCFK_HAVE_RDMSRQ
#define rdmsrq_safe(msr, p) rdmsrl_safe(msr, p)
#define rdmsrq_safe_on_cpu(cpu, msr, p) rdmsrl_safe_on_cpu(cpu, msr, p)
#endif

/*
 * system_unbound_wq was renamed system_dfl_wq in 6.17; 7.3 warns on the
 * old name ("enqueued on deprecated workqueue"), and it is going away.
 */
#if !defined(TSCFK_HAVE_SYSTEM_DFL_WQ) && !defined(TSCFK_HAVE_SYSTEM_UNBOUND_WQ)
#error "neither system_dfl_wq nor system_unbound_wq (module/compat-probes.h.log)"
#endif
#ifndef TSCFK_HAVE_SYSTEM_DFL_WQ
#define system_dfl_wq system_unbound_wq
#endif

/* shmem's file setup took its flags as VM_* bits until vma_flags_t. */
#if !defined(TSCFK_HAVE_SHMEM_VMA_FLAGS) && !defined(TSCFK_HAVE_SHMEM_VM_FLAGS)
#error "shmem_file_setup() takes neither flags type (module/compat-probes.h.log)"
#endif
#ifdef TSCFK_HAVE_SHMEM_VMA_FLAGS
#define TSCFK_SHMEM_NORESERVE mk_vma_flags(VMA_NORESERVE_BIT)
#else
#define TSCFK_SHMEM_NORESERVE VM_NORESERVE
#endif

/*
 * The clock page's anchor file.  shmem_kernel_file_setup()'s inode is
 * S_PRIVATE from the start: SELinux never labels it, and the security
 * modules' inode hooks pass it.  shmem_file_setup()'s is labelled for
 * whoever loaded the module; clock_page.c makes it private after, which
 * passes the same checks.  Every kernel declares it; 6.1 does not export
 * it.
 */
#ifdef TSCFK_HAVE_SHMEM_KERNEL_FILE_SETUP
#define tscfk_shmem_file_setup shmem_kernel_file_setup
#else
#define tscfk_shmem_file_setup shmem_file_setup
#endif

#endif /* TSCFK_COMPAT_H */
