# SPDX-License-Identifier: GPL-2.0
#
# libtsc: build, tests, lint, coverage, ABI, fuzzing (the work is
# userspace/Makefile's).  Included by the top-level Makefile.

lib:
	$(MAKE) -C userspace OUT=$(BUILD)/userspace

lib-check: linux-source
	$(MAKE) -C userspace check OUT=$(BUILD)/userspace \
		KSFT_INC=$(LINUX_SOURCE)/tools/testing/selftests 2>&1 | tee $(BUILD)/lib-check.log; \
	exit $${PIPESTATUS[0]}

# What lib-check and lib-coverage run, built, not run (make check builds
# it beside other work).
lib-build: linux-source
	$(MAKE) -C userspace check-build OUT=$(BUILD)/userspace \
		KSFT_INC=$(LINUX_SOURCE)/tools/testing/selftests

# The unit tests alone (make check-quick's): lib-check runs them too.
lib-unit: linux-source
	$(MAKE) -C userspace unit OUT=$(BUILD)/userspace \
		KSFT_INC=$(LINUX_SOURCE)/tools/testing/selftests

# clang-tidy and cppcheck over libtsc, its tools, tests and benchmarks: any
# finding fails.  Coverage: the unit tests' line coverage of libtsc, with a
# floor (userspace/Makefile's COVERAGE_MIN).
lib-lint: linux-source
	$(MAKE) -C userspace lint OUT=$(BUILD)/userspace \
		KSFT_INC=$(LINUX_SOURCE)/tools/testing/selftests

lib-coverage: linux-source
	$(MAKE) -C userspace coverage OUT=$(BUILD)/userspace \
		KSFT_INC=$(LINUX_SOURCE)/tools/testing/selftests

# The ABI against every release's committed dump (userspace/abi/): a break fails.
lib-abi:
	$(MAKE) -C userspace abi-check OUT=$(BUILD)/userspace

fuzz:
	$(MAKE) -C userspace fuzz OUT=$(BUILD)/userspace

# make check's: each fuzz target for 10 s.  Fuzzing times nothing: it runs
# in a lane, beside the builds.
lib-fuzz:
	$(MAKE) -C userspace fuzz OUT=$(BUILD)/userspace FUZZ_SECONDS=10

.PHONY: lib lib-build lib-check lib-unit lib-lint lib-coverage lib-abi fuzz lib-fuzz
