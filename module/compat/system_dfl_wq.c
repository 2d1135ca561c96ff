// SPDX-License-Identifier: GPL-2.0
/* 6.17, and Debian's 6.12 through a stable update: system_dfl_wq. */
#include <linux/workqueue.h>

struct workqueue_struct *tscfk_probe(void);
struct workqueue_struct *tscfk_probe(void)
{
	return system_dfl_wq;
}
