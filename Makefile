# SPDX-License-Identifier: GPL-2.0
#
# tsc_freq_khz: the module, its tests and the two commands of the README.
#
#   make                 build tsc_freq_khz.ko for KERNELRELEASE (or KDIR), and libtsc
#   make install         install both (INSTALL_MOD_PATH; PREFIX; DESTDIR)
#   make bench           the benchmarks, full length
#   make fuzz            the fuzz targets, FUZZ_SECONDS each
#   make run             build, load (here or in a QEMU guest), show the files
#   make check           every test: style, builds, unit, DKMS, guests
#   sudo make check-host the selftests on this machine's own kernel
#
# Kbuild, not this file, lists the module's sources.

# Every kernel with a build tree here, oldest first (sort -V: 6.9 < 6.12):
# the module is built, W=1 and sparse clean, and DKMS-installed for each.
ifeq ($(origin KERNELS),undefined)
KERNELS := $(shell ls -d /lib/modules/*/build 2>/dev/null | sort -V | cut -d/ -f4)
endif
# The ones the guest can boot as well: an image in /boot, and 9p to reach
# the host's files (Debian's cloud flavour has none, so it is only built).
ifeq ($(origin VM_KERNELS),undefined)
VM_KERNELS := $(foreach k,$(KERNELS),$(if $(wildcard /boot/vmlinuz-$(k)),$(if \
	$(wildcard /lib/modules/$(k)/kernel/fs/9p/9p.ko*),$(k))))
endif
# The newest generic kernel: for make run, make bench and the one-off guests.
GENERIC := $(foreach k,$(VM_KERNELS),$(if $(findstring -rt-,$(k)),,$(k)))
NEWEST_GENERIC := $(lastword $(or $(GENERIC),$(VM_KERNELS)))

KERNELRELEASE ?= $(shell uname -r)
# PIPESTATUS in lib-check.
SHELL := /bin/bash

# Default: the running kernel's build tree, else the newest one installed.
ifeq ($(origin KDIR),undefined)
KDIR := $(wildcard /lib/modules/$(KERNELRELEASE)/build)
ifeq ($(KDIR)$(origin KERNELRELEASE),file)
KDIR := $(if $(KERNELS),/lib/modules/$(or $(NEWEST_GENERIC),$(lastword $(KERNELS)))/build)
endif
endif

BUILD := $(CURDIR)/build
VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)
SOURCES := Kbuild $(wildcard module/*.[ch] common/*.[ch])

# 1 and 4 CPUs: 6.1 keeps its TSC at 1 and marks it unstable at 4 under TCG;
# 2, as many as this machine's cores, to hold the IRQ-off bound.  PREEMPT_RT
# kernels boot with 2 only: the IRQ-off and scheduling paths are what differ
# there, and they need a second CPU but not an overcommitted host.
SMP ?= 1 2 4
SMP_RT ?= 2

all: module lib

# libtsc (userspace/) and its benchmarks (bench/).
lib:
	$(MAKE) -C userspace OUT=$(BUILD)/userspace

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
		k=$(NEWEST_GENERIC); \
		$(MAKE) -s module KDIR=/lib/modules/$$k/build && \
		for n in 2 4; do \
			echo "offsets_bench in a guest of $$k with $$n CPUs:"; \
			scripts/vm/run-in-vm.sh --quiet --kernel $$k --smp $$n -- sh -c \
				"insmod tsc_freq_khz.ko && $(BUILD)/bench/offsets_bench"; \
		done; \
	fi

# clang-tidy and cppcheck over libtsc, its tools, tests and benchmarks: any
# finding fails.  Coverage: the unit tests' line coverage of libtsc, with a
# floor (userspace/Makefile's COVERAGE_MIN).
lib-lint: linux-source
	$(MAKE) -C userspace lint OUT=$(BUILD)/userspace \
		KSFT_INC=$(LINUX_SOURCE)/tools/testing/selftests

lib-coverage: linux-source
	$(MAKE) -C userspace coverage OUT=$(BUILD)/userspace \
		KSFT_INC=$(LINUX_SOURCE)/tools/testing/selftests

bench-smoke: lib
	$(MAKE) -C bench smoke OUT=$(BUILD)/bench LIBTSC=$(BUILD)/userspace

fuzz:
	$(MAKE) -C userspace fuzz OUT=$(BUILD)/userspace

module: $(SOURCES)
	@test -n "$(KDIR)" || { echo "no kernel build tree: install linux-headers-$(KERNELRELEASE)" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

# Into updates/, where Debian's depmod looks first (6.1's kbuild says extra/,
# 6.12's updates/).  kbuild skips depmod without System.map, which Debian's
# headers lack, so run it here, except when staging into DESTDIR for a
# package (its postinst runs depmod on the target).
INSTALL_MOD_DIR ?= updates
install: install-module install-lib

install-lib: lib
	$(MAKE) -C userspace install OUT=$(BUILD)/userspace

install-module: module
	$(MAKE) -C $(KDIR) M=$(CURDIR) INSTALL_MOD_PATH=$(DESTDIR)$(INSTALL_MOD_PATH) \
		INSTALL_MOD_DIR=$(INSTALL_MOD_DIR) modules_install
	$(if $(DESTDIR),,depmod -b "$(or $(INSTALL_MOD_PATH),/)" $(shell cat $(KDIR)/include/config/kernel.release))

# make install, staged into DESTDIR, for every kernel, from a scratch copy
# of the tree: the module must land where modprobe looks.
install-check:
	set -e; for k in $(KERNELS); do \
		rm -rf $(BUILD)/install && mkdir -p $(BUILD)/install/src; \
		cp -a Kbuild Makefile dkms.conf module common $(BUILD)/install/src/; \
		$(MAKE) -s -C $(BUILD)/install/src install-module KERNELRELEASE=$$k \
			DESTDIR=$(BUILD)/install/root > $(BUILD)/install/log 2>&1 || \
			{ cat $(BUILD)/install/log; exit 1; }; \
		ls $(BUILD)/install/root/lib/modules/$$k/updates/tsc_freq_khz.ko*; \
	done
	@# libtsc staged the same way, then used as a packager's user would.
	$(MAKE) -s -C userspace install OUT=$(BUILD)/userspace PREFIX=/usr \
		DESTDIR=$(BUILD)/install/root
	printf '#include <tsc.h>\nint main(void) { return tsc_source_name(TSC_SOURCE_SYSFS)[0] != 0x73; }\n' \
		> $(BUILD)/install/use.c
	PKG_CONFIG_SYSROOT_DIR=$(BUILD)/install/root \
	PKG_CONFIG_LIBDIR=$(BUILD)/install/root/usr/lib/pkgconfig \
	PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 \
		sh -c 'cc $(BUILD)/install/use.c $$(pkg-config --cflags --libs libtsc) \
			-Wl,-rpath,$(BUILD)/install/root/usr/lib -o $(BUILD)/install/use'
	$(BUILD)/install/use
	ls $(BUILD)/install/root/usr/share/man/man3/tsc_now.3 $(BUILD)/install/root/usr/lib/libtsc.so.0 \
		$(BUILD)/install/root/usr/bin/tsc-report $(BUILD)/install/root/usr/share/tsc/tsc-report.schema.json \
		$(BUILD)/install/root/usr/share/man/man1/tsc-report.1

clean:
	@test -z "$(KDIR)" || $(MAKE) -C $(KDIR) M=$(CURDIR) clean
	rm -rf $(BUILD)

deps-run deps-check: deps-%:
	@RUN_IN_GUEST=$(RUN_IN_GUEST) scripts/install-deps.sh $*

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

# The shared estimator is plain C11 on purpose (userspace compiles it too),
# so kernel type names are not asked of it.
style: linux-source
	perl $(LINUX_SOURCE)/scripts/checkpatch.pl --no-tree --strict --terse \
		-f module/*.[ch] selftests/kmod/*.c
	perl $(LINUX_SOURCE)/scripts/checkpatch.pl --no-tree --strict --terse \
		--ignore PREFER_KERNEL_TYPES -f common/*.[ch]

# W=1 and sparse (C=2) for every kernel, each in its own copy of the tree
# so that builds for different kernels never share objects.  Any warning
# fails.
# The test module of selftests/kmod is built the same way, next to it.
FAKE_KO = $(BUILD)/kbuild/$(1)/kmod/tscfk_fake_kernel_file.ko
kbuild-check: $(foreach k,$(KERNELS),$(BUILD)/kbuild/$(k)/tsc_freq_khz.ko $(call FAKE_KO,$(k)))
define kbuild_w1_sparse
	$(MAKE) -C /lib/modules/$(1)/build M=$(@D) W=1 C=2 modules > $(@D)/build.log 2>&1 || { cat $(@D)/build.log; exit 1; }
	@if grep -E 'warning|error' $(@D)/build.log; then rm -f $@; exit 1; fi
	@echo "  $(1): $(@F): W=1 and sparse clean"
endef
$(BUILD)/kbuild/%/tsc_freq_khz.ko: $(SOURCES)
	rm -rf $(@D) && mkdir -p $(@D) && cp -a Kbuild module common $(@D)/
	$(call kbuild_w1_sparse,$*)
$(BUILD)/kbuild/%/kmod/tscfk_fake_kernel_file.ko: selftests/kmod/Kbuild selftests/kmod/fake_kernel_file.c
	rm -rf $(@D) && mkdir -p $(@D) && cp -a selftests/kmod/* $(@D)/
	$(call kbuild_w1_sparse,$*)

selftests: linux-source
	$(MAKE) -C selftests OUTPUT=$(BUILD)/selftests KSFT_INC=$(LINUX_SOURCE)/tools/testing/selftests

check-unit: selftests
	$(BUILD)/selftests/estimator_test

# DKMS exactly as a fleet uses it (add, build, install for every kernel),
# but with private source, module and install trees instead of /usr/src,
# /var/lib/dkms/<module> and /lib/modules.  Like any DKMS host, dkms makes
# its signing key /var/lib/dkms/mok.key on first use, and its install step
# re-runs depmod for the kernel (the index stays the same: the module is
# installed in the private tree).
DKMS_DIR := $(BUILD)/dkms
DKMS := dkms --dkmstree $(DKMS_DIR)/tree --sourcetree $(DKMS_DIR)/src \
	--installtree $(DKMS_DIR)/install
DKMS_KO = $(wildcard $(DKMS_DIR)/tree/tsc-freq-khz/$(VERSION)/$(1)/$(shell uname -m)/module/tsc_freq_khz.ko*)
dkms-check:
	rm -rf $(DKMS_DIR) && mkdir -p $(DKMS_DIR)/tree $(DKMS_DIR)/src/tsc-freq-khz-$(VERSION)
	cp -a Kbuild Makefile dkms.conf module common $(DKMS_DIR)/src/tsc-freq-khz-$(VERSION)/
	$(DKMS) add -m tsc-freq-khz -v $(VERSION)
	set -e; for k in $(KERNELS); do \
		mkdir -p $(DKMS_DIR)/install/$$k; \
		$(DKMS) build -m tsc-freq-khz -v $(VERSION) -k $$k; \
		$(DKMS) install -m tsc-freq-khz -v $(VERSION) -k $$k; \
		ls $(DKMS_DIR)/install/$$k/updates/dkms/tsc_freq_khz.ko*; \
	done
	$(DKMS) status -m tsc-freq-khz

# The Debian packages (packaging/debian/, debhelper and dh_dkms) in
# build/deb: tsc-freq-khz-dkms, libtsc0, libtsc-dev and tsc-tools, with the
# source package; lintian (any error or warning fails), their fields,
# files, maintainer scripts, the library's ABI and the systemd units checked.
deb:
	scripts/packaging/deb-check.sh --build-only $(BUILD)/deb

# DKMS skipping what dkms.conf excludes (exit 77, nothing built); then the
# packages installed with apt on this machine, used and purged, as a fleet
# would (skipped, with the reason, where any of it is installed already).
deb-check:
	scripts/packaging/dkms-exclusive-check.sh $(BUILD)
	scripts/packaging/deb-check.sh $(BUILD)/deb || [ $$? -eq 4 ]

# The README's set-up where nothing is installed: a clean bookworm root in
# which a clone of HEAD runs make run to its verdict (twice), then the
# packages of build/deb (make deb, or deb-check) installed with apt, used
# (in a guest too, with the module loaded), purged, nothing left.  The
# root tarball and apt's downloads are cached in FRESH_ROOT_CACHE.
fresh-root-check:
	scripts/fresh-root-check.sh $(BUILD)/deb $(BUILD)

# Boot each kernel at each CPU count and run the selftests on the DKMS-built
# module.  run-in-vm.sh fails on a panic, an oops, a WARN or a timeout, and
# we fail on any "not ok" as well.
VM_RUNS := $(foreach k,$(VM_KERNELS),$(foreach n,$(if $(findstring -rt-,$(k)),$(SMP_RT),$(SMP)),vm-$(k)-smp$(n)))
# More vCPUs than host CPUs: the host preempts vCPUs inside IRQ-off windows.
HOST_CPUS := $(shell nproc)
vm_kernel = $(word 1,$(subst -smp, ,$(1)))
vm_smp = $(word 2,$(subst -smp, ,$(1)))
$(VM_RUNS): vm-%: selftests lib dkms-check kbuild-check
	@mkdir -p $(BUILD)/vm
	$(if $(filter-out 0,$(shell echo $$(( $(call vm_smp,$*) > $(HOST_CPUS) )))), \
		TSCFK_OVERCOMMITTED="$(call vm_smp,$*) vCPUs on $(HOST_CPUS) host CPUs") \
	TSCFK_FAKE_KO=$(call FAKE_KO,$(call vm_kernel,$*)) \
	scripts/vm/run-in-vm.sh --kernel $(call vm_kernel,$*) --smp $(call vm_smp,$*) \
		--log $(BUILD)/vm/$*.log --env TSCFK_CYCLES --env TSCFK_OVERCOMMITTED \
		--env TSCFK_FAKE_KO -- \
		selftests/run_tests.sh $(call DKMS_KO,$(call vm_kernel,$*)) $(BUILD)/selftests
	@! grep -a '^not ok' $(BUILD)/vm/$*.log

# A CPU without a TSC: the module must refuse to load.
vm-notsc: dkms-check
	scripts/vm/run-in-vm.sh --kernel $(NEWEST_GENERIC) --cpu max,-tsc \
		--log $(BUILD)/vm/notsc.log -- \
		selftests/no_tsc_test.sh $(call DKMS_KO,$(NEWEST_GENERIC))
	@! grep -a '^not ok' $(BUILD)/vm/notsc.log

# offsets_bench needs the module: smoke-run it in a 2-CPU guest.
vm-bench-smoke: dkms-check bench-smoke
	scripts/vm/run-in-vm.sh --kernel $(NEWEST_GENERIC) --smp 2 \
		--log $(BUILD)/vm/bench.log -- sh -c \
		"insmod $(call DKMS_KO,$(NEWEST_GENERIC)) && $(BUILD)/bench/offsets_bench --quick"

# Load time against the CPU count, 1 to 8 (CPU hotplug in one 8-CPU guest;
# 4x overcommitted, but only two vCPUs are busy at a time while measuring).
SCALING_CPUS ?= 8
vm-scaling: selftests kbuild-check
	TSCFK_KO=$(BUILD)/kbuild/$(NEWEST_GENERIC)/tsc_freq_khz.ko \
	scripts/vm/run-in-vm.sh --kernel $(NEWEST_GENERIC) --smp $(SCALING_CPUS) \
		--log $(BUILD)/vm/scaling.log --env TSCFK_KO -- $(BUILD)/selftests/scaling_test
	@! grep -a '^not ok' $(BUILD)/vm/scaling.log

vm-check: $(VM_RUNS) vm-notsc vm-bench-smoke vm-scaling

# The two commands of the README install what they need, then start a new
# make: KERNELS and the lists made from it are read when make starts, and on
# a fresh machine the kernels arrive only with the packages.
check: deps-check
	@$(MAKE) --no-print-directory check-all
run: deps-run
	@$(MAKE) --no-print-directory show

check-all:
	$(MAKE) style
	$(MAKE) kbuild-check
	$(MAKE) install-check
	$(MAKE) deb-check
	$(MAKE) fresh-root-check
	$(MAKE) check-unit
	$(MAKE) lib-check
	$(MAKE) lib-lint
	$(MAKE) lib-coverage
	$(MAKE) bench-smoke
	$(MAKE) vm-check
	@cat $(BUILD)/lib-check.log $(patsubst vm-%,$(BUILD)/vm/%.log,$(VM_RUNS) vm-notsc vm-scaling) | awk \
		'/^ok .*# SKIP/ { s++; next } /^ok / { p++ } /^not ok / { f++ } \
		END { printf "check: %d passed, %d failed, %d skipped\n", p, f, s }'

# On a machine whose kernel loads modules: the same selftests, directly.
HOST_RELEASE = $(shell cat $(KDIR)/include/config/kernel.release)
check-host: module selftests
	$(MAKE) $(call FAKE_KO,$(HOST_RELEASE))
	TSCFK_FAKE_KO=$(call FAKE_KO,$(HOST_RELEASE)) \
		selftests/run_tests.sh tsc_freq_khz.ko $(BUILD)/selftests

# Show what the module exports and what libtsc concludes from it: on this
# kernel if it takes modules (unless RUN_IN_GUEST=1), else in a guest
# booting the newest installed kernel.  show.sh exits 1 for "not
# trustworthy": a finding, not a failure.
RUN_IN_GUEST ?=
SHOW = scripts/show.sh --load $(1) --tsc-report $(BUILD)/userspace/tsc-report
show:
	@mkdir -p $(BUILD) && $(MAKE) -s lib > $(BUILD)/lib.log 2>&1 || { cat $(BUILD)/lib.log; exit 2; }
	@if [ -e /proc/modules ] && [ -z "$(RUN_IN_GUEST)" ]; then \
		$(MAKE) -s module && $(call SHOW,tsc_freq_khz.ko); \
	else \
		k=$(NEWEST_GENERIC); \
		test -n "$$k" || { echo "no kernel in /boot with 9p to boot: make deps-run" >&2; exit 2; }; \
		$(MAKE) -s module KDIR=/lib/modules/$$k/build && \
		echo "Booting $$k in QEMU with 2 CPUs$(if $(RUN_IN_GUEST),, (this kernel cannot load modules))" && \
		scripts/vm/run-in-vm.sh --quiet --kernel $$k --smp 2 -- \
			$(call SHOW,tsc_freq_khz.ko); \
	fi || [ $$? -eq 1 ]

.PHONY: all module lib lib-check lib-lint lib-coverage bench bench-smoke fuzz install install-module install-lib \
	install-check clean linux-source style kbuild-check selftests \
	check-unit dkms-check vm-check $(VM_RUNS) vm-notsc vm-bench-smoke vm-scaling check check-all \
	check-host run show deps-run deps-check deb deb-check fresh-root-check
