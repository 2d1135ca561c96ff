# SPDX-License-Identifier: GPL-2.0
#
# libtsc and its benchmarks: build, tests, lint, coverage, fuzzing (the
# work is userspace/Makefile's and bench/Makefile's).  Included by the
# top-level Makefile.

# libtsc (userspace/) and its benchmarks (bench/).
lib:
	$(MAKE) -C userspace OUT=$(BUILD)/userspace

# The helpers the guests' tests of the tools run beside them
# (run_tests.sh: jitter_inject), not part of libtsc's build.
lib-helpers:
	$(MAKE) -C userspace helpers OUT=$(BUILD)/userspace

lib-check: linux-source
	$(MAKE) -C userspace check OUT=$(BUILD)/userspace \
		KSFT_INC=$(LINUX_SOURCE)/tools/testing/selftests 2>&1 | tee $(BUILD)/lib-check.log; \
	exit $${PIPESTATUS[0]}

# The offsets benchmark needs the module: on this kernel if it loads
# modules, else in a guest of the newest kernel with 2 and 4 CPUs.
bench: lib
	$(MAKE) -C bench run OUT=$(BUILD)/bench LIBTSC=$(BUILD)/userspace
	@if [ -e /proc/modules ]; then \
		$(MAKE) -s module && scripts/show.sh --load tsc_freq_khz.ko > /dev/null; \
		$(BUILD)/bench/offsets_bench; \
	else \
		k=$(RUN_KERNEL); \
		$(MAKE) -s module KDIR=/lib/modules/$$k/build && \
		for n in 2 4; do \
			echo "offsets_bench in a guest of $$k with $$n CPUs:"; \
			scripts/vm/run-in-vm.sh --quiet --kernel $$k --smp $$n -- sh -c \
				"insmod tsc_freq_khz.ko && $(BUILD)/bench/offsets_bench"; \
		done; \
	fi
	$(MAKE) --no-print-directory bench-windows
	$(MAKE) --no-print-directory bench-accuracy

# libtsc's clocks while the system's are slewed and stepped: always in a
# guest (it adjusts the clocks of the machine it runs on), of each generic
# kernel but the cloud ones, with 1 and 2 CPUs, the module loaded.
bench-accuracy: lib
	$(MAKE) -C bench all OUT=$(BUILD)/bench LIBTSC=$(BUILD)/userspace
	@for k in $(HOST_GENERIC); do \
		$(MAKE) -s module KDIR=/lib/modules/$$k/build || exit 1; \
		for n in 1 2; do \
			echo "clock_accuracy in a guest of $$k with $$n CPUs:"; \
			scripts/vm/run-in-vm.sh --quiet --kernel $$k --smp $$n --timeout 1200 -- sh -c \
				"insmod tsc_freq_khz.ko && $(BUILD)/bench/clock_accuracy --adjust-clocks" || exit 1; \
		done; \
	done

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

bench-smoke: lib
	$(MAKE) -C bench smoke OUT=$(BUILD)/bench LIBTSC=$(BUILD)/userspace

fuzz:
	$(MAKE) -C userspace fuzz OUT=$(BUILD)/userspace

.PHONY: lib lib-helpers lib-check lib-lint lib-coverage lib-abi bench bench-smoke bench-accuracy fuzz
