// SPDX-License-Identifier: GPL-2.0
/*
 * Test helper, never for production: stands in for a kernel patched to
 * provide cpu0/tsc_freq_khz itself, with a value tsc_freq_khz.ko would
 * never show, so that a test can tell whose file it reads.
 */
#include <linux/cpu.h>
#include <linux/device.h>
#include <linux/module.h>
#include <linux/sysfs.h>

static ssize_t tsc_freq_khz_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "12345\n");
}
static DEVICE_ATTR_RO(tsc_freq_khz);

static struct device *cpu0;

static int __init fake_init(void)
{
	cpu0 = get_cpu_device(0);
	if (!cpu0)
		return -ENODEV;
	return device_create_file(cpu0, &dev_attr_tsc_freq_khz);
}

static void __exit fake_exit(void)
{
	device_remove_file(cpu0, &dev_attr_tsc_freq_khz);
}

module_init(fake_init);
module_exit(fake_exit);

MODULE_DESCRIPTION("tsc_freq_khz selftest: a kernel's own cpu0/tsc_freq_khz");
MODULE_LICENSE("GPL");
