// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The hypervisor's clock page, where a VM has one: Linux's vmclock
 * driver (drivers/ptp/ptp_vmclock.c, 6.13 and later) offers it read-only
 * as /dev/vmclock0, in the layout of <linux/vmclock-abi.h>.  The bound
 * reads two of its fields: disruption_marker, which the hypervisor
 * changes when the guest's counter was disrupted (a live migration, a
 * snapshot restored), and vm_generation_counter, which it bumps at every
 * restore from a saved state where its flags say it does.  After either,
 * the NTP daemon's maxerror is of another machine's clock.
 *
 * Mapped once a process, when its first clock is set up (its bound's
 * state is made then), and never unmapped: readers hold the address
 * (tsc__vm_marker, which the header's inline reader compares).  The
 * device is root's (0600) unless udev says otherwise; a process that
 * cannot open it sees no vmclock disruption, and tsc_time_bound_terms()
 * says so (vmclock_status -2).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#define VMCLOCK_PATH	"/dev/vmclock0"
#define VMCLOCK_MAGIC	0x4b4c4356u	/* "VCLK" */
#define VMCLOCK_MAP	4096		/* what the driver maps: one page */
/* Offsets in struct vmclock_abi (little-endian, as x86 is). */
#define OFF_MAGIC	0
#define OFF_VERSION	8	/* __le16, 1 */
#define OFF_SEQ		12	/* __le32, odd while the hypervisor writes */
#define OFF_MARKER	16	/* __le64 disruption_marker */
#define OFF_FLAGS	24	/* __le64 */
#define OFF_STATUS	34	/* __u8 clock_status */
#define OFF_GEN		104	/* __le64 vm_generation_counter */
#define FLAG_GEN	(1u << 8)	/* VMCLOCK_FLAG_VM_GEN_COUNTER_PRESENT */

#ifdef TSC__TEST_HOOKS
const char *tsc__test_vmclock_path;
#endif

/* What a process without the device compares against: never changes. */
static const uint64_t no_marker;
/* The device's disruption_marker, where it is mapped; else no_marker. */
const volatile uint64_t *tsc__vm_marker = &no_marker;
static const volatile unsigned char *page;
static int map_err = -ENODEV;	/* why there is no page */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint64_t u64_at(size_t off)
{
	return *(const volatile uint64_t *)(page + off);
}

static uint32_t u32_at(size_t off)
{
	return *(const volatile uint32_t *)(page + off);
}

static void map_page(void)
{
	const char *path = VMCLOCK_PATH;
	const unsigned char *p;
	void *m;
	int fd;

#ifdef TSC__TEST_HOOKS
	if (tsc__test_vmclock_path)
		path = tsc__test_vmclock_path;
#endif
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* There, and root's: this process does not see the hypervisor's word. */
		map_err = errno == EACCES || errno == EPERM ? -EACCES : -ENODEV;
		return;
	}
	m = mmap(NULL, VMCLOCK_MAP, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return;
	p = m;
	/* Another layout, or none: not a page this code can read. */
	if (*(const volatile uint32_t *)(p + OFF_MAGIC) != VMCLOCK_MAGIC ||
	    *(const volatile uint16_t *)(p + OFF_VERSION) != 1) {
		munmap(m, VMCLOCK_MAP);
		return;
	}
	page = p;
	map_err = 0;
	__atomic_store_n(&tsc__vm_marker, (const volatile uint64_t *)(p + OFF_MARKER),
			 __ATOMIC_RELEASE);
}

const volatile uint64_t *tsc__vmclock_marker(void)
{
	pthread_once(&once, map_page);
	return tsc__vm_marker;
}

int tsc__vmclock_read(struct tsc__vmclock *v)
{
	*v = (struct tsc__vmclock){ .present = false };
	pthread_once(&once, map_page);
	if (!page)
		return map_err;
	/* The driver's own read waits up to 10 ms for an even count; this, a few thousand pauses. */
	for (int tries = 0; tries < 4096; tries++) {
		uint32_t seq = u32_at(OFF_SEQ);
		uint64_t flags;

		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (seq & 1) {
			__builtin_ia32_pause();
			continue;
		}
		v->marker = u64_at(OFF_MARKER);
		flags = u64_at(OFF_FLAGS);
		v->status = page[OFF_STATUS];
		v->has_gen = flags & FLAG_GEN;
		v->gen = v->has_gen ? u64_at(OFF_GEN) : 0;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (u32_at(OFF_SEQ) == seq) {
			v->present = true;
			return 0;
		}
	}
	return -EAGAIN;
}
