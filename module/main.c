// SPDX-License-Identifier: GPL-2.0
/*
 * tsc_freq_khz: tell userspace the TSC frequency the kernel uses, how far
 * apart the CPUs' TSCs are, and what the kernel thinks of the TSC.
 *
 * Files and their meaning: Documentation/ABI/testing/sysfs-devices-system-cpu-tsc;
 * the parameters' and version's, in /sys/module/tsc_freq_khz/:
 * Documentation/ABI/testing/sysfs-module-tsc_freq_khz.
 */
#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <asm/cpufeature.h>
#include <asm/tsc.h>

#include "compat.h"
#include "tscfk.h"

unsigned int tscfk_rounds = 1000;
module_param_named(rounds, tscfk_rounds, uint, 0444);
MODULE_PARM_DESC(rounds, "Probes per CPU and measurement, 8 to 1000000 (default 1000)");

unsigned int tscfk_irqoff_max_us = 20;
module_param_named(irqoff_max_us, tscfk_irqoff_max_us, uint, 0444);
MODULE_PARM_DESC(irqoff_max_us, "Longest interrupts-off window in microseconds, 1 to 1000 (default 20)");

unsigned int tscfk_timeout_ms = 1000;
module_param_named(timeout_ms, tscfk_timeout_ms, uint, 0444);
MODULE_PARM_DESC(timeout_ms, "Give up on a CPU that does not answer within this many milliseconds, 10 to 60000 (default 1000)");

int tscfk_reference_cpu = -1;
module_param_named(reference_cpu, tscfk_reference_cpu, int, 0444);
MODULE_PARM_DESC(reference_cpu, "CPU to measure the others against, -1 for the first online housekeeping CPU (default -1)");

bool tscfk_measure_isolated;
module_param_named(measure_isolated, tscfk_measure_isolated, bool, 0444);
MODULE_PARM_DESC(measure_isolated, "Measure CPUs outside the housekeeping set (isolcpus=, nohz_full=) too (default N)");

static enum cpuhp_state hp_state;
static struct device *cpu_root;

static int __init check_range(const char *name, unsigned int val,
			      unsigned int min, unsigned int max)
{
	if (val >= min && val <= max)
		return 0;
	pr_err("%s=%u is out of range [%u, %u]\n", name, val, min, max);
	return -EINVAL;
}

static int __init check_params(void)
{
	int ref = tscfk_reference_cpu;

	if (check_range("rounds", tscfk_rounds, TSCFK_OFFSET_MIN_ROUNDS, 1000000) ||
	    check_range("irqoff_max_us", tscfk_irqoff_max_us, 1, 1000) ||
	    check_range("timeout_ms", tscfk_timeout_ms, 10, 60000))
		return -EINVAL;
	if (ref < -1 || (ref >= 0 && (ref >= nr_cpu_ids || !cpu_online(ref)))) {
		pr_err("reference_cpu=%d is not an online CPU (-1 picks the first online housekeeping CPU)\n",
		       ref);
		return -EINVAL;
	}
	/* The reference spins with interrupts off, as any measured CPU. */
	if (ref >= 0 && tscfk_cpu_isolated(ref) && !tscfk_measure_isolated) {
		pr_err("reference_cpu=%d is isolated (isolcpus=, nohz_full=, an isolated cpuset): measure_isolated=1 is needed to measure against it\n",
		       ref);
		return -EINVAL;
	}
	return 0;
}

static void __init report(void)
{
	struct tscfk_summary s;
	struct tscfk_skew skew;
	bool all = tscfk_summarise(&skew, &s);

	pr_info("tsc_khz=%u, %u CPUs against cpu%d: max skew %llu ticks, %s\n",
		READ_ONCE(tsc_khz), num_online_cpus(), s.reference_cpu,
		tscfk_skew_max(&skew),
		!all ? "some CPUs unmeasured" :
		skew.monotonic ? "each monotonic against it" :
		"NOT each monotonic against it");
}

static int __init tscfk_init(void)
{
	int err;

	if (!boot_cpu_has(X86_FEATURE_TSC)) {
		pr_err("this CPU has no TSC\n");
		return -ENODEV;
	}
	if (!READ_ONCE(tsc_khz)) {
		pr_err("the kernel has no TSC frequency (tsc_khz is 0)\n");
		return -ENODEV;
	}
	err = check_params();
	if (err)
		return err;

	cpu_root = bus_get_dev_root(&cpu_subsys);
	if (!cpu_root) {
		pr_err("the cpu subsystem has no root device\n");
		return -ENODEV;
	}
	err = tscfk_measure_init();
	if (err)
		goto err_put_root;
	err = tscfk_cpu_sysfs_init();
	if (err)
		goto err_measure;
	err = cpuhp_setup_state_nocalls(CPUHP_AP_ONLINE_DYN, "tsc_freq_khz:online",
					tscfk_cpu_online, tscfk_cpu_offline);
	if (err < 0)
		goto err_cpu_sysfs;
	hp_state = err;
	err = tscfk_clock_page_init();
	if (err)
		goto err_hotplug;
	err = tscfk_global_sysfs_init(cpu_root);
	if (err)
		goto err_clock_page;

	/*
	 * Last, as nothing may fail after the first measurement: a side it
	 * gave up on may still run, and a failed load frees the module's
	 * code whatever holds it (pingpong.c).
	 */
	tscfk_measure_start();
	/* Interrupted, the load goes on and its measurement with it. */
	if (!tscfk_measure_all_sync())
		report();
	return 0;

err_clock_page:
	tscfk_clock_page_exit();
err_hotplug:
	cpuhp_remove_state_nocalls(hp_state);
err_cpu_sysfs:
	tscfk_cpu_sysfs_exit();
err_measure:
	tscfk_measure_exit();
err_put_root:
	put_device(cpu_root);
	return err;
}

/*
 * Stop every source of new work before waiting for the last of it.  A
 * remeasure writer stops waiting at once (sysfs removal waits for it).  No
 * side of a pair is running: each holds the module while it may (pingpong.c).
 * So the wait is for measure_work alone, which ends without measuring
 * another pair once its own sides are gone.
 */
static void __exit tscfk_exit(void)
{
	tscfk_measure_stop();
	tscfk_global_sysfs_exit(cpu_root);
	tscfk_clock_page_exit();
	cpuhp_remove_state_nocalls(hp_state);
	tscfk_measure_cancel();
	tscfk_cpu_sysfs_exit();
	tscfk_measure_exit();
	put_device(cpu_root);
}

module_init(tscfk_init);
module_exit(tscfk_exit);

MODULE_DESCRIPTION("TSC frequency, per-CPU TSC offsets and TSC trust in sysfs");
MODULE_LICENSE("GPL");
MODULE_VERSION("1.4.0");
