// SPDX-License-Identifier: GPL-2.0
/*
 * A bin_attribute's read() and mmap() take it const (after 6.13's
 * read_new() and mmap() transition ended).
 */
#include <linux/fs.h>
#include <linux/kobject.h>
#include <linux/mm_types.h>
#include <linux/sysfs.h>

static ssize_t probe_read(struct file *file, struct kobject *kobj,
			  const struct bin_attribute *attr, char *buf,
			  loff_t off, size_t count)
{
	return 0;
}

static int probe_mmap(struct file *file, struct kobject *kobj,
		      const struct bin_attribute *attr,
		      struct vm_area_struct *vma)
{
	return 0;
}

struct bin_attribute tscfk_probe = {
	.read = probe_read,
	.mmap = probe_mmap,
};
