# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# libtsc's ABI checks, included by userspace/Makefile (its variables:
# OUT, SRCS, HDRS, INCLUDES, WARN, KSFT_INC, VERSION).

# ABI: the shared library built with -O2 -g, its public
# ABI dumped (types reached from include/libtsc.h, exported symbols) and
# compared by abi-compliance-checker with the committed dump of every
# release of this SONAME (1.0, 1.1, 1.2: what each added stays as it shipped):
# any binary or source incompatibility fails.  'make abi-baseline' writes
# the dump of this version, at its release.  Not -Og, with which
# abi-dumper also records the registers each function keeps its
# parameters in once called: GCC's choice for the body, not the calling
# convention, which a changed body changes (tsc__sysclock_slow()'s clock
# "became passed in rbp instead of rbx").  A parameter's type changed
# (uint64_t * to uint32_t *, tried) is still a binary problem.
ABI_BASELINES := $(sort $(wildcard abi/libtsc-*.dump))
ABI := $(OUT)/abi
$(ABI)/libtsc.dump: $(SRCS) $(HDRS) libtsc.map
	$(MAKE) --no-print-directory OUT=$(ABI)/build CFLAGS='-O2 -g' $(ABI)/build/libtsc.so.$(VERSION)
	abi-dumper $(ABI)/build/libtsc.so.$(VERSION) -o $@ -lver $(VERSION) \
		-public-headers include > $(ABI)/dumper.log 2>&1 || { cat $(ABI)/dumper.log; exit 1; }

abi-check: $(ABI)/libtsc.dump
	@test -n "$(ABI_BASELINES)" || { echo "# abi: no baseline in abi/"; exit 1; }
	@st=0; for b in $(ABI_BASELINES); do \
		v=$${b#abi/libtsc-}; v=$${v%.dump}; r=$(ABI)/report-$$v.html; bst=0; \
		abi-compliance-checker -l libtsc -old $$b -new $< -report-path $$r \
			> $(ABI)/checker-$$v.log 2>&1 || bst=$$?; \
		grep -E '^(Binary|Source) compatibility|problems' $(ABI)/checker-$$v.log | \
			sed "s/^/# abi: against $$v: /"; \
		if [ $$bst != 0 ]; then cat $(ABI)/checker-$$v.log; st=1; \
			echo "# abi: FAILED against $$b (exit $$bst); see $$r"; fi; \
	done; exit $$st

# A released dump is the baseline itself: never rewritten.
abi-baseline: $(ABI)/libtsc.dump
	@test ! -e abi/libtsc-$(VERSION).dump || \
		{ echo "abi/libtsc-$(VERSION).dump exists: $(VERSION) is released; raise VERSION"; exit 1; }
	cp $< abi/libtsc-$(VERSION).dump

.PHONY: abi-check abi-baseline
