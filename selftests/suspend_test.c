// SPDX-License-Identifier: GPL-2.0
/*
 * tsc_clock_check() across a real suspend to RAM: a clock anchored before
 * it is found wrong after it (a suspend since the anchor, or a TSC that
 * restarted below the anchor), and a clock anchored after it is right.
 *
 * Run as root, from the guest's tmpfs and linked statically (make
 * vm-suspend): the guest's 9p shares do not come back from a suspend to
 * RAM, so nothing may be read from them after it.  The RTC's alarm wakes
 * the guest; QEMU wakes a guest from S3 on it (not from s2idle, which it
 * never left within a minute here).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "libtsc.h"

static int put(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, value, strlen(value));
	if (n < 0)
		n = -errno;
	close(fd);
	return n < 0 ? (int)n : 0;
}

static bool offers(const char *path, const char *word)
{
	char buf[256] = "";
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return false;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = '\0';
	close(fd);
	return strstr(buf, word) != NULL;
}

TEST(check_sees_a_suspend)
{
	TSC_OPTS(o, .calibrate_max_ms = 100);
	TSC_CLOCK(before);
	TSC_CLOCK(after);
	int err;

	if (geteuid() != 0)
		SKIP(return, "not root: cannot suspend");
	if (access("/sys/class/rtc/rtc0/wakealarm", W_OK))
		SKIP(return, "no RTC alarm to wake up with");
	if (!offers("/sys/power/mem_sleep", "deep"))
		SKIP(return, "no suspend to RAM (mem_sleep has no 'deep')");
	ASSERT_EQ(0, tsc_clock_init(&before, &o)) TH_LOG("%s", tsc_last_error());
	TH_LOG("clock from %s: %s", tsc_source_name(before.freq.source), before.freq.detail);
	ASSERT_EQ(0, tsc_clock_check(&before)) TH_LOG("%s", tsc_last_error());
	ASSERT_EQ(0, put("/sys/power/mem_sleep", "deep"));
	ASSERT_EQ(0, put("/sys/class/rtc/rtc0/wakealarm", "0"));
	ASSERT_EQ(0, put("/sys/class/rtc/rtc0/wakealarm", "+2"));
	ASSERT_EQ(0, put("/sys/power/state", "mem"));

	err = tsc_clock_check(&before);
	TH_LOG("after the suspend: %d, %s", err, tsc_last_error());
	EXPECT_TRUE(err == -ESTALE || err == -ERANGE);
	EXPECT_TRUE(strstr(tsc_last_error(), "suspended for") ||
		    strstr(tsc_last_error(), "before the clock's anchor"));
	ASSERT_EQ(0, tsc_clock_init(&after, &o)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(0, tsc_clock_check(&after)) TH_LOG("%s", tsc_last_error());
}

TEST_HARNESS_MAIN
