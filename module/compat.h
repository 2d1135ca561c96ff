/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels this module builds against, in one place.
 */
#ifndef TSCFK_COMPAT_H
#define TSCFK_COMPAT_H

#include <linux/device.h>

/*
 * bus_get_dev_root() replaced direct use of bus->dev_root in 6.3.  Kbuild
 * looks for it in the headers, so a backport is found too.
 */
#ifndef TSCFK_HAVE_BUS_GET_DEV_ROOT
static inline struct device *bus_get_dev_root(struct bus_type *bus)
{
	return get_device(bus->dev_root);
}
#endif

#endif /* TSCFK_COMPAT_H */
