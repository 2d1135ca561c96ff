// SPDX-License-Identifier: GPL-2.0
/* Before 6.17: the unbound system workqueue is system_unbound_wq. */
#include <linux/workqueue.h>

struct workqueue_struct *tscfk_probe(void);
struct workqueue_struct *tscfk_probe(void)
{
	return system_unbound_wq;
}
