/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kselftest harness as these tests use it: Debian's linux-source-6.1
 * kselftest_harness.h, with SKIP() made to keep two promises that 6.1's
 * does not (newer kernels' harnesses keep the second):
 *
 *  - A test that has already failed is not reported as skipped.  6.1's
 *    SKIP() sets passed = 1, and a skipped child exits as "ok # SKIP",
 *    so an EXPECT that failed before a SKIP was lost.  Here the failure
 *    stands: the statement runs, and the reason is logged beside it.
 *
 *  - A SKIP() in FIXTURE_SETUP skips the test.  6.1 runs the body after a
 *    setup that skipped (only a failed one stops it), and whatever the
 *    body then found was reported as a skip.  Here a skip before setup has
 *    completed leaves through the harness's own jump, as a failed ASSERT
 *    does, so that neither the body nor the teardown runs.
 *
 * Two rules follow.  A SKIP in FIXTURE_SETUP comes before anything the
 * teardown would undo, which does not run.  A teardown uses ASSERT, not
 * EXPECT: after a SKIP in the body, 6.1 still reports a failed EXPECT in
 * the teardown as a skip.
 *
 * Include this instead of kselftest_harness.h.
 */
#ifndef TSCFK_HARNESS_H
#define TSCFK_HARNESS_H

#include "kselftest_harness.h"

#undef SKIP
#define SKIP(statement, fmt, ...) do {					\
	snprintf(_metadata->results->reason,				\
		 sizeof(_metadata->results->reason), fmt, ##__VA_ARGS__); \
	if (!_metadata->passed) {					\
		TH_LOG("failed before it could skip (%s)",		\
		       _metadata->results->reason);			\
	} else {							\
		if (TH_LOG_ENABLED)					\
			fprintf(TH_LOG_STREAM, "#      SKIP      %s\n",	\
				_metadata->results->reason);		\
		_metadata->skip = 1;					\
		_metadata->trigger = 0;					\
		if (!_metadata->setup_completed)			\
			longjmp(_metadata->env, 1);			\
	}								\
	statement;							\
} while (0)

#endif /* TSCFK_HARNESS_H */
