// SPDX-License-Identifier: GPL-2.0
/*
 * Tests that are meant to fail or skip, for harness_test.sh, which checks
 * how harness.h reports each: a failure before a SKIP stays a failure,
 * and a SKIP in FIXTURE_SETUP runs neither the body nor the teardown.
 * Not a test of its own: its results are wrong on purpose.
 */
#include "harness.h"

TEST(fails_then_skips)
{
	EXPECT_EQ(1, 2);
	SKIP(return, "a skip after a failure");
}

TEST(skips)
{
	SKIP(return, "a plain skip");
}

TEST(passes)
{
	EXPECT_EQ(1, 1);
}

FIXTURE(skipping) {};

FIXTURE_SETUP(skipping)
{
	SKIP(return, "a skip in the setup");
}

FIXTURE_TEARDOWN(skipping)
{
	TH_LOG("PROBE: teardown ran");
}

TEST_F(skipping, body_after_a_skipped_setup)
{
	TH_LOG("PROBE: body ran");
	EXPECT_EQ(1, 2);
}

FIXTURE(failing) {};

FIXTURE_SETUP(failing)
{
	EXPECT_EQ(1, 2);
	SKIP(return, "a skip after a failure in the setup");
}

FIXTURE_TEARDOWN(failing)
{
}

TEST_F(failing, body_after_a_failed_setup)
{
	TH_LOG("PROBE: body ran");
}

TEST_HARNESS_MAIN
