// SPDX-License-Identifier: GPL-2.0
/* Before 6.16: a bin_attribute's read() takes it mutable. */
#include <linux/fs.h>
#include <linux/kobject.h>
#include <linux/sysfs.h>

static ssize_t probe_read(struct file *file, struct kobject *kobj,
			  struct bin_attribute *attr, char *buf,
			  loff_t off, size_t count)
{
	return 0;
}

struct bin_attribute tscfk_probe = {
	.read = probe_read,
};
