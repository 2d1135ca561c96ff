# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# libtsc's static analysis, included by userspace/Makefile (its variables:
# OUT, SRCS, HDRS, INCLUDES, WARN, KSFT_INC, VERSION).

# Static analysis: every C file here and in bench/, each with the flags its
# build uses.  Checks in .clang-tidy; cppcheck's set below.  Any finding
# fails; fix the code, or suppress a false positive inline with the reason
# (NOLINT(check): ..., or cppcheck-suppress id ; ...).
CLANG_TIDY ?= clang-tidy
CPPCHECK ?= cppcheck
TIDY := $(CLANG_TIDY) --quiet --config-file=$(CURDIR)/.clang-tidy --warnings-as-errors='*'
# The tests' harness (kselftest_harness.h) makes two checks misfire in them:
# each ASSERT_*() ends in an empty for(), for TH_LOG to attach to, which
# bugprone-suspicious-semicolon takes for a stray ';'; and cert-env33-c
# refuses system(), with which they make and remove their fake sysfs trees.
# The path-sensitive analyzer (clang-analyzer-*) is for the code that
# ships and the fuzz targets, not the unit tests: walking their ASSERTs'
# branches took two thirds of make lint's time, and they run under ASan
# and UBSan (lib-check).
TIDY_TESTS := '--checks=-bugprone-suspicious-semicolon,-cert-env33-c,-clang-analyzer-*'
LINT_WARN := $(filter-out -Werror,$(WARN))
CPPCHECK_FLAGS := --enable=warning,style,performance,portability --error-exitcode=1 \
	--inline-suppr --std=c11 --platform=unix64 --quiet \
	--template='{file}:{line}:{column}: {severity}: {message} [{id}]'
LIB_C := $(SRCS) $(wildcard tools/*.c)
TEST_C := $(wildcard tests/*_test.c) tests/gcov_flush.c
FUZZ_C := $(wildcard fuzz/*.c)
BENCH_C := $(wildcard ../bench/*.c)
BENCH_FLAGS := -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -Iinclude

# $(call tidy,FILES,FLAGS[,OPTIONS]): clang-tidy's stderr only when it fails
# (otherwise a count of the system headers' warnings it did not show).
define tidy
	for f in $(1); do \
		$(TIDY) $(3) $$f -- $(2) 2> $(OUT)/lint/tidy.err || { st=1; grep -v 'warnings generated' $(OUT)/lint/tidy.err; }; \
	done;
endef

lint:
	@mkdir -p $(OUT)/lint
	@test -f $(KSFT_INC)/kselftest_harness.h || \
		{ echo "lint: no kselftest_harness.h in KSFT_INC=$(KSFT_INC)"; exit 1; }
	@st=0; \
	echo "# clang-tidy: $(words $(LIB_C) $(TEST_C) $(FUZZ_C) tests/jitter_inject.c $(BENCH_C)) files"; \
	$(call tidy,$(LIB_C),$(INCLUDES) $(LINT_WARN)) \
	$(call tidy,$(TEST_C),$(INCLUDES) -std=gnu11 -Wall -Wextra -isystem $(KSFT_INC),$(TIDY_TESTS)) \
	$(call tidy,$(FUZZ_C),$(INCLUDES) -std=gnu11 -Wall -Wextra) \
	$(call tidy,tests/jitter_inject.c,$(INCLUDES) -Wall -Wextra) \
	$(call tidy,$(BENCH_C),$(BENCH_FLAGS)) \
	echo "# cppcheck"; \
	$(CPPCHECK) $(CPPCHECK_FLAGS) -D_GNU_SOURCE -Iinclude -Isrc -I../common $(LIB_C) || st=1; \
	$(CPPCHECK) $(CPPCHECK_FLAGS) -D_GNU_SOURCE -Iinclude -Isrc -I../common -I$(KSFT_INC) \
		--suppressions-list=cppcheck.suppress $(TEST_C) $(FUZZ_C) || st=1; \
	$(CPPCHECK) $(CPPCHECK_FLAGS) -D_GNU_SOURCE -Iinclude tests/jitter_inject.c || st=1; \
	$(CPPCHECK) $(CPPCHECK_FLAGS) -D_POSIX_C_SOURCE=200809L -Iinclude $(BENCH_C) || st=1; \
	if [ $$st = 0 ]; then echo "# lint: clean"; else echo "# lint: FAILED"; fi; \
	exit $$st

.PHONY: lint
