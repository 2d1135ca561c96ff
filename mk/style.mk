# SPDX-License-Identifier: GPL-2.0
#
# Style and the docs: checkpatch and shellcheck, the Markdown's links and
# make targets, the README's C examples.  Included by the top-level
# Makefile.

# checkpatch --strict for the kernel code (the shared estimator is plain
# C11 on purpose, userspace compiles it too, so kernel type names are not
# asked of it), not the header an in-tree build generates; shellcheck for
# the scripts that make check relies on.
STYLE_KERNEL_C := $(filter-out module/compat-probes.h,$(wildcard module/*.[ch])) \
	$(wildcard module/compat/*.c selftests/kmod/*.c)
style: linux-source
	perl $(LINUX_SOURCE)/scripts/checkpatch.pl --no-tree --strict --terse \
		-f $(STYLE_KERNEL_C)
	perl $(LINUX_SOURCE)/scripts/checkpatch.pl --no-tree --strict --terse \
		--ignore PREFER_KERNEL_TYPES -f common/*.[ch]
	shellcheck -x -P SCRIPTDIR scripts/*.sh scripts/*/*.sh module/compat/probe.sh \
		selftests/*.sh selftests/fleet/*.sh userspace/tests/*.sh testlib/*.sh

# Every relative link in README.md and Documentation/ resolves, every make
# target they name exists, and make help lists every target; the
# modprobe.d example describes the parameters as modinfo does; the ABI's
# table of the clock page is the header's layout.
doc-links:
	scripts/check-doc-links.py
	scripts/check-param-docs.py
	scripts/check-abi-layout.py

# Every C example of the README, compiled and run as it is written there.
doc-examples: lib
	@scripts/check-doc-examples.py --lib $(BUILD)/userspace README.md | tee $(BUILD)/doc-examples.log; \
	exit $${PIPESTATUS[0]}

.PHONY: style doc-links doc-examples
