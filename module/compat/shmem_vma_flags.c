// SPDX-License-Identifier: GPL-2.0
/* shmem's file setup takes its flags as a vma_flags_t. */
#include <linux/mm.h>
#include <linux/shmem_fs.h>

struct file *tscfk_probe(void);
struct file *tscfk_probe(void)
{
	return shmem_file_setup("probe", 0, mk_vma_flags(VMA_NORESERVE_BIT));
}
