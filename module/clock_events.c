// SPDX-License-Identifier: GPL-2.0
/*
 * tsc/clock_steps, tsc/clock_resumes and tsc/clocksource_changes: the
 * events since the module loaded after which a reading of the clocks is
 * not comparable with one taken before, counted as the timekeeper makes
 * them.  A process sees them only while it runs; monitoring, which runs
 * now and then, needs them counted for the whole system.  A reload
 * starts the counts again from zero, which monitoring sees as the
 * counter reset it is: the clock page was replaced.
 *
 * What changes tells the cause, not the kernel's was_set, which it also
 * passes for a change of the TAI offset and at every notifier's
 * registration:
 *  - a step moves REALTIME against BOOTTIME (settimeofday(),
 *    ADJ_SETOFFSET, a leap second; a suspend moves neither against the
 *    other, as both count the time asleep);
 *  - a resume moves BOOTTIME against MONOTONIC by the time asleep;
 *  - a clocksource change replaces the timekeeper's clocksource.
 */
#include <linux/clocksource.h>
#include <linux/device.h>
#include <linux/sysfs.h>
#include <linux/timekeeper_internal.h>

#include "tscfk.h"

static unsigned long steps, resumes, clocksource_changes;

/* The state at the last update; the first update only records it. */
static const struct clocksource *last_clock;
static ktime_t last_real_boot, last_offs_boot;

/*
 * Called by the clock page's notifier at every timekeeper update, under
 * the timekeeper's lock with interrupts off: one writer at a time, which
 * counts with plain increments and publishes them with WRITE_ONCE() for
 * the files' lockless reads.  Returns true when an event was counted.
 */
bool tscfk_clock_events_note(const struct timekeeper *tk)
{
	const struct clocksource *clock = tk->tkr_mono.clock;
	ktime_t real_boot = ktime_sub(tk->offs_real, tk->offs_boot);
	bool seen = last_clock;
	bool step = seen && real_boot != last_real_boot;
	bool resume = seen && tk->offs_boot != last_offs_boot;
	bool change = seen && clock != last_clock;

	WRITE_ONCE(steps, steps + step);
	WRITE_ONCE(resumes, resumes + resume);
	WRITE_ONCE(clocksource_changes, clocksource_changes + change);
	last_clock = clock;
	last_real_boot = real_boot;
	last_offs_boot = tk->offs_boot;
	return step || resume || change;
}

#define TSCFK_EVENT_ATTR(_name, _count)					\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lu\n", READ_ONCE(_count));		\
}									\
struct device_attribute tscfk_##_name##_attr = __ATTR_RO(_name)

TSCFK_EVENT_ATTR(clock_steps, steps);
TSCFK_EVENT_ATTR(clock_resumes, resumes);
TSCFK_EVENT_ATTR(clocksource_changes, clocksource_changes);
