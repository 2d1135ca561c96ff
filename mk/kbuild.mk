# SPDX-License-Identifier: GPL-2.0
#
# The kernel side's builds: linux-source (checkpatch.pl, the kselftest
# headers), the W=1/sparse build for every kernel, the compat probes'
# table, and the selftests' build.  Included by the top-level Makefile.

# checkpatch.pl and the kselftest headers, from Debian's linux-source-6.1.
LINUX_SOURCE := $(BUILD)/linux-source
$(LINUX_SOURCE)/.extracted: /usr/src/linux-source-6.1.tar.xz
	rm -rf $(LINUX_SOURCE) && mkdir -p $(LINUX_SOURCE)
	tar -xJf $< -C $(LINUX_SOURCE) --strip-components=1 \
		linux-source-6.1/scripts/checkpatch.pl \
		linux-source-6.1/scripts/spelling.txt \
		linux-source-6.1/scripts/const_structs.checkpatch \
		linux-source-6.1/tools/testing/selftests/kselftest.h \
		linux-source-6.1/tools/testing/selftests/kselftest_harness.h
	touch $@
linux-source: $(LINUX_SOURCE)/.extracted

# W=1 and sparse (C=2) for every kernel, each in its own copy of the tree
# so that builds for different kernels never share objects, a kernel of a
# root (scripts/kernel-roots.sh) inside that root, with its suite's
# compiler and sparse.  Any warning fails: a compiler's, sparse's or
# objtool's diagnostic (FILE...: warning: or error:), not make's own
# messages (make[2]: warning: ...).  Each build's compat-probes.h must
# depend on the kernel's headers (fixdep's list), lest an update of the
# headers in place keep a stale answer; compat-table prints the answers
# (which branch of module/compat.h each kernel took).  The test module of
# selftests/kmod is built the same way, next to it, for the kernels a
# guest can boot (VM_KERNELS: not those without an image or 9p, such as
# the cloud flavour): each in a directory of its own, which its rule
# empties (and no other), so that neither rebuild nor make -j takes the
# other's output away.
# The kernel's make is the root's own (the root's compiler and make, and
# env -i there drops MAKEFLAGS) or this machine's 'make' for a kernel
# here: '+' hands it make's jobserver under -j, which it would otherwise
# complain of in build.log; not under make -n, which would then run it
# (in a directory the rule's first line, only shown, has not made).
kbuild_recursive = $(if $(findstring n,$(firstword -$(MAKEFLAGS))),,+)
KBUILD_KO = $(BUILD)/kbuild/$(1)/tsc_freq_khz/tsc_freq_khz.ko
FAKE_KO = $(BUILD)/kbuild/$(1)/kmod/tscfk_fake_kernel_file.ko
kbuild-check: $(foreach k,$(BUILD_KERNELS),$(call KBUILD_KO,$(k))) \
	$(foreach k,$(VM_KERNELS),$(call FAKE_KO,$(k)))
# Which API each kernel's probes found, in one table (module/compat.h).
COMPAT_PROBES_H = $(BUILD)/kbuild/$(1)/tsc_freq_khz/module/compat-probes.h
compat-table: kbuild-check
	@scripts/compat-table.sh $(foreach k,$(BUILD_KERNELS),$(call COMPAT_PROBES_H,$(k)))
in_kernel_root = $(if $(call kernel_root,$(1)),scripts/kernel-roots.sh run $(call kernel_root,$(1)) $(2) --)
define kbuild_w1_sparse
	$(kbuild_recursive)$(call in_kernel_root,$(1),$(@D)) make -C /lib/modules/$(1)/build M=$(@D) W=1 C=2 modules \
		> $(@D)/build.log 2>&1 || { cat $(@D)/build.log; exit 1; }
	@if grep -E ': (warning|error):' $(@D)/build.log | grep -Ev '^make(\[[0-9]+\])?: '; then \
		rm -f $@; exit 1; fi
	@echo "  $(1): $(@F): W=1 and sparse clean$(if $(call kernel_root,$(1)), (in $(call kernel_root,$(1))))"
endef
$(BUILD)/kbuild/%/tsc_freq_khz/tsc_freq_khz.ko: $(SOURCES)
	rm -rf $(@D) && mkdir -p $(@D) && cp -a Kbuild module common $(@D)/
	$(call kbuild_w1_sparse,$*)
	@grep -q '/include/linux/shmem_fs.h' $(@D)/module/.compat-probes.h.cmd || \
		{ echo "$*: fixdep gave compat-probes.h none of the headers the probes read"; rm -f $@; exit 1; }
$(BUILD)/kbuild/%/kmod/tscfk_fake_kernel_file.ko: selftests/kmod/Kbuild selftests/kmod/fake_kernel_file.c
	rm -rf $(@D) && mkdir -p $(@D) && cp -a selftests/kmod/* $(@D)/
	$(call kbuild_w1_sparse,$*)

# The selftests link libtsc's archives: lib first, lest two makes build
# it side by side under -j.
selftests: linux-source lib
	$(MAKE) -C selftests OUTPUT=$(BUILD)/selftests KSFT_INC=$(LINUX_SOURCE)/tools/testing/selftests \
		LIBTSC_OUT=$(BUILD)/userspace

.PHONY: linux-source kbuild-check compat-table selftests
