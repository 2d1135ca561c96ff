# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# libtsc's line coverage, included by userspace/Makefile (its variables:
# OUT, TESTS, UNIT_RAN).

# Coverage: gcovr's line coverage of src/*.c, per file and in total, also
# in $(COV)/coverage.txt and $(COV)/html/, from the counts of the unit
# tests' last run (the Makefile's TEST_OBJS and run_unit: the tests that
# 'check' and 'unit' run, not the fuzzers, not the tools' scripts), or of
# a run of its own when the tests were built again since or failed.
# Fails if a test fails or if the total falls below COVERAGE_MIN percent.
GCOV ?= gcov
GCOVR ?= gcovr
# 93.7% measured (gcc 12, -O1, 2 CPUs, no leaf 0x15); the paths taken
# through CPUID and the probe depend on the machine, hence a few points'
# margin.
COVERAGE_MIN ?= 90
COV := $(OUT)/coverage

coverage: $(TESTS)
	@if [ ! -e $(UNIT_RAN) ] || [ -n "$$(find $(TESTS) -newer $(UNIT_RAN))" ]; then \
		$(MAKE) --no-print-directory unit; \
	else echo "# coverage: from the unit tests' run that ended $$(date -r $(UNIT_RAN) +'%F %T')"; fi
	@rm -rf $(COV)/html && mkdir -p $(COV)/html
	@st=0; $(GCOVR) --gcov-executable $(GCOV) --root $(CURDIR) --filter '$(CURDIR)/src/' \
		--txt $(COV)/coverage.txt --html-details $(COV)/html/index.html \
		--print-summary --fail-under-line $(COVERAGE_MIN) $(OUT)/tests/obj || st=$$?; \
	cat $(COV)/coverage.txt; \
	if [ $$st != 0 ]; then echo "# coverage: FAILED (gcovr $$st; floor $(COVERAGE_MIN)% of lines)"; \
	else echo "# coverage: at least $(COVERAGE_MIN)% of src/'s lines; report in $(COV)/html/index.html"; fi; \
	exit $$st

.PHONY: coverage
