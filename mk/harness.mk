# SPDX-License-Identifier: GPL-2.0
#
# The tests of the tests' own tools and of the scripts, on this machine:
# none needs the module or a guest of its own.  Included by the top-level
# Makefile.

# The shared estimator's test, the test helpers' own (testlib/: ktap.sh's
# exit statuses, and how harness.h reports what harness_probe's tests do
# on purpose), the guest harness's (scripts/vm/), make run's report's
# (scripts/show_test.sh) and the compat probes' (scripts/compat_probe_test.sh,
# with this machine's compiler), on this machine.
HARNESS_PROBE := $(BUILD)/testlib/harness_probe
$(HARNESS_PROBE): testlib/harness_probe.c testlib/harness.h $(LINUX_SOURCE)/.extracted
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -fsanitize=address,undefined -fno-sanitize-recover=all \
		-isystem $(LINUX_SOURCE)/tools/testing/selftests -o $@ $<
harness-check: selftests $(HARNESS_PROBE)
	$(BUILD)/selftests/estimator_test
	testlib/ktap_test.sh
	testlib/harness_test.sh $(HARNESS_PROBE)
	scripts/vm/run-in-vm_test.sh
	scripts/vm/guest-init_test.sh
	scripts/show_test.sh
	scripts/compat_probe_test.sh

.PHONY: harness-check
