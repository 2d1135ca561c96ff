// SPDX-License-Identifier: GPL-2.0
/*
 * /sys/devices/system/cpu/tsc/: what the kernel thinks of the TSC, the
 * summary of the last offset measurement, and the trigger for a new one.
 *
 * A named group on the cpu subsystem's root device, as the kernel's own
 * cpu/vulnerabilities/ is: created and removed as one, and removal waits
 * for readers and writers still inside a show() or store().
 */
#include <linux/device.h>
#include <linux/kernfs.h>
#include <linux/sysfs.h>
#include <asm/cpufeature.h>
#include <asm/tsc.h>

#include "compat.h"
#include "tscfk.h"

static ssize_t unstable_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%d\n", !!check_tsc_unstable());
}
static DEVICE_ATTR_RO(unstable);

/* One file per CPU feature flag, named as in /proc/cpuinfo. */
#define TSCFK_FEATURE_ATTR(_name, _feature)				\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%d\n", !!boot_cpu_has(_feature));	\
}									\
static DEVICE_ATTR_RO(_name)

TSCFK_FEATURE_ATTR(constant_tsc, X86_FEATURE_CONSTANT_TSC);
TSCFK_FEATURE_ATTR(nonstop_tsc, X86_FEATURE_NONSTOP_TSC);
TSCFK_FEATURE_ATTR(tsc_known_freq, X86_FEATURE_TSC_KNOWN_FREQ);
TSCFK_FEATURE_ATTR(tsc_reliable, X86_FEATURE_TSC_RELIABLE);
TSCFK_FEATURE_ATTR(tsc_adjust, X86_FEATURE_TSC_ADJUST);

/* One file per field of the last measurement's summary. */
#define TSCFK_SUMMARY_ATTR(_name, _fmt, _field)				\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	struct tscfk_summary s;						\
									\
	tscfk_read_summary(&s);						\
	return sysfs_emit(buf, _fmt "\n", s._field);			\
}									\
static DEVICE_ATTR_RO(_name)

TSCFK_SUMMARY_ATTR(reference_cpu, "%d", reference_cpu);
TSCFK_SUMMARY_ATTR(generation, "%llu", generation);
TSCFK_SUMMARY_ATTR(last_measured_ns, "%llu", measured_ns);
TSCFK_SUMMARY_ATTR(max_irqoff_ns, "%llu", max_irqoff_ns);
TSCFK_SUMMARY_ATTR(reference_irqoff_ns, "%llu", reference_irqoff_ns);

static ssize_t max_skew_ticks_show(struct device *dev,
				   struct device_attribute *attr, char *buf)
{
	struct tscfk_skew skew;

	tscfk_summarise(&skew, NULL);
	return sysfs_emit(buf, "%llu\n", tscfk_skew_max(&skew));
}
static DEVICE_ATTR_RO(max_skew_ticks);

static ssize_t measured_since_ns_show(struct device *dev,
				      struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", tscfk_measured_since());
}
static DEVICE_ATTR_RO(measured_since_ns);

/*
 * 1 when every online CPU was measured, consistent, and never seen to step
 * back against the reference.  Pair by pair with the reference only: two
 * other CPUs were never measured against each other, so nothing is claimed
 * of them but max_skew_ticks.
 */
static ssize_t monotonic_vs_reference_show(struct device *dev,
					   struct device_attribute *attr,
					   char *buf)
{
	struct tscfk_skew skew;
	bool all = tscfk_summarise(&skew, NULL);

	return sysfs_emit(buf, "%d\n", all && skew.monotonic);
}
static DEVICE_ATTR_RO(monotonic_vs_reference);

/*
 * Writing "1" measures again and returns when done; anything else is
 * refused and changes nothing.  The kernel itself returns 0 for an empty
 * write without calling us.
 */
static ssize_t remeasure_store(struct device *dev,
			       struct device_attribute *attr,
			       const char *buf, size_t count)
{
	int err;

	if (!sysfs_streq(buf, "1"))
		return -EINVAL;
	err = tscfk_measure_all_sync();
	return err ?: count;
}
static DEVICE_ATTR_WO(remeasure);

static struct attribute *global_attrs[] = {
	&dev_attr_unstable.attr,
	&dev_attr_constant_tsc.attr,
	&dev_attr_nonstop_tsc.attr,
	&dev_attr_tsc_known_freq.attr,
	&dev_attr_tsc_reliable.attr,
	&dev_attr_tsc_adjust.attr,
	&dev_attr_reference_cpu.attr,
	&dev_attr_generation.attr,
	&dev_attr_last_measured_ns.attr,
	&dev_attr_max_irqoff_ns.attr,
	&dev_attr_reference_irqoff_ns.attr,
	&dev_attr_max_skew_ticks.attr,
	&dev_attr_measured_since_ns.attr,
	&dev_attr_monotonic_vs_reference.attr,
	&dev_attr_remeasure.attr,
	&tscfk_timekeeper_freq_attr.attr,
	&tscfk_clock_steps_attr.attr,
	&tscfk_clock_resumes_attr.attr,
	&tscfk_clocksource_changes_attr.attr,
	NULL
};

static __tscfk_bin_list_const struct bin_attribute *__tscfk_bin_list_const
global_bin_attrs[] = {
	&tscfk_clock_page_attr,
	NULL
};

static const struct attribute_group global_group = {
	.name = "tsc",
	.attrs = global_attrs,
	.bin_attrs = global_bin_attrs,
};

int tscfk_global_sysfs_init(struct device *cpu_root)
{
	struct kernfs_node *kn;

	kn = kernfs_find_and_get(cpu_root->kobj.sd, global_group.name);
	if (kn) {
		kernfs_put(kn);
		pr_err("/sys/devices/system/cpu/%s exists already\n",
		       global_group.name);
		return -EEXIST;
	}
	return sysfs_create_group(&cpu_root->kobj, &global_group);
}

void tscfk_global_sysfs_exit(struct device *cpu_root)
{
	sysfs_remove_group(&cpu_root->kobj, &global_group);
}
