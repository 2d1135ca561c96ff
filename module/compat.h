/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels this module builds against, in one place.
 */
#ifndef TSCFK_COMPAT_H
#define TSCFK_COMPAT_H

#include <linux/device.h>

/*
 * bus_get_dev_root() replaced direct use of bus->dev_root in 6.3.  Kbuild
 * looks for it in the headers, so a backport is found too.
 */
#ifndef TSCFK_HAVE_BUS_GET_DEV_ROOT
static inline struct device *bus_get_dev_root(struct bus_type *bus)
{
	return get_device(bus->dev_root);
}
#endif

/*
 * cpu_is_isolated() came in 6.2 (and to Debian's 6.1 with a stable update):
 * a CPU outside the housekeeping set of the scheduler domains or the tick.
 */
#ifndef TSCFK_HAVE_CPU_IS_ISOLATED
#include <linux/sched/isolation.h>
static inline bool cpu_is_isolated(int cpu)
{
	return !housekeeping_test_cpu(cpu, HK_TYPE_DOMAIN) ||
	       !housekeeping_test_cpu(cpu, HK_TYPE_TICK);
}
#endif

/*
 * vm_flags_clear() and vm_flags_set() came in 6.3, when vm_flags became
 * writable only through helpers that also take the VMA's lock.
 */
#ifndef TSCFK_HAVE_VM_FLAGS_CLEAR
#include <linux/mm.h>
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

#endif /* TSCFK_COMPAT_H */
