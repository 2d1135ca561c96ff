// SPDX-License-Identifier: GPL-2.0
/*
 * Files on the CPU devices: cpuN/tsc_freq_khz and cpuN/tsc/.
 *
 * A subsys_interface on the cpu bus is called for every CPU device that
 * exists and for every one registered or unregistered later, so the files
 * follow the devices: no CPU number, not even 0, is assumed to exist.  A
 * device stays registered while its CPU is offline; its files then stay
 * too, and the offset files read as unmeasured (see measure.c).
 *
 * tsc_freq_khz is on every CPU, as the kernel patch that defined it put it
 * and as some readers (OCPDiag) expect; cpu0's is the one most read, so it
 * does not depend on the tsc/ group, and failing to make it fails the load.
 */
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/device.h>
#include <linux/kernfs.h>
#include <linux/sysfs.h>
#include <asm/tsc.h>

#include "tscfk.h"

/* Read at every show: the kernel refines tsc_khz after boot. */
static ssize_t tsc_freq_khz_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(tsc_khz));
}
static DEVICE_ATTR_RO(tsc_freq_khz);

/* All below under the subsys mutex, which serialises add_dev/remove_dev. */
static struct cpumask freq_files_made;
static int cpu0_freq_file_err;
static struct cpumask groups_made;

/* Copy a CPU's published result; false if it has none. */
static bool cpu_result(struct device *dev, struct tscfk_cpu_result *r)
{
	return tscfk_read_result(dev->id, r);
}

static ssize_t status_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	static const char * const names[] = {
		[TSCFK_UNMEASURED] = "unmeasured",
		[TSCFK_REFERENCE] = "reference",
		[TSCFK_MEASURED] = "measured",
	};
	struct tscfk_cpu_result r;

	cpu_result(dev, &r);
	return sysfs_emit(buf, "%s\n", names[r.status]);
}
static DEVICE_ATTR_RO(status);

static ssize_t unmeasured_reason_show(struct device *dev,
				      struct device_attribute *attr, char *buf)
{
	struct tscfk_cpu_result r;

	if (cpu_result(dev, &r))
		return -ENODATA;
	return sysfs_emit(buf, "%s\n", tscfk_why_name(r.why));
}
static DEVICE_ATTR_RO(unmeasured_reason);

/* A file holding one field of a measured CPU's result. */
#define TSCFK_RESULT_ATTR(_name, _fmt, _field)				\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	struct tscfk_cpu_result r;					\
									\
	if (!cpu_result(dev, &r))					\
		return -ENODATA;					\
	return sysfs_emit(buf, _fmt "\n", r.offset._field);		\
}									\
static DEVICE_ATTR_RO(_name)

TSCFK_RESULT_ATTR(offset_ticks, "%lld", offset);
TSCFK_RESULT_ATTR(offset_min_ticks, "%lld", min);
TSCFK_RESULT_ATTR(offset_max_ticks, "%lld", max);
TSCFK_RESULT_ATTR(rounds, "%u", rounds);
TSCFK_RESULT_ATTR(consistent, "%d", consistent);

static ssize_t clean_rounds_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	struct tscfk_cpu_result r;

	if (!cpu_result(dev, &r))
		return -ENODATA;
	return sysfs_emit(buf, "%u\n", r.clean_rounds);
}
static DEVICE_ATTR_RO(clean_rounds);

/* Read on the CPU itself during its measurement; none without the MSR. */
static ssize_t adjust_ticks_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	struct tscfk_cpu_result r;

	if (!cpu_result(dev, &r))
		return -ENODATA;
	if (!r.have_adjust)
		return -EOPNOTSUPP;
	return sysfs_emit(buf, "%lld\n", r.adjust);
}
static DEVICE_ATTR_RO(adjust_ticks);

static struct attribute *cpu_attrs[] = {
	&dev_attr_status.attr,
	&dev_attr_unmeasured_reason.attr,
	&dev_attr_offset_ticks.attr,
	&dev_attr_offset_min_ticks.attr,
	&dev_attr_offset_max_ticks.attr,
	&dev_attr_rounds.attr,
	&dev_attr_consistent.attr,
	&dev_attr_clean_rounds.attr,
	&dev_attr_adjust_ticks.attr,
	NULL
};

static const struct attribute_group cpu_group = {
	.name = "tsc",
	.attrs = cpu_attrs,
};

/*
 * A kernel patched to provide tsc_freq_khz itself knows best: leave its
 * file alone.  Asking kernfs first also avoids sysfs's loud complaint about
 * a duplicate name.
 */
static int add_freq_file(struct device *dev)
{
	struct kernfs_node *kn;
	int err;

	kn = kernfs_find_and_get(dev->kobj.sd, dev_attr_tsc_freq_khz.attr.name);
	if (kn) {
		kernfs_put(kn);
		pr_info("cpu%u/tsc_freq_khz is provided by the kernel already, leaving it alone\n",
			dev->id);
		return 0;
	}
	err = device_create_file(dev, &dev_attr_tsc_freq_khz);
	if (err) {
		pr_err("cannot create cpu%u/tsc_freq_khz: %d\n", dev->id, err);
		return err;
	}
	cpumask_set_cpu(dev->id, &freq_files_made);
	if (dev->id == 0 && !cpu_online(0))
		pr_info("cpu0 is offline: cpu0/tsc_freq_khz is provided all the same, tsc_khz is system-wide\n");
	return 0;
}

static int tscfk_add_dev(struct device *dev, struct subsys_interface *sif)
{
	int err;

	err = add_freq_file(dev);
	if (dev->id == 0)
		cpu0_freq_file_err = err;
	err = sysfs_create_group(&dev->kobj, &cpu_group);
	if (err) {
		pr_err("cannot create cpu%u/tsc: %d\n", dev->id, err);
		return err;
	}
	cpumask_set_cpu(dev->id, &groups_made);
	return 0;
}

static void tscfk_remove_dev(struct device *dev, struct subsys_interface *sif)
{
	if (cpumask_test_and_clear_cpu(dev->id, &freq_files_made))
		device_remove_file(dev, &dev_attr_tsc_freq_khz);
	if (cpumask_test_and_clear_cpu(dev->id, &groups_made))
		sysfs_remove_group(&dev->kobj, &cpu_group);
}

static struct subsys_interface tscfk_sif = {
	.name = "tsc_freq_khz",
	.subsys = &cpu_subsys,
	.add_dev = tscfk_add_dev,
	.remove_dev = tscfk_remove_dev,
};

int tscfk_cpu_sysfs_init(void)
{
	int err;

	err = subsys_interface_register(&tscfk_sif);
	if (err)
		return err;
	/* add_dev's errors are not passed on: the main file must not fail. */
	if (cpu0_freq_file_err) {
		err = cpu0_freq_file_err;
		subsys_interface_unregister(&tscfk_sif);
		return err;
	}
	if (!get_cpu_device(0))
		pr_warn("there is no cpu0 device, so no cpu0/tsc_freq_khz\n");
	return 0;
}

void tscfk_cpu_sysfs_exit(void)
{
	subsys_interface_unregister(&tscfk_sif);
}
