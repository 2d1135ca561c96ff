// SPDX-License-Identifier: GPL-2.0
/*
 * A shmem file whose inode is S_PRIVATE from the start, which security
 * modules do not label: declared by every kernel, exported to modules by
 * 6.12 but not by 6.1.  Called as shmem_file_setup() is.
 */
#include <linux/shmem_fs.h>

typeof(shmem_file_setup) *tscfk_probe(void);
typeof(shmem_file_setup) *tscfk_probe(void)
{
	return shmem_kernel_file_setup;
}
