// SPDX-License-Identifier: GPL-2.0
/* Before 6.13: a bin_attribute's mmap() takes it mutable. */
#include <linux/fs.h>
#include <linux/kobject.h>
#include <linux/mm_types.h>
#include <linux/sysfs.h>

static int probe_mmap(struct file *file, struct kobject *kobj,
		      struct bin_attribute *attr, struct vm_area_struct *vma)
{
	return 0;
}

struct bin_attribute tscfk_probe = {
	.mmap = probe_mmap,
};
