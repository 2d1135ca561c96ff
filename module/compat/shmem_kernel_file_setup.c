// SPDX-License-Identifier: GPL-2.0
/*
 * A shmem file that no security module labels or checks (S_PRIVATE):
 * declared by every kernel, exported to modules by 6.12 but not by 6.1.
 */
#include <linux/shmem_fs.h>

const void *tscfk_probe(void);
const void *tscfk_probe(void)
{
	return &shmem_kernel_file_setup;
}
