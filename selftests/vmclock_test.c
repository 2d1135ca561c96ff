// SPDX-License-Identifier: GPL-2.0
/*
 * libtsc's bound across a real disruption of a VM's clock: QEMU's vmclock
 * device, read through Linux's driver (/dev/vmclock0), and a migration of
 * the guest to a file and back, after which QEMU moves the device's
 * disruption_marker.  The very first bounded reading after it counts a
 * vmclock disruption and has no bound, on the module's page (the front
 * door, whose inline reader, used before, must refuse it) and on
 * clock_gettime() alike.  The module's measurement of the two CPUs'
 * skew, from before, is no longer in the bound, until the module
 * measures again.
 *
 * Run by scripts/vm/migrate_test.py, as the guest's only program, from
 * its initramfs (no 9p share: QEMU refuses to migrate a guest that has
 * one mounted) and linked statically; the driver and the module are
 * loaded before.  It asks for the migration with a line on the console,
 * "vmrun: migrate to a file and back", and waits for the device's marker
 * to move.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../testlib/harness.h"
#include "libtsc.h"

#define DEVICE		"/dev/vmclock0"
#define WAIT_S		600	/* for the host to migrate the guest */
#define TSC_DIR		"/sys/devices/system/cpu/tsc"

/* The device's page through read(): the driver's own consistent copy. */
struct vmclock_head {
	uint32_t magic, size;
	uint16_t version;
	uint8_t counter_id, time_type;
	uint32_t seq;
	uint64_t marker;
};

static int read_head(struct vmclock_head *h)
{
	int fd = open(DEVICE, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, h, sizeof(*h));
	close(fd);
	return n == (ssize_t)sizeof(*h) ? 0 : -EIO;
}

/* The module measures every CPU again: 0, or -errno. */
static int remeasure(void)
{
	int fd = open(TSC_DIR "/remeasure", O_WRONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, "1", 1) != 1)
		err = -errno;
	close(fd);
	return err;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Whether the front door's bounded reading would be the inline fast
 * path's (the header's own reader, which tsc_realtime_bounded() tries
 * first), rather than the library's slow path.
 */
static bool front_door_fast(void)
{
	struct tsc_time_bound b;

	return tsc__bounded_read(&tsc__time.page, &tsc__time.use_rdtscp, &tsc__time.max_delta,
				 &tsc__time.bound, &b);
}

/*
 * Whether the fast path serves the front door: in one of 100 tries,
 * each after a reading that refreshes what has aged.  One try may fall
 * back for a reason of its own: the kernel's page updated during it, or
 * the state aged past its refresh, as when the host holds the vCPU back
 * across a tick.  A fast path that never serves fails all 100.
 */
static bool front_door_serves_fast(void)
{
	struct tsc_time_bound b;

	for (int i = 0; i < 100; i++) {
		tsc_realtime_bounded(&b);
		if (front_door_fast())
			return true;
	}
	return false;
}

TEST(the_device_is_vmclock)
{
	struct vmclock_head h;
	int err = read_head(&h);

	ASSERT_EQ(0, err) TH_LOG(DEVICE ": %s (is the vmclock driver loaded?)", strerror(-err));
	EXPECT_EQ(0x4b4c4356u, h.magic);
	EXPECT_EQ(1, h.version);
	EXPECT_LE(4096u, h.size) TH_LOG("a page the driver lets userspace map");
	EXPECT_EQ(0u, h.seq & 1);
}

FIXTURE(migrate) {
	struct tsc_sysclock c;	/* clock_gettime()'s */
};

FIXTURE_SETUP(migrate)
{
	TSC_SYSCLOCK_OPTS(o, .sysfs_root = "/nonexistent");
	TSC_TIME_OPTS(to);

	self->c.sz = sizeof(self->c);
	ASSERT_EQ(0, tsc_sysclock_init(&self->c, &o)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(TSC_SYSCLOCK_SYSCALL, self->c.path);
	ASSERT_EQ(0, tsc_time_setup(&to)) TH_LOG("%s", tsc_last_error());
}

FIXTURE_TEARDOWN(migrate) {}

/* Both clocks' terms, and that they read the device. */
static void terms_of(struct __test_metadata *_metadata, const struct tsc_sysclock *c,
		     struct tsc_bound_terms *front, struct tsc_bound_terms *own)
{
	ASSERT_EQ(0, tsc_time_bound_terms(front));
	ASSERT_EQ(0, tsc_sysclock_bound_terms(c, own));
	ASSERT_LE(0, front->vmclock_status) TH_LOG("the front door read no vmclock");
	ASSERT_LE(0, own->vmclock_status) TH_LOG("clock_gettime()'s clock read no vmclock");
}

TEST_F_TIMEOUT(migrate, a_migration_is_a_disruption, WAIT_S + 60)
{
	TSC_BOUND_TERMS(f0);
	TSC_BOUND_TERMS(o0);
	TSC_BOUND_TERMS(f1);
	TSC_BOUND_TERMS(o1);
	struct tsc_time_bound fb, ob;
	struct vmclock_head h0, h;
	const char *why;
	bool moved_while_reading = false;
	double start, last;

	ASSERT_EQ(TSC_SYSCLOCK_KERNEL, tsc_time_path(&why)) TH_LOG("the module's page: %s", why);
	ASSERT_LE(2, sysconf(_SC_NPROCESSORS_ONLN)) TH_LOG("migrate_test.py --smp 2: a skew to lose");
	ASSERT_EQ(0, read_head(&h0));
	terms_of(_metadata, &self->c, &f0, &o0);
	EXPECT_FALSE(f0.flags & TSC_BOUND_SKEW_UNKNOWN) TH_LOG("the module measured both CPUs");
	EXPECT_EQ(h0.marker, f0.vmclock_marker);
	EXPECT_EQ(h0.marker, o0.vmclock_marker);
	EXPECT_EQ(0u, f0.by_cause[TSC_DISRUPTION_VMCLOCK]);
	EXPECT_EQ(0u, o0.by_cause[TSC_DISRUPTION_VMCLOCK]);
	tsc_realtime_bounded(&fb);
	tsc_sysclock_realtime_bounded(&self->c, &ob);
	EXPECT_EQ(f0.disruptions, fb.disruptions);
	EXPECT_EQ(o0.disruptions, ob.disruptions);

	ASSERT_TRUE(front_door_serves_fast()) TH_LOG("the front door's reading is not on its fast path");
	printf("vmrun: migrate to a file and back\n");
	fflush(stdout);
	/*
	 * Read on meanwhile, so that the clocks' state is never more than
	 * a second old (it is refreshed then): the disruption must be seen
	 * at once, by the reading's own check, not at a refresh.  A move
	 * during these readings (the device read again after them) may be
	 * theirs to count: then the inline reader is not put to the test.
	 */
	start = mono_s();
	for (;;) {
		last = mono_s();
		ASSERT_EQ(0, read_head(&h));
		if (h.marker != h0.marker)
			break;
		tsc_realtime_bounded(&fb);
		tsc_sysclock_realtime_bounded(&self->c, &ob);
		ASSERT_EQ(0, read_head(&h));
		if (h.marker != h0.marker) {
			moved_while_reading = true;
			break;
		}
		ASSERT_GT(WAIT_S, mono_s() - start) TH_LOG("no migration within %d s", WAIT_S);
		usleep(1000);
	}
	TH_LOG("the marker moved from %llu to %llu; MONOTONIC went %.3f s on across the move",
	       (unsigned long long)h0.marker, (unsigned long long)h.marker, mono_s() - last);

	if (moved_while_reading)
		TH_LOG("moved during the loop's readings: the inline reader's check not tested");
	else
		EXPECT_FALSE(front_door_fast()) TH_LOG("the inline reader took a reading after the move");
	/* The very first readings after it. */
	tsc_realtime_bounded(&fb);
	tsc_sysclock_realtime_bounded(&self->c, &ob);
	EXPECT_EQ(f0.disruptions + 1, fb.disruptions) TH_LOG("front door: not counted at once");
	EXPECT_EQ(o0.disruptions + 1, ob.disruptions) TH_LOG("clock_gettime(): not counted at once");
	EXPECT_TRUE(fb.flags & TSC_BOUND_DISRUPTED);
	EXPECT_TRUE(ob.flags & TSC_BOUND_DISRUPTED);
	EXPECT_EQ(UINT64_MAX, fb.latest);
	EXPECT_EQ(UINT64_MAX, ob.latest);
	terms_of(_metadata, &self->c, &f1, &o1);
	EXPECT_EQ(1u, f1.by_cause[TSC_DISRUPTION_VMCLOCK]);
	EXPECT_EQ(1u, o1.by_cause[TSC_DISRUPTION_VMCLOCK]);
	EXPECT_EQ(h.marker, f1.vmclock_marker);
	EXPECT_EQ(h.marker, o1.vmclock_marker);
	EXPECT_EQ(f0.disruptions + 1, f1.disruptions) TH_LOG("counted more than once");
	EXPECT_EQ(o0.disruptions + 1, o1.disruptions) TH_LOG("counted more than once");
	for (int i = 0; i < 1000; i++) {
		tsc_realtime_bounded(&fb);
		ASSERT_EQ(f1.disruptions, fb.disruptions);
	}

	/* The skew the module measured on the host before: not in the bound. */
	EXPECT_TRUE(f1.flags & TSC_BOUND_SKEW_UNKNOWN) TH_LOG("the skew of before the migration");
	EXPECT_EQ(0u, f1.skew_ns);
	sleep(2);	/* a refresh, which still knows nothing newer */
	ASSERT_EQ(0, tsc_time_bound_terms(&f1));
	EXPECT_TRUE(f1.flags & TSC_BOUND_SKEW_UNKNOWN) TH_LOG("forgotten at the next refresh");
	ASSERT_EQ(0, remeasure());
	sleep(2);
	ASSERT_EQ(0, tsc_time_bound_terms(&f1));
	EXPECT_FALSE(f1.flags & TSC_BOUND_SKEW_UNKNOWN) TH_LOG("measured again, since");
	TH_LOG("the skew term before %llu ns, after the module measured again %llu ns",
	       (unsigned long long)f0.skew_ns, (unsigned long long)f1.skew_ns);
}

TEST_HARNESS_MAIN
