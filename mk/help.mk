# SPDX-License-Identifier: GPL-2.0
#
# make help: every target of this Makefile and of mk/, one line each, the
# guests named after this machine's kernels and by role.  Included by the
# top-level Makefile.  A target is .PHONY and has a line here, or
# scripts/check-doc-links.py (make doc-links) fails.

help_main := run check
help_build := show all module lib install install-module install-module-kernel install-lib \
	deb clean selftests chronyd linux-source deps-run deps-debug deps-check deps-deb kernel-roots
help_check := check-quick check-all check-lanes check-alone check-host style doc-links doc-examples kbuild-check compat-table harness-check \
	install-check dkms-check deb-check fresh-root-check fresh-root-bookworm-check fresh-root-trixie-check \
	lib-build lib-check lib-unit lib-lint lib-abi \
	lib-coverage lib-fuzz fuzz debug-kernels-start debug-kernels-wait
help_guests := vm-check vm-quick $(VM_ALL_ROLES) $(VM_CHECK_STEPS) vm-debug vm-bench-causes
help_bench := bench bench-accuracy bench-smoke bench-windows
help_list := help help-targets
HELP_TARGETS = $(help_main) $(help_build) $(help_check) $(help_guests) $(help_bench) $(help_list)

HELP.run := build, load the module (here or in a QEMU guest), show its files and libtsc's verdict
HELP.check := every test, as CI runs it; installs what it needs, then a table of each step's time
HELP.show := what make run shows, without installing anything first
HELP.all := the module for KERNELRELEASE (or KDIR), and libtsc (the default)
HELP.module := tsc_freq_khz.ko for KERNELRELEASE (or KDIR)
HELP.lib := libtsc, its tools and their tests, in build/userspace
HELP.install := the module and libtsc (INSTALL_MOD_PATH; PREFIX; DESTDIR)
HELP.install-module := the module alone, into updates/, then depmod
HELP.install-module-kernel := refuse an install for a kernel other than the running one
HELP.install-lib := libtsc, its header, pkg-config file, tools and man pages
HELP.deb := the four Debian packages, in build/deb
HELP.clean := remove build/ and kbuild's output
HELP.selftests := the kselftest programs, in build/selftests
HELP.chronyd := Debian's chronyd, unpacked under build/ for the guests (nothing installed)
HELP.linux-source := Debian's linux-source-6.1, unpacked: checkpatch.pl and the kselftest headers
HELP.deps-run := install the packages make run needs (apt-get, quiet when present)
HELP.deps-debug := install the packages the debug kernels' build needs (make check installs them first)
HELP.deps-check := install the packages make check needs
HELP.kernel-roots := make or update the Debian roots of the kernels this machine cannot install (scripts/kernel-roots.sh)
HELP.deps-deb := install the packages make deb needs
HELP.check-quick := the inner loop's check, under 10 minutes: style, two builds, unit tests, vm-quick; never a substitute for make check
HELP.check-all := make check without installing packages first: the debug kernels' build started, check-lanes, check-alone
HELP.check-lanes := make check's steps that time nothing, in lanes side by side (the kernel roots' update one of them)
HELP.check-alone := make check's steps that time something, one at a time: unit tests, benchmarks, the guests
HELP.check-host := the selftests on this machine's own kernel (root, a kernel that loads modules)
HELP.style := checkpatch.pl --strict on the module, shellcheck on the scripts
HELP.doc-links := every relative link of the Markdown resolves, every make target named exists, the modprobe.d example matches modinfo, the ABI's page layout the header's
HELP.doc-examples := every C example of the README, compiled and run as written
HELP.kbuild-check := W=1 and sparse builds for every kernel, here and in the kernel roots
HELP.compat-table := which API each kernel's compat probes found, one table (after kbuild-check)
HELP.harness-check := the estimator's test, the test helpers' (testlib/: ktap.sh, harness.h), the guest harness's and the compat probes'
HELP.install-check := make install staged for this machine's generic kernels; libtsc through pkg-config
HELP.dkms-check := DKMS builds the module for this machine's generic kernels, skips the excluded
HELP.deb-check := the packages built, linted, inspected, their module built by DKMS (installed in the fresh roots)
HELP.fresh-root-check := both fresh roots below
HELP.fresh-root-bookworm-check := make run and make deb in a clean bookworm root, then the packages there
HELP.fresh-root-trixie-check := the packages in a clean trixie root with its backports' kernel: DKMS builds
HELP.lib-build := everything lib-check and lib-coverage run, built, not run
HELP.lib-check := libtsc's unit tests with sanitizers, the tools' tests, promtool
HELP.lib-unit := libtsc's unit tests alone, with sanitizers (lib-check runs them too)
HELP.lib-lint := clang-tidy and cppcheck over libtsc, its tools and bench/
HELP.lib-abi := libtsc's ABI against every released version's dump
HELP.lib-coverage := the unit tests' line coverage of libtsc, against its floor
HELP.fuzz := the fuzz targets, FUZZ_SECONDS each (300 by default)
HELP.lib-fuzz := the fuzz targets, 10 s each: make check's
HELP.debug-kernels-start := build the KASAN and KCSAN kernels (cached), then the module for them, in the background
HELP.debug-kernels-wait := wait for that build
HELP.help := this list
HELP.help-targets := every target of this list, one a line, for scripts (make doc-links reads it)
HELP.vm-check := every guest below that make check runs, one after another
HELP.vm-quick := the newest generic kernel, 2 CPUs, the kernel side's selftests: make check-quick's
HELP.vm-debug := the guests of the debug kernels
HELP.vm-notsc := a CPU without a TSC: the module refuses to load
HELP.vm-suspend := the clocks across a suspend to RAM and to idle (1 CPU)
HELP.vm-vmclock := libtsc's bound across a migration, QEMU's vmclock device (2 CPUs)
HELP.vm-selinux := the clock page mapped and mprotect()ed by confined users under SELinux enforcing
HELP.vm-bench-smoke := the benchmarks that need the module, quick, in a guest
HELP.vm-bench-causes := tsc-jitter's causes beside rtla osnoise's, on the newest rt kernel (not in make check)
HELP.vm-scaling := load time against the CPU count, 1 to $(SCALING_CPUS)
HELP.vm-fleet-e2e := the packages, node_exporter and Prometheus, and chronyd, end to end
HELP.bench := the benchmarks, full length
HELP.bench-accuracy := libtsc's clocks against clock_gettime(), full length
HELP.bench-smoke := the benchmarks, quick
HELP.bench-windows := what the interrupts-off window buys (bench/irqoff_windows.sh)

# The generated guests' lines.
HELP.vm-oldest := $(OLDEST_GENERIC), 2 CPUs: every kernel-side selftest
HELP.vm-oldest-smp1 := $(OLDEST_GENERIC), 1 CPU: $(ONE_CPU_TESTS)
HELP.vm-oldest-smp4 := $(OLDEST_GENERIC), 4 vCPUs: $(OVERCOMMIT_TESTS)
HELP.vm-host := $(lastword $(HOST_GENERIC)), this machine's newest, 2 CPUs: every kernel-side selftest
HELP.vm-newest := $(NEWEST_GENERIC), 2 CPUs: every selftest, the tools' and chronyd's too
HELP.vm-newest-smp4 := $(NEWEST_GENERIC), 4 vCPUs: $(STALL_TESTS)
HELP.vm-rt := $(NEWEST_RT), PREEMPT_RT, 2 CPUs: every kernel-side selftest
HELP.vm-isolation-newest := $(NEWEST_GENERIC): cpu1 isolated, left alone
HELP.vm-isolation-rt := $(NEWEST_RT): cpu1 isolated, left alone
HELP.vm-rt-spinner-oldest := $(OLDEST_GENERIC): a SCHED_FIFO spinner owns a CPU, nothing waits on it unbounded
HELP.vm-rt-spinner-rt := $(NEWEST_RT): the same on PREEMPT_RT
help_text = $(if $(filter $(1),$(VM_ROLES_ABSENT)),none here: it needs $(call \
	vm_role_needs,$(1)),$(or $(HELP.$(1)),$(call help_guest,$(1))))
help_guest = $(call guest_kind,$(1))$(if $(call vm_alias_of,$(1)), (make $(call vm_alias_of,$(1))))
guest_kind = $(if $(filter vm-isolation-%,$(1)),$(1:vm-isolation-%=%): cpu1 isolated,$(if \
	$(filter vm-rt-spinner-%,$(1)),$(1:vm-rt-spinner-%=%): a SCHED_FIFO spinner owns a CPU,$(if \
	$(filter vm-debug-%,$(1)),the selftests on the $(1:vm-debug-%=%) debug kernel,$(call \
	vm_kernel,$(1:vm-%=%)), $(call vm_smp,$(1:vm-%=%)) CPU$(if $(filter-out 1,$(call vm_smp,$(1:vm-%=%))),s))))
# The role a guest has an alias for, if any.
vm_alias_of = $(firstword $(foreach r,$(VM_ROLES),$(if $(filter $(1),$(VM_ROLE.$(r))),$(r))))

# A line of the list: target and text, the text quoted for the shell.
sq := '
help_line = printf '  %-36s %s\n' '$(1)' '$(subst $(sq),$(sq)\$(sq)$(sq),$(call help_text,$(1)))';

help:
	@echo "make TARGET: the two commands of the README first, then by kind."
	@printf '\nThe two commands:\n'; $(foreach t,$(help_main),$(call help_line,$(t)))
	@printf '\nBuild and install:\n'; $(foreach t,$(help_build),$(call help_line,$(t)))
	@printf '\nChecks (make check runs each but check-quick, check-host, lib-unit and fuzz):\n'; $(foreach t,$(help_check),$(call help_line,$(t)))
	@printf '\nQEMU guests, by role, then as make check runs them (this machine'"'"'s kernels):\n'; \
		$(foreach t,$(help_guests),$(call help_line,$(t)))
	@printf '\nBenchmarks (bench/; make check runs bench-smoke):\n'; $(foreach t,$(help_bench),$(call help_line,$(t)))
	@printf '\nThis list:\n'; $(foreach t,$(help_list),$(call help_line,$(t)))

# One target a line, for scripts/check-doc-links.py.
help-targets:
	@printf '%s\n' $(HELP_TARGETS)

.PHONY: help help-targets
