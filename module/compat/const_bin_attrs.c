// SPDX-License-Identifier: GPL-2.0
/* An attribute_group's bin_attrs is a list of const bin_attributes. */
#include <linux/sysfs.h>

static const struct bin_attribute probe_attr;
static const struct bin_attribute *const probe_attrs[] = { &probe_attr, NULL };

const struct attribute_group tscfk_probe = {
	.bin_attrs = probe_attrs,
};
