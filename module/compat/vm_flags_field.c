// SPDX-License-Identifier: GPL-2.0
/* Before 6.3: a VMA's vm_flags is written directly. */
#include <linux/mm.h>

void tscfk_probe(struct vm_area_struct *vma);
void tscfk_probe(struct vm_area_struct *vma)
{
	vma->vm_flags |= VM_DONTEXPAND;
	vma->vm_flags &= ~VM_MAYWRITE;
}
