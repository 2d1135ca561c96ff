// SPDX-License-Identifier: GPL-2.0
/* Before the const transition: bin_attrs lists mutable bin_attributes. */
#include <linux/sysfs.h>

static struct bin_attribute probe_attr;
static struct bin_attribute *probe_attrs[] = { &probe_attr, NULL };

const struct attribute_group tscfk_probe = {
	.bin_attrs = probe_attrs,
};
