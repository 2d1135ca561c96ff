# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# libtsc's line coverage, included by userspace/Makefile (its variables:
# OUT, SRCS, HDRS, INCLUDES, WARN, KSFT_INC, VERSION).

# Coverage: the library compiled once with --coverage, the unit tests that
# 'check' runs linked with it and run the same way (not the fuzzers, not
# the tools' scripts), then gcovr's line coverage of src/*.c, per file
# and in total, also in $(COV)/coverage.txt and $(COV)/html/.  Fails if a
# test fails or if the total falls below COVERAGE_MIN percent.  The tests
# run in children that end with _exit(): tests/gcov_flush.c, wrapped
# around it, writes their counts first.
GCOV ?= gcov
GCOVR ?= gcovr
# 93.3% measured (gcc 12, 2 CPUs, no leaf 0x15); the paths taken through
# CPUID and the probe depend on the machine, hence a few points' margin.
COVERAGE_MIN ?= 90
COV := $(OUT)/coverage
COV_OBJS := $(patsubst %.c,$(COV)/obj/%.o,$(notdir $(SRCS)))
COV_TESTS := $(patsubst tests/%.c,$(COV)/%,$(wildcard tests/*_test.c))

$(COV)/obj/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(INCLUDES) $(WARN) -O0 -g --coverage -pthread -DTSC__TEST_HOOKS -c -o $@ $<

$(COV)/%_test: tests/%_test.c tests/fake_sysfs.h ../selftests/harness.h ../bench/page_syncs.h tests/gcov_flush.c $(COV_OBJS) $(HDRS) \
		$(TOOL_HDRS) $$(call test_srcs,$$*_test)
	$(CC) $(INCLUDES) -std=gnu11 -Wall -Wextra -Werror -O1 -g -pthread \
		-isystem $(KSFT_INC) -o $@ $< tests/gcov_flush.c $(call test_srcs,$*_test) $(COV_OBJS) \
		-Wl,--wrap=_exit -lgcov -lm

# Kept, not intermediate: else every run would relink the tests.
.SECONDARY: $(COV_OBJS)

coverage: $(COV_TESTS)
	@rm -rf $(COV)/obj/*.gcda $(COV)/html && mkdir -p $(COV)/html
	@set -e; for t in $(COV_TESTS); do \
		echo "# $$t"; \
		$$t > $$t.log 2>&1 || { cat $$t.log; exit 1; }; \
		grep '^# PASSED' $$t.log; \
	done
	@st=0; $(GCOVR) --gcov-executable $(GCOV) --root $(CURDIR) --filter '$(CURDIR)/src/' \
		--txt $(COV)/coverage.txt --html-details $(COV)/html/index.html \
		--print-summary --fail-under-line $(COVERAGE_MIN) $(COV)/obj || st=$$?; \
	cat $(COV)/coverage.txt; \
	if [ $$st != 0 ]; then echo "# coverage: FAILED (gcovr $$st; floor $(COVERAGE_MIN)% of lines)"; \
	else echo "# coverage: at least $(COVERAGE_MIN)% of src/'s lines; report in $(COV)/html/index.html"; fi; \
	exit $$st

.PHONY: coverage
