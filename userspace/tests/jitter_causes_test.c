// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc-jitter's counters (tools/jitter_causes.c) on the thread that makes
 * the gaps itself, as a user's own thread would: a page-fault storm,
 * madvise(MADV_DONTNEED) and a touch, 1000 times, each fault timed as a
 * gap and handed to jc_gap().  At least 90% must be put down to page
 * faults.  Between faults the thread spins 150 us, so that every gap has a
 * read of its own (the reads' rate limit is 10,000 a second), and does not
 * sleep, which would be a cause of its own.  Without perf the test skips,
 * with the reason the tool would print.
 *
 * And a read that took longer than it should: a gap inside it, found;
 * and gaps with nothing to read, counted as not attributed.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../testlib/harness.h"
#include "libtsc.h"
#include "../tools/jitter_causes.h"

#define FAULTS	1000

TEST(page_faults_are_put_down_to_page_faults)
{
	struct jc_counters c;
	TSC_CLOCK(clk);
	uint64_t interval, space;
	unsigned int ours = 0, only = 0, read = 0;
	long page = sysconf(_SC_PAGESIZE);
	char *mem;
	cpu_set_t one;
	int cpu = sched_getcpu();

	ASSERT_EQ(0, tsc_clock_init(&clk, NULL));
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(one), &one));
	interval = tsc_ns_to_ticks(&clk.conv, 100000);
	space = tsc_ns_to_ticks(&clk.conv, 150000);
	jc_open(&c, cpu, interval, 64, tsc_ns_to_ticks(&clk.conv, 1000));
	if (!c.counted[JC_PAGE_FAULT]) {
		char why[512];

		jc_missing(&c, why, sizeof(why));
		jc_close(&c);
		SKIP(return, "no page-fault counter: %s", why);
	}
	mem = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, mem);
	mem[0] = 1;
	jc_start(&c);
	for (int i = 0; i < FAULTS; i++) {
		uint64_t t0, t1, until, end;
		uint32_t causes;

		/* A syscall, not a fault: the page is gone, and comes back zeroed. */
		ASSERT_EQ(0, madvise(mem, (size_t)page, MADV_DONTNEED));
		t0 = tsc_rdtsc_ordered();
		mem[0] = 1;
		t1 = tsc_rdtsc_ordered();
		read += jc_gap(&c, t1, t1 - t0, &causes, &end);
		ours += !!(causes & (1u << JC_PAGE_FAULT));
		only += causes == 1u << JC_PAGE_FAULT;
		until = tsc_rdtsc_ordered() + space;
		while ((int64_t)(tsc_rdtsc_ordered() - until) < 0)
			;
	}
	jc_finish(&c);
	jc_close(&c);
	munmap(mem, (size_t)page);
	TH_LOG("%d faults: %u read, %u put down to page faults, %u to page faults alone; tally %llu",
	       FAULTS, read, ours, only, (unsigned long long)c.tally[JC_PAGE_FAULT].gaps);
	EXPECT_GE(ours * 10, FAULTS * 9);
	EXPECT_EQ(ours, c.tally[JC_PAGE_FAULT].gaps);
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/*
 * Something that takes the CPU in the middle of a counter read hides in
 * the read's own time, which the spinner does not count as a gap.  A read
 * longer than the last reads' median by more than the threshold is one:
 * its span is a gap, not attributed, and the next gap keeps a read of its
 * own.  The spans are made up around real reads' costs; the median is
 * this test's own.
 */
TEST(a_gap_inside_a_read_is_found_and_not_attributed)
{
	uint64_t sorted[JC_READS_KEPT], threshold, median, t, end, held, held_ticks;
	struct jc_counters c;
	uint32_t causes;
	TSC_CLOCK(clk);

	ASSERT_EQ(0, tsc_clock_init(&clk, NULL));
	threshold = tsc_ns_to_ticks(&clk.conv, 1000);
	/* No rate limit: every gap has its read. */
	jc_open(&c, sched_getcpu(), 0, 1, threshold);
	if (c.group < 0) {
		char why[512];

		jc_missing(&c, why, sizeof(why));
		jc_close(&c);
		SKIP(return, "no counters to read: %s", why);
	}
	jc_start(&c);
	for (int i = 0; i < 2 * JC_READS_KEPT; i++) {
		t = tsc_rdtsc_ordered();
		ASSERT_TRUE(jc_gap(&c, t, threshold + 1, &causes, &end));
	}
	memcpy(sorted, c.read_recent, sizeof(sorted));
	qsort(sorted, JC_READS_KEPT, sizeof(sorted[0]), by_value);
	median = sorted[JC_READS_KEPT / 2];
	held = c.held;
	held_ticks = c.held_ticks;
	t = tsc_rdtsc_ordered();
	EXPECT_FALSE(jc_gap_in_read(&c, t, t + median + threshold, threshold));
	EXPECT_EQ(held, c.held);
	EXPECT_TRUE(jc_gap_in_read(&c, t, t + median + threshold + 1, threshold));
	EXPECT_EQ(held + 1, c.held);
	EXPECT_EQ(held_ticks + median + threshold + 1, c.held_ticks);
	/* The next gap is not held with it. */
	t = tsc_rdtsc_ordered();
	EXPECT_TRUE(jc_gap(&c, t, threshold + 1, &causes, &end));
	EXPECT_NE(0, causes);
	EXPECT_EQ(held + 1, c.held);
	TH_LOG("reads' median %.2f us, cheapest %.2f us", tsc_ticks_to_ns(&clk.conv, median) / 1e3,
	       tsc_ticks_to_ns(&clk.conv, sorted[0]) / 1e3);
	jc_finish(&c);
	jc_close(&c);
}

/*
 * Every gap handed over is either put down to causes or counted as not
 * attributed, also where there is nothing to read: no counter opened
 * (without perf, from the start), or a read that failed (here the
 * group's leader made to read /dev/null: 0 bytes).  Then the counters
 * are closed and the failure said, and every later gap is not attributed.
 */
TEST(gaps_with_nothing_to_read_are_counted_as_not_attributed)
{
	uint64_t threshold, t, end;
	unsigned int gaps = 0, attributed = 0;
	struct jc_counters c;
	bool had_counters;
	uint32_t causes;
	TSC_CLOCK(clk);

	ASSERT_EQ(0, tsc_clock_init(&clk, NULL));
	threshold = tsc_ns_to_ticks(&clk.conv, 1000);
	/* No rate limit: every gap has its read while there are counters. */
	jc_open(&c, sched_getcpu(), 0, 1, threshold);
	jc_start(&c);
	had_counters = c.group >= 0 || (c.smi >= 0 && c.smi_per_gap);
	TH_LOG("%s", had_counters ? "counters open: one made to fail" : "no counters: none to read");
	if (had_counters) {
		int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		for (int i = 0; i < 4; i++, gaps++) {
			t = tsc_rdtsc_ordered();
			EXPECT_TRUE(jc_gap(&c, t, threshold + 1, &causes, &end));
			attributed += causes != 0;
		}
		EXPECT_EQ(4, attributed);
		ASSERT_LE(0, null_fd);
		ASSERT_EQ(c.group >= 0 ? c.group : c.smi,
			  dup2(null_fd, c.group >= 0 ? c.group : c.smi));
		close(null_fd);
		EXPECT_EQ('\0', c.failed[0]);
	}
	for (int i = 0; i < 4; i++, gaps++) {
		t = tsc_rdtsc_ordered();
		EXPECT_FALSE(jc_gap(&c, t, threshold + 1, &causes, &end));
		EXPECT_EQ(0, causes);
	}
	jc_finish(&c);
	EXPECT_EQ(gaps, attributed + c.held);
	if (had_counters) {
		TH_LOG("%s", c.failed);
		EXPECT_NE('\0', c.failed[0]);
		EXPECT_GT(0, c.group);
		EXPECT_GT(0, c.smi);
	}
	jc_close(&c);
}

TEST_HARNESS_MAIN
