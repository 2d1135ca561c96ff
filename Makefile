# SPDX-License-Identifier: GPL-2.0
#
# tsc_freq_khz: the module, its tests and the two commands of the README.
#
#   make                 build tsc_freq_khz.ko for KERNELRELEASE (or KDIR), and libtsc
#   make install         install both (INSTALL_MOD_PATH; PREFIX; DESTDIR)
#   make bench           the benchmarks, full length
#   make fuzz            the fuzz targets, FUZZ_SECONDS each
#   make deb             the Debian packages, in build/deb
#   make run             build, load (here or in a QEMU guest), show the files
#                        and what libtsc concludes
#   make check           every test: style, builds, unit, packages, a fresh
#                        root, guests
#   sudo make check-host the selftests on this machine's own kernel
#   make help            every target, one line each (mk/help.mk)
#
# Kbuild, not this file, lists the module's sources.  The rest is in mk/:
# style.mk (checkpatch, shellcheck, the docs), kbuild.mk (the module's
# builds for every kernel, the selftests'), harness.mk (the tests of the
# test helpers and the guest harness), lib.mk (libtsc), bench.mk (the
# benchmarks), packaging.mk (install, DKMS, packages, fresh root), vm.mk
# (the guests), help.mk (make help).

# Every kernel with a build tree here, oldest first (sort -V: 6.9 < 6.12):
# the module is built, W=1 and sparse clean, and DKMS-installed for each.
ifeq ($(origin KERNELS),undefined)
KERNELS := $(shell ls -d /lib/modules/*/build 2>/dev/null | sort -V | cut -d/ -f4)
endif
# And the kernels a fleet installs today that this bookworm machine cannot:
# trixie's, its backports' and sid's, each in a Debian root of its suite
# (scripts/kernel-roots.sh; make kernel-roots, which make check runs
# before kbuild-check), where the module is built with that suite's
# compiler.  RELEASE=ROOT.
ifeq ($(origin ROOT_KERNEL_LIST),undefined)
ROOT_KERNEL_LIST := $(shell scripts/kernel-roots.sh list 2>/dev/null | tr ' ' =)
endif
ROOT_KERNELS := $(foreach p,$(ROOT_KERNEL_LIST),$(firstword $(subst =, ,$(p))))
# The root a kernel is in; nothing for this machine's own.
kernel_root = $(patsubst $(1)=%,%,$(filter $(1)=%,$(ROOT_KERNEL_LIST)))
BUILD_KERNELS := $(shell printf '%s\n' $(KERNELS) $(ROOT_KERNELS) | sort -V)
# The ones the guest can boot as well: an image, and 9p to reach the
# host's files (Debian's cloud flavour has none, so it is only built).
ifeq ($(origin VM_KERNELS),undefined)
VM_KERNELS := $(foreach k,$(BUILD_KERNELS),$(if $(wildcard $(call kernel_root,$(k))/boot/vmlinuz-$(k)),$(if \
	$(wildcard $(call kernel_root,$(k))/lib/modules/$(k)/kernel/fs/9p/9p.ko*),$(k))))
endif
# Generic (not PREEMPT_RT) and rt kernels the guest boots, oldest first
# (mk/vm.mk picks its guests' kernels from them).  make run, make bench
# and KDIR build with this machine's make and compiler: its own kernels.
GENERIC := $(foreach k,$(VM_KERNELS),$(if $(findstring -rt-,$(k)),,$(k)))
RT := $(filter-out $(GENERIC),$(VM_KERNELS))
NEWEST_GENERIC := $(lastword $(GENERIC))
OLDEST_GENERIC := $(firstword $(GENERIC))
NEWEST_RT := $(lastword $(RT))
HOST_GENERIC := $(filter $(KERNELS),$(GENERIC))
RUN_KERNEL := $(lastword $(or $(HOST_GENERIC),$(filter $(KERNELS),$(VM_KERNELS))))

KERNELRELEASE ?= $(shell uname -r)
# PIPESTATUS in lib-check.
SHELL := /bin/bash

# Default: the running kernel's build tree, else the newest one installed
# (for make run, check and bench, which boot that kernel in a guest where
# this one takes no modules; make module says which it built for, and
# make install refuses it, below).
RUNNING := $(shell uname -r)
ifeq ($(origin KDIR),undefined)
KDIR := $(wildcard /lib/modules/$(KERNELRELEASE)/build)
ifeq ($(KDIR)$(origin KERNELRELEASE),file)
KDIR := $(if $(KERNELS),/lib/modules/$(or $(RUN_KERNEL),$(lastword $(KERNELS)))/build)
KDIR_FALLBACK := 1
endif
endif
# The release of KDIR: the UTS_RELEASE it builds into the module's
# vermagic, which is uname -r's of the kernel that loads it.  Not the
# tree's include/config/kernel.release: Debian's 6.1 headers say 6.1.192
# there for 6.1.0-56-amd64, and depmod would run for no kernel that exists.
KDIR_RELEASE = $(if $(KDIR),$(shell sed -n 's/^\#define UTS_RELEASE "\(.*\)"$$/\1/p' \
	$(KDIR)/include/generated/utsrelease.h))

BUILD := $(CURDIR)/build
VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)
SOURCES := Kbuild $(wildcard module/*.[ch] module/compat/* common/*.[ch])
# A build of its own (dkms's, a debug kernel's, one in the background),
# with its own -j: outside this make's flags and jobserver, which a
# recipe without '+' does not pass on (its make would warn "jobserver
# unavailable").  scripts/packaging/common.sh does the same.
OWN_BUILD := env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL

all: module lib

include mk/style.mk mk/kbuild.mk mk/harness.mk mk/lib.mk mk/bench.mk mk/packaging.mk mk/vm.mk mk/help.mk

module: $(SOURCES)
	@test -n "$(KDIR)" || { echo "no kernel build tree: install linux-headers-$(KERNELRELEASE)" >&2; exit 1; }
	$(if $(filter-out $(RUNNING),$(KDIR_RELEASE)),@echo "$(NOT_RUNNING)" >&2)
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules
NOT_RUNNING = tsc_freq_khz.ko for $(KDIR_RELEASE), not the running kernel $(RUNNING)$(if \
	$(KDIR_FALLBACK), (it has no /lib/modules/$(RUNNING)/build))

# Into updates/, where Debian's depmod looks first (6.1's kbuild says extra/,
# 6.12's updates/).  kbuild skips depmod without System.map, which Debian's
# headers lack, so run it here, except when staging into DESTDIR for a
# package (its postinst runs depmod on the target).
INSTALL_MOD_DIR ?= updates
install: install-module install-lib

# make install refuses before anything is installed, also under -j.
install-lib: lib | $(if $(filter install,$(MAKECMDGOALS)),install-module-kernel)
	$(MAKE) -C userspace install OUT=$(BUILD)/userspace

# The fallback's kernel is not the one modprobe looks in: installing there
# (not staged, on a kernel that takes modules) would load nothing.  Only
# for a KDIR or KERNELRELEASE given outright.
install-module-kernel:
	@if [ -n "$(KDIR_FALLBACK)" ] && [ -z "$(DESTDIR)$(INSTALL_MOD_PATH)" ] && [ -e /proc/modules ]; then \
		echo "not installing: no /lib/modules/$(RUNNING)/build for the running kernel$(if $(KDIR), (the" \
			"module is built for $(KDIR_RELEASE))): install linux-headers-$(RUNNING), or pass KDIR=" >&2; \
		exit 1; \
	fi

install-module: install-module-kernel module
	$(MAKE) -C $(KDIR) M=$(CURDIR) INSTALL_MOD_PATH=$(DESTDIR)$(INSTALL_MOD_PATH) \
		INSTALL_MOD_DIR=$(INSTALL_MOD_DIR) KERNELRELEASE=$(KDIR_RELEASE) modules_install
	$(if $(DESTDIR),,depmod -b "$(or $(INSTALL_MOD_PATH),/)" $(KDIR_RELEASE))

clean:
	@test -z "$(KDIR)" || $(MAKE) -C $(KDIR) M=$(CURDIR) clean
	rm -rf $(BUILD)

deps-run deps-debug deps-check deps-deb: deps-%:
	@RUN_IN_GUEST=$(RUN_IN_GUEST) scripts/install-deps.sh $*
# The kernels a fleet installs today that this machine cannot, each in a
# Debian root of its suite (scripts/kernel-roots.sh): made, or brought up
# to date.  Exit 4: not root, or no mmdebstrap; nothing to build in.
kernel-roots:
	@scripts/kernel-roots.sh update || [ $$? -eq 4 ]

# The two commands of the README install what they need, then start a new
# make: KERNELS and the lists made from it are read when make starts, and on
# a fresh machine the kernels arrive only with the packages.  make check
# starts the debug kernels' build (mk/vm.mk) as soon as their packages are
# in: on a fresh machine, apt leaves a CPU to it while it installs the rest.
check:
	@$(check_begin)
	@$(call timed,deps-debug)
	@$(call timed,debug-kernels-start)
	@$(call timed,deps-check)
	@$(MAKE) --no-print-directory check-all CHECK_TIMES_GO_ON=1 DEBUG_KERNELS_STARTED=1
run: deps-run
	@$(MAKE) --no-print-directory show

# The inner loop's check, in under 10 minutes: style and the docs, the
# module's build on the oldest and newest kernels, the selftests' own
# tests, libtsc's unit tests, and a guest of the newest kernel.  Never a
# substitute for make check, which proves much more (make help, testing.md).
QUICK_STEPS = style doc-links $(call KBUILD_KO,$(OLDEST_GENERIC)) $(call KBUILD_KO,$(NEWEST_GENERIC)) \
	harness-check lib-unit vm-quick
check-quick:
	@$(check_begin)
	@for step in $(QUICK_STEPS); do $(call timed,$$step); done
	@$(print_times)

# Each step of make check is made on its own and timed: the table at the
# end (or at the step that failed) says where the time goes, beside the
# wall clock's total.
CHECK_TIMES = $(BUILD)/check-times.txt
CHECK_START = $(BUILD)/check-start
# Beside each step's wall time, the CPU time of everything it ran (the
# shell's reaped children, from /proc): near the wall time, the step kept
# a CPU busy; near twice, both; far below, it waited.
print_times = awk -v now=$$(date +%s) -v t0=$$(cat $(CHECK_START) 2>/dev/null) \
	'BEGIN { printf "check: %-42s %6s   %6s\n", "step", "wall", "cpu" } \
	{ sub("^$(BUILD)/", "", $$1); printf "check: %-42s %6d s %6d s%s\n", $$1, $$2, $$4, $$3 ? "  (failed)" : ""; \
		t += $$2; c += $$4 } \
	END { printf "check: %-42s %6d s %6d s\n", "all steps", t, c; \
		if (t0) printf "check: %-42s %6d s (steps side by side count once)\n", "wall clock", now - t0 }' $(CHECK_TIMES)
cpu_ticks = awk '{ print $$16 + $$17 }' /proc/$$$$/stat
# $(2), for a step in a lane: the table waits for the other lanes' steps.
timed = t0=$$(date +%s); c0=$$($(cpu_ticks)); $(MAKE) --no-print-directory $(1); st=$$?; \
	echo "$(1) $$(($$(date +%s) - t0)) $$st $$(( ($$($(cpu_ticks)) - c0) / $$(getconf CLK_TCK) ))" >> $(CHECK_TIMES); \
	[ $$st = 0 ] || { $(if $(2),,$(print_times);) exit 1; }
check_begin = mkdir -p $(BUILD) && :> $(CHECK_TIMES) && date +%s > $(CHECK_START)

# First what times nothing: builds, packages, fresh roots, lint, in
# lanes side by side (the steps of a lane wait for each other; the fresh
# trixie root installs deb-check's packages).  Three lanes of work on the
# two CPUs of the machines this runs on: the steps wait on disks and
# each other about a fifth of the time (the table's cpu column against
# the wall's), which the third fills.  Lane b holds every step that
# builds libtsc into build/userspace, which must not run side by side
# (the fuzz targets are built from the sources alone).  harness-check
# waits for lane b's selftests step: its prerequisites would remake
# libtsc and the selftests otherwise.  Lane d brings the kernel roots up
# to date: on a fresh machine, minutes spent waiting on Debian's archive
# and on dpkg more than on a CPU.  Two steps wait for it, each last in
# its lane: kbuild-check, which builds in the roots, and doc-links, whose
# two makes must find the same kernels (make help names their guests).
# Once it is done its job slot goes to the others' builds.  Beside them,
# the debug kernels and their modules' build (mk/vm.mk).  Then, one at a
# time, everything that times something: the unit tests, the guests
# (each a step of its own), where another step's load would distort
# what they measure: make check-alone, a make of its own, which finds
# the kernels the roots have now.
CHECK_LANES := a b c d
CHECK_LANE.a := style fresh-root-bookworm-check lib-fuzz harness-check doc-links
CHECK_LANE.b := selftests install-check lib-build lib-abi doc-examples kbuild-check compat-table
CHECK_LANE.c := chronyd deb-check dkms-check fresh-root-trixie-check lib-lint
CHECK_LANE.d := kernel-roots
check_chain = $(if $(word 2,$(1)),$(eval check-step-$(word 2,$(1)): check-step-$(word 1,$(1)))$(call \
	check_chain,$(wordlist 2,$(words $(1)),$(1))))
$(foreach l,$(CHECK_LANES),$(call check_chain,$(CHECK_LANE.$(l))))
check-step-harness-check: check-step-selftests
check-step-kbuild-check check-step-doc-links: check-step-kernel-roots
check-step-%:
	+@$(call timed,$*,in-lane)
# Each step's output whole, when it ends (its logs are in build/ as it
# runs).  What the lanes' first steps need is made before, once.
check-lanes:
	@$(if $(CHECK_TIMES_GO_ON),,$(check_begin))
	+@$(call timed,linux-source)
	+@$(MAKE) --no-print-directory -j$(words $(CHECK_LANES)) --output-sync=recurse \
		$(foreach l,$(CHECK_LANES),check-step-$(lastword $(CHECK_LANE.$(l)))) || { $(print_times); exit 1; }
	@$(if $(CHECK_TIMES_GO_ON),,$(print_times))
CHECK_STEPS = debug-kernels-wait lib-check lib-coverage bench-smoke $(VM_CHECK_STEPS)
check-all:
	@$(if $(CHECK_TIMES_GO_ON),,$(check_begin))
	$(if $(DEBUG_KERNELS_STARTED),,@$(call timed,debug-kernels-start))
	+@$(MAKE) --no-print-directory check-lanes CHECK_TIMES_GO_ON=1
	+@$(MAKE) --no-print-directory check-alone CHECK_TIMES_GO_ON=1
check-alone:
	@$(if $(CHECK_TIMES_GO_ON),,$(check_begin))
	@for step in $(CHECK_STEPS); do $(call timed,$$step); done
	@$(print_times)
	@# Top-level results; and the subtests the guests' tests skipped, which
	@# their own "ok" does not show (each with its reason in the log).
	@cat $(BUILD)/lib-check.log $(BUILD)/deb-check.log $(BUILD)/doc-examples.log $(VM_LOGS) | awk \
		'/^ok .*# SKIP/ { s++; next } /^ok / { p++ } /^not ok / { f++ } /^# ok .*# SKIP/ { n++ } \
		END { printf "check: %d passed, %d failed, %d skipped; %d subtests skipped inside them\n", p, f, s, n }'

# On a machine whose kernel loads modules: the same selftests, directly.
HOST_RELEASE = $(KDIR_RELEASE)
check-host: module selftests lib
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
		k=$(RUN_KERNEL); \
		test -n "$$k" || { echo "no kernel in /boot with 9p to boot: make deps-run" >&2; exit 2; }; \
		$(MAKE) -s module KDIR=/lib/modules/$$k/build && \
		echo "Booting $$k in QEMU with 2 CPUs$(if $(RUN_IN_GUEST),, (this kernel cannot load modules))" && \
		scripts/vm/run-in-vm.sh --quiet --kernel $$k --smp 2 -- \
			$(call SHOW,tsc_freq_khz.ko); \
	fi || [ $$? -eq 1 ]

.PHONY: all module install install-module install-module-kernel install-lib clean deps-run deps-debug deps-check deps-deb \
	kernel-roots check check-all check-lanes check-alone check-quick check-host run show
