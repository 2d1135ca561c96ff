# SPDX-License-Identifier: GPL-2.0
#
# The selftests in QEMU guests (scripts/vm/): each guest proves something
# the others do not (Documentation/testing.md's table of guests says
# what); the debug kernels they boot, built with the module for them;
# and chronyd, unpacked for the guests.  The guests that run benchmarks
# are in mk/bench.mk.  Included by the top-level Makefile.

# The module a guest loads: DKMS's build for this machine's kernels (as a
# fleet gets it), kbuild's in the kernel's root for the others.
VM_KO = $(if $(call kernel_root,$(1)),$(call KBUILD_KO,$(1)),$(call DKMS_KO,$(1)))
# modprobe, for a kernel whose modules are in a root (scripts/kernel-roots.sh).
VM_MODPROBE = modprobe $(if $(call kernel_root,$(1)),-d $(call kernel_root,$(1)))

# Every kernel-side selftest, with 2 CPUs, on the oldest kernel, this
# machine's newest (the 6.12 that bookworm and trixie fleets run), and the
# newest generic and PREEMPT_RT kernels of all.  The tools' checks that
# need a kernel of their own (tsc-report against the module's files, which
# it reads the same on every kernel; tsc-jitter's causes), the clients'
# (X-Ray, Abseil) and the bound's against chronyd run in the newest
# generic kernel's guest alone; the timekeeper's stall in a guest of its
# own, below.
FULL_KERNELS := $(sort $(OLDEST_GENERIC) $(lastword $(HOST_GENERIC)) $(NEWEST_GENERIC) $(NEWEST_RT))
USERSPACE_TESTS := clients_test tsc_report_test jitter_causes_test ntp_bound_test
full_skip = $(if $(filter $(NEWEST_GENERIC),$(1)),,$(USERSPACE_TESTS)) timekeeper_stall_test
# One CPU, on the oldest kernel: no pair to measure, and 6.1 keeps its TSC
# as clocksource there (with 2 CPUs under TCG it marks it unstable): the
# clock page's exactness on 6.1.
ONE_CPU_TESTS := clock_page_test sysfs_test trigger_test libtsc_test sysclock_exact_test dmesg_clean
# 4 vCPUs on this machine's 2 CPUs, on the oldest kernel: the host preempts
# vCPUs inside interrupts-off windows; its clocks read the HPET there, and
# libtsc's calibration must cover the truth as with 2 CPUs; hotplug with
# more CPUs.
OVERCOMMIT_TESTS := sysfs_test trigger_test hotplug_test libtsc_test dmesg_clean
# And 4 vCPUs on the newest generic kernel, for threads hammering the
# clock page, one per CPU, against the timekeeper's update.  Not on 6.1:
# there, with 4 vCPUs under TCG, a CPU sometimes stops answering IPIs
# (once at boot, and once during ftrace's text patching: 500 s of soft
# lockup in smp_call_function_many_cond()); 6.12 and 7.3 never did.
STALL_TESTS := timekeeper_stall_test dmesg_clean

VM_RUNS := $(foreach k,$(FULL_KERNELS),vm-$(k)-smp2) $(if $(OLDEST_GENERIC),vm-$(OLDEST_GENERIC)-smp1 \
	vm-$(OLDEST_GENERIC)-smp4) $(if $(NEWEST_GENERIC),vm-$(NEWEST_GENERIC)-smp4)
# More vCPUs than host CPUs: the host preempts vCPUs inside IRQ-off windows.
HOST_CPUS := $(shell nproc)
vm_kernel = $(word 1,$(subst -smp, ,$(1)))
vm_smp = $(word 2,$(subst -smp, ,$(1)))
# What a guest runs: everything with 2 CPUs, a set of its own otherwise.
vm_only = $(if $(filter 1,$(2)),$(ONE_CPU_TESTS),$(if $(filter 2,$(2)),,$(if \
	$(filter $(NEWEST_GENERIC),$(1)),$(STALL_TESTS),$(OVERCOMMIT_TESTS))))
vm_why = "$(if $(filter 2,$(2)),run in one guest only: see Documentation/testing.md's table of guests,not what \
	the $(2)-CPU guest is for: see Documentation/testing.md's table of guests)"
# chronyd for ntp_bound_test and the fleet's guest: Debian's own package,
# unpacked under build/ rather than installed, so that make check neither replaces this
# machine's time daemon (chrony conflicts with systemd-timesyncd) nor
# starts one.  The guests see it through the host's root.
CHRONYD := $(BUILD)/chrony/usr/sbin/chronyd
$(CHRONYD):
	rm -rf $(BUILD)/chrony && mkdir -p $(BUILD)/chrony/deb
	cd $(BUILD)/chrony/deb && { apt-get download -qq -o APT::Sandbox::User=root chrony || \
		{ apt-get update -qq && apt-get download -qq -o APT::Sandbox::User=root chrony; }; }
	dpkg-deb -x $(BUILD)/chrony/deb/chrony_*.deb $(BUILD)/chrony
	@test -x $@
chronyd: $(CHRONYD)

# Load/unload cycles of lifecycle_test and stress_test: 100 on the newest
# rt kernel, where preemption reaches furthest into the load and unload
# paths, 50 on the generic ones (TSCFK_CYCLES in the environment
# overrides both).  A cycle takes 0.1-0.4 s under TCG, and each cycle
# meets the readers' race hundreds of times.
vm_cycles = $(or $(TSCFK_CYCLES),$(if $(filter $(NEWEST_RT),$(1)),100,50))

# Guests whose clocks must read the TSC, where sysclock_exact_test fails
# rather than skips: all but the oldest kernel's with more than one CPU
# (see ONE_CPU_TESTS).
clocks_on_tsc = $(if $(and $(filter $(OLDEST_GENERIC),$(1)),$(filter-out 1,$(2))),,1)

# The selftests in a guest: $(1) kernel, $(2) CPUs, $(3) the module, $(4)
# the log's name, $(5) the tests skipped and $(6) why (quoted).
define vm_selftests
	@mkdir -p $(BUILD)/vm
	$(if $(filter-out 0,$(shell echo $$(( $(2) > $(HOST_CPUS) )))), \
		TSCFK_OVERCOMMITTED="$(2) vCPUs on $(HOST_CPUS) host CPUs") \
	TSCFK_FAKE_KO=$(call FAKE_KO,$(1)) TSCFK_CHRONYD=$(CHRONYD) TSCFK_CYCLES=$(call vm_cycles,$(1)) \
	TSCFK_ONLY="$(call vm_only,$(1),$(2))" TSCFK_SKIP="$(5)" TSCFK_SKIP_WHY=$(6) \
	TSCFK_CLOCKS_ON_TSC=$(if $(call clocks_on_tsc,$(1),$(2)),1,0) \
	scripts/vm/run-in-vm.sh --kernel $(1) --smp $(2) \
		--log $(BUILD)/vm/$(4).log --env TSCFK_CYCLES --env TSCFK_OVERCOMMITTED \
		--env TSCFK_FAKE_KO --env TSCFK_CHRONYD --env TSCFK_ONLY --env TSCFK_SKIP \
		--env TSCFK_SKIP_WHY --env TSCFK_CLOCKS_ON_TSC -- \
		selftests/run_tests.sh $(3) $(BUILD)/selftests
	@! grep -a '^not ok' $(BUILD)/vm/$(4).log
endef

$(VM_RUNS): vm-%: selftests lib dkms-check kbuild-check $(CHRONYD)
	$(call vm_selftests,$(call vm_kernel,$*),$(call vm_smp,$*),$(call VM_KO,$(call vm_kernel,$*)),$*,$(if \
		$(filter 2,$(call vm_smp,$*)),$(call full_skip,$(call vm_kernel,$*))),$(call \
		vm_why,$(call vm_kernel,$*),$(call vm_smp,$*)))

# make check-quick's guest: the newest generic kernel with 2 CPUs, the
# module as kbuild built it (no DKMS, no other kernel's build), the
# kernel side's selftests; vm-newest runs the rest.
vm-quick: selftests lib $(call KBUILD_KO,$(NEWEST_GENERIC)) $(call FAKE_KO,$(NEWEST_GENERIC))
	$(call vm_selftests,$(NEWEST_GENERIC),2,$(call KBUILD_KO,$(NEWEST_GENERIC)),quick,$(USERSPACE_TESTS) \
		timekeeper_stall_test,"make check-quick: the kernel side only (make vm-newest runs the rest)")

# A CPU without a TSC: the module must refuse to load.
vm-notsc: dkms-check kbuild-check
	scripts/vm/run-in-vm.sh --kernel $(NEWEST_GENERIC) --cpu max,-tsc \
		--log $(BUILD)/vm/notsc.log -- \
		selftests/no_tsc_test.sh $(call VM_KO,$(NEWEST_GENERIC))
	@! grep -a '^not ok' $(BUILD)/vm/notsc.log

# tsc_clock_check() and the exact system clocks on the module's page across
# a suspend to RAM, woken by the RTC's alarm, and a suspend to idle, woken
# by the ACPI power button that the harness presses when the test asks.
# The 9p shares do not come back from either: the module and the button's
# driver are loaded and the test copied to the guest's tmpfs before, the
# test linked statically, and it must not skip (a skip would hide that it
# never ran).  1 CPU: the kernels keep their TSC there.
vm-suspend: selftests dkms-check kbuild-check
	scripts/vm/run-in-vm.sh --kernel $(NEWEST_GENERIC) --smp 1 --timeout 300 --power-button \
		--log $(BUILD)/vm/suspend.log -- sh -c \
		'insmod $(call VM_KO,$(NEWEST_GENERIC)) && $(call VM_MODPROBE,$(NEWEST_GENERIC)) button && \
		 cp $(BUILD)/selftests/suspend_test /tmp/ && exec /tmp/suspend_test'
	@! grep -a -e '^not ok' -e '^ok .*# SKIP' $(BUILD)/vm/suspend.log

# libtsc's bound across a migration of the guest to a file and back,
# which moves the disruption marker of QEMU's vmclock device (two CPUs,
# whose skew the module measured before it is lost too): QEMU 10 and
# the newest generic kernel, both from a root of scripts/kernel-roots.sh
# (trixie's; this machine's QEMU has no vmclock).  It must not skip.
vm-vmclock: selftests kbuild-check
	scripts/vm/migrate_test.py --kernel $(NEWEST_GENERIC) --smp 2 \
		--program $(BUILD)/selftests/vmclock_test --kmod ptp_vmclock \
		--module $(call VM_KO,$(NEWEST_GENERIC)) --log $(BUILD)/vm/vmclock.log >/dev/null
	@! grep -a -e '^not ok' -e '^ok .*# SKIP' $(BUILD)/vm/vmclock.log

# The clock page under SELinux enforcing: Debian's reference policy (the
# newest generic kernel's root's, built there by selinux-policy-default's
# own tools, in a copy of its store, which stays as it was) with
# selftests/selinux_harness.cil, as policy version 33, the newest 6.1
# loads.  A guest of the initramfs alone, whose files SELinux labels (the
# 9p share's it cannot); the test loads the module itself, in modprobe's
# domain.  On the newest and the oldest generic kernels: the anchor's
# inode is private from its making on the one, made private after on the
# other.  One CPU: the page is what it tests.  It must not skip.
SELINUX_POLICY := $(BUILD)/selinux/policy
SELINUX_KERNELS := $(NEWEST_GENERIC) $(OLDEST_GENERIC)
$(SELINUX_POLICY): selftests/selinux_harness.cil \
		$(wildcard $(call kernel_root,$(NEWEST_GENERIC))/etc/selinux/default/policy/policy.*)
	@mkdir -p $(@D)
	$(call in_kernel_root,$(NEWEST_GENERIC),$(CURDIR)) sh -ec ' \
		mkdir -p /tmp/sel/etc /tmp/sel/var/lib; \
		cp -a /etc/selinux /tmp/sel/etc/ && cp -a /var/lib/selinux /tmp/sel/var/lib/; \
		printf "\npolicy-version = 33\n" >> /tmp/sel/etc/selinux/semanage.conf; \
		semodule -p /tmp/sel -X 400 -i $(abspath $<) 2> $(abspath $(@D))/semodule.log || \
			{ cat $(abspath $(@D))/semodule.log; exit 1; }; \
		cp /tmp/sel/etc/selinux/default/policy/policy.33 $(abspath $@)'
vm-selinux: selftests dkms-check kbuild-check $(SELINUX_POLICY)
	$(foreach k,$(SELINUX_KERNELS),scripts/vm/migrate_test.py --kernel $(k) --smp 1 --no-vmclock \
		--program $(BUILD)/selftests/selinux_test --file $(SELINUX_POLICY):policy \
		--file $(call VM_KO,$(k)):tsc_freq_khz.ko --append "lsm=selinux audit=1" \
		--log $(BUILD)/vm/selinux-$(k).log >/dev/null && \
		! grep -a -e '^not ok' -e '^ok .*# SKIP' $(BUILD)/vm/selinux-$(k).log &&) true

# Load time against the CPU count, 1 to 8 (CPU hotplug in one 8-CPU guest).
# On a host with fewer CPUs the guest is overcommitted, and the test only
# logs the figures: they are the host's scheduling then.
SCALING_CPUS ?= 8
vm-scaling: selftests kbuild-check
	$(if $(filter-out 0,$(shell echo $$(( $(SCALING_CPUS) > $(HOST_CPUS) )))), \
		TSCFK_OVERCOMMITTED="$(SCALING_CPUS) vCPUs on $(HOST_CPUS) host CPUs") \
	TSCFK_KO=$(call KBUILD_KO,$(NEWEST_GENERIC)) \
	scripts/vm/run-in-vm.sh --kernel $(NEWEST_GENERIC) --smp $(SCALING_CPUS) \
		--log $(BUILD)/vm/scaling.log --env TSCFK_KO --env TSCFK_OVERCOMMITTED -- \
		$(BUILD)/selftests/scaling_test
	@! grep -a '^not ok' $(BUILD)/vm/scaling.log

# cpu1 isolated at boot: left alone unless measure_isolated=1.  The newest
# generic kernel and, for its different isolation paths, PREEMPT_RT.  And
# libtsc's disciplined clock set up from a SCHED_FIFO thread on cpu1: its
# helper stays off cpu1 and syncs while that thread polls there.
ISOLATION_RUNS := $(foreach k,$(NEWEST_GENERIC) $(NEWEST_RT),vm-isolation-$(k))
$(ISOLATION_RUNS): vm-isolation-%: selftests kbuild-check
	@mkdir -p $(BUILD)/vm
	scripts/vm/run-in-vm.sh --kernel $* --smp 2 --append "isolcpus=1 nohz_full=1" \
		--log $(BUILD)/vm/isolation-$*.log -- sh -c \
		"selftests/isolation_test.sh $(call KBUILD_KO,$*); a=\$$?; \
		 $(BUILD)/selftests/disciplined_isolated_test; exit \$$((a | \$$?))"
	@! grep -a -e '^not ok' -e '^ok .*# SKIP' -e '^1\.\.0 # SKIP' $(BUILD)/vm/isolation-$*.log

# A real-time task owning CPUs (rt_spinner_test.sh): the oldest generic
# kernel and the newest PREEMPT_RT one, the two ends of the scheduler's
# and hotplug's code the bounds rely on, with three CPUs so that a side
# stalled after it started is tested too.  The spinner's CPUs must be
# nohz_full, as in the deployments it stands for, and on PREEMPT_RT free
# of interrupts: a boot of their own (run_tests.sh skips the test
# elsewhere).  A fourth CPU, isolated by isolcpus= alone, is where a
# thread given up on must never be moved.  A skip here fails: the boot
# did not take.
RT_SPINNER_APPEND := nohz_full=1,2 irqaffinity=0
RT_SPINNER_RUNS := $(foreach k,$(OLDEST_GENERIC) $(NEWEST_RT),vm-rt-spinner-$(k))
$(RT_SPINNER_RUNS): vm-rt-spinner-%: selftests kbuild-check
	@mkdir -p $(BUILD)/vm
	scripts/vm/run-in-vm.sh --kernel $* --smp 4 --append "$(RT_SPINNER_APPEND) isolcpus=3" \
		--log $(BUILD)/vm/rt-spinner-$*.log -- \
		selftests/rt_spinner_test.sh $(call KBUILD_KO,$*) \
		$(BUILD)/selftests/rt_spinner
	@! grep -a -e '^not ok' -e '^1\.\.0 # SKIP' $(BUILD)/vm/rt-spinner-$*.log

# The kernel's own checkers: two debug kernels from Debian's
# linux-source-6.1 (scripts/vm/debug-kernel.sh, built once and cached),
# kasan (lockdep, KASAN, kmemleak, debug objects) and kcsan (KCSAN, which
# cannot be built beside KASAN), each booted with 2 CPUs to run every
# selftest of the kernel side, then with 3 for rt_spinner_test's stalled
# side, which needs a third CPU.  Any report fails the run: run-in-vm.sh
# on BUG:/WARNING: lines (KCSAN's "BUG: KCSAN: data-race" among them),
# run_tests.sh's kmemleak and dmesg_clean tests on the rest.
DEBUG_FLAVOURS := kasan kcsan
DEBUG_RUNS := $(foreach f,$(DEBUG_FLAVOURS),vm-debug-$(f))
# The checkers slow everything down several times under TCG: fewer
# load/unload cycles, and not the tests of libtsc and its tools, which
# run no kernel code of ours but the files' reads (sysfs_test has those).
# KASAN, lockdep and kmemleak see a path the first time it runs: 10
# cycles.  KCSAN samples accesses, and a race shows only when its two
# sides meet while watched: 20.
DEBUG_CYCLES.kasan ?= 10
DEBUG_CYCLES.kcsan ?= 20
debug_cycles = $(or $(DEBUG_CYCLES.$(1)),$(error no DEBUG_CYCLES.$(1) for the debug kernel $(1)))
# ACPI for the CPUs (SeaBIOS's MP table lists one), not for IRQ routing:
# under KASAN and TCG the interpreter runs _PRT past ACPICA's 30 s loop
# timeout, and virtio-pci is left without an interrupt.  And 4-level
# paging, though QEMU's CPU has LA57: 6.1's identify_cpu() clears the
# CPU's feature bits for a while, and KASAN, checking an interrupt's
# access then, takes the 5-level direct map for a wild address (its
# shadow's start depends on the LA57 bit) and reports a bug at boot
# (6.1 itself does not know the parameter, which its decompressor reads).
DEBUG_APPEND := acpi=noirq no5lvl
# Only errors on the console as they come (see run-in-vm.sh), and for
# KASAN a wider margin for rt_spinner_test: there the checkers make
# loading a module take seconds by itself (an insmod took 2.8 s in all on
# an AMD Zen 3 host, 0.5 s of it the bounded wait; 5.8 s with KASAN's
# checks outline).  KASAN's kernel boots in 25 s under TCG, and several
# times that on a loaded host.
DEBUG_VM = scripts/vm/run-in-vm.sh --image $(1)/arch/x86/boot/bzImage --mem 2048 \
	--boot-timeout 600 --append "$(DEBUG_APPEND)" --errors-on-console --env TSCFK_MARGIN_MS
export TSCFK_MARGIN_MS
vm-debug-kasan: TSCFK_MARGIN_MS = 9000
DEBUG_SKIP := scaling_test libtsc_test sysclock_exact_test $(USERSPACE_TESTS)
vm-debug: $(DEBUG_RUNS)

# make check builds the debug kernels (when not cached: 4-6 minutes each)
# and then the module for them in the background while it runs what no
# timing depends on (builds, packages, fresh roots, lint), and waits for
# them before the first test that times anything.  The build is bounded
# by itself; so is the wait.  A make of its own, given what it needs of
# this one's: called as 'make', since a line naming $(MAKE) would run
# under make -n too.  It holds a lock while it runs (taken before it
# starts, so there is no gap): a make check run again while an earlier
# one's build goes on waits for that build instead of starting a second
# one in the same directories, and a wait with no build under way and
# none finished fails at once.  (A build whose shell was killed while its
# make goes on, or whose build/ was removed under it, is not seen.)
DEBUG_BG := $(BUILD)/debug-kernels
debug-kernels-start:
	@mkdir -p $(BUILD) && exec 9> $(DEBUG_BG).lock && \
	if ! flock -w 2 9; then \
		echo "debug kernels: a build is already under way (log $(DEBUG_BG).log): waiting for it"; exit 0; \
	fi; \
	rm -f $(DEBUG_BG).status; \
	echo "debug kernels: $(DEBUG_FLAVOURS), and the module for them, built in the background (log $(DEBUG_BG).log)"; \
	($(OWN_BUILD) make BUILD=$(BUILD) DEBUG_FLAVOURS="$(DEBUG_FLAVOURS)" \
		$(DEBUG_KOS) > $(DEBUG_BG).log 2>&1 9>&-; echo $$? > $(DEBUG_BG).status) < /dev/null &
debug-kernels-wait:
	@t=0; while [ ! -s $(DEBUG_BG).status ] && [ $$t -lt 3600 ]; do \
		if { [ ! -e $(DEBUG_BG).lock ] || flock -n $(DEBUG_BG).lock true; } && \
		   [ ! -s $(DEBUG_BG).status ]; then \
			echo "debug kernels: no build under way and none finished: make debug-kernels-start" >&2; exit 1; \
		fi; \
		sleep 5; t=$$((t + 5)); \
	done; \
	st=$$(cat $(DEBUG_BG).status 2>/dev/null); \
	grep -E '^debug-kernel: (built|cached)' $(DEBUG_BG).log; \
	[ "$$st" = 0 ] || { tail -n 20 $(DEBUG_BG).log; echo "debug kernels or their modules: failed (status $${st:-none})" >&2; exit 1; }
# The module and the selftests' one for a debug kernel, each in a copy of
# the tree of its own, made again when a source changed or the kernel did
# (its directory, rewritten only when it differs, names the build: a
# different configuration is another cache entry; debug-kernel.sh builds
# one that is not cached, outside this make's flags).  The selftests'
# module first: the target exists only once both are built.  The kernel's
# make is called as kbuild-check calls it (mk/kbuild.mk).
DEBUG_KO = $(BUILD)/debug-$(1)/tsc_freq_khz.ko
DEBUG_KOS := $(foreach f,$(DEBUG_FLAVOURS),$(call DEBUG_KO,$(f)))
DEBUG_KDIRS := $(foreach f,$(DEBUG_FLAVOURS),$(BUILD)/debug-$(f).kdir)
$(DEBUG_KDIRS): $(BUILD)/debug-%.kdir: FORCE
	@mkdir -p $(@D) && k=$$($(OWN_BUILD) scripts/vm/debug-kernel.sh $*) && \
	$(call write_if_changed,$$k)
$(BUILD)/debug-%/tsc_freq_khz.ko: $(SOURCES) selftests/kmod/Kbuild selftests/kmod/fake_kernel_file.c \
		$(BUILD)/debug-%.kdir
	$(kbuild_recursive)@kdir=$$(cat $(BUILD)/debug-$*.kdir) && d=$(@D) && \
	rm -rf $$d && mkdir -p $$d/kmod && \
	cp -a Kbuild module common $$d/ && cp -a selftests/kmod/* $$d/kmod/ && \
	make -s -C $$kdir M=$$d/kmod modules && \
	make -s -C $$kdir M=$$d W=1 modules
$(DEBUG_RUNS): vm-debug-%: selftests lib $(BUILD)/debug-%/tsc_freq_khz.ko
	@kdir=$$(cat $(BUILD)/debug-$*.kdir) && d=$(BUILD)/debug-$* && \
	mkdir -p $(BUILD)/vm && \
	TSCFK_FAKE_KO=$$d/kmod/tscfk_fake_kernel_file.ko TSCFK_CYCLES=$(call debug_cycles,$*) \
	TSCFK_SKIP="$(DEBUG_SKIP)" TSCFK_SKIP_WHY="userspace's test, not the kernel's: not on the debug kernel" \
	TSCFK_OVERCOMMITTED="the debug kernel: its checkers in every window, under TCG" \
	$(call DEBUG_VM,$$kdir) --smp 2 --timeout 1800 --log $(BUILD)/vm/debug-$*.log \
		--env TSCFK_FAKE_KO --env TSCFK_CYCLES --env TSCFK_SKIP --env TSCFK_SKIP_WHY \
		--env TSCFK_OVERCOMMITTED -- \
		selftests/run_tests.sh $$d/tsc_freq_khz.ko $(BUILD)/selftests && \
	$(call DEBUG_VM,$$kdir) --smp 3 --append "$(RT_SPINNER_APPEND)" \
		--log $(BUILD)/vm/debug-$*-rt-spinner.log -- \
		selftests/rt_spinner_test.sh $$d/tsc_freq_khz.ko $(BUILD)/selftests/rt_spinner
	@! grep -a -e '^not ok' -e '^1\.\.0 # SKIP' $(BUILD)/vm/debug-$*.log $(BUILD)/vm/debug-$*-rt-spinner.log

# The fleet's path end to end (selftests/fleet/): the packaged unit's
# report in a guest whose clock chronyd keeps, and whose clocksource is
# switched away from tsc and back,
# read by this host's node_exporter and Prometheus (loopback ports) with the
# packaged alert rules and dashboard.  Its KTAP goes to the log as well.
vm-fleet-e2e: deb kbuild-check $(CHRONYD)
	@mkdir -p $(BUILD)/vm
	set -o pipefail; selftests/fleet/prometheus_e2e.py --debs $(BUILD)/deb \
		--ko $(call VM_KO,$(NEWEST_GENERIC)) --kernel $(NEWEST_GENERIC) --out $(BUILD)/fleet-e2e \
		--chronyd $(CHRONYD) | tee $(BUILD)/vm/fleet-e2e.log

# Every guest of make check, in the order it runs them (each timed there).
VM_CHECK_STEPS := $(VM_RUNS) vm-notsc vm-suspend vm-vmclock vm-selinux vm-bench-smoke vm-scaling \
	vm-fleet-e2e \
	$(ISOLATION_RUNS) $(RT_SPINNER_RUNS) $(DEBUG_RUNS)
vm-check: $(VM_CHECK_STEPS)

# The guests named after kernels, by their role: docs and habits need
# not name kernel versions.
VM_ROLE.vm-oldest := vm-$(OLDEST_GENERIC)-smp2
VM_ROLE.vm-oldest-smp1 := vm-$(OLDEST_GENERIC)-smp1
VM_ROLE.vm-oldest-smp4 := vm-$(OLDEST_GENERIC)-smp4
VM_ROLE.vm-host := vm-$(lastword $(HOST_GENERIC))-smp2
VM_ROLE.vm-newest := vm-$(NEWEST_GENERIC)-smp2
VM_ROLE.vm-newest-smp4 := vm-$(NEWEST_GENERIC)-smp4
VM_ROLE.vm-rt := vm-$(NEWEST_RT)-smp2
VM_ROLE.vm-isolation-newest := vm-isolation-$(NEWEST_GENERIC)
VM_ROLE.vm-isolation-rt := vm-isolation-$(NEWEST_RT)
VM_ROLE.vm-rt-spinner-oldest := vm-rt-spinner-$(OLDEST_GENERIC)
VM_ROLE.vm-rt-spinner-rt := vm-rt-spinner-$(NEWEST_RT)
VM_ALL_ROLES := vm-oldest vm-oldest-smp1 vm-oldest-smp4 vm-host vm-newest vm-newest-smp4 vm-rt \
	vm-isolation-newest vm-isolation-rt vm-rt-spinner-oldest vm-rt-spinner-rt
VM_ROLES := $(foreach r,$(VM_ALL_ROLES),$(if $(filter $(VM_ROLE.$(r)),$(VM_CHECK_STEPS)),$(r)))
$(foreach r,$(VM_ROLES),$(eval $(r): $(VM_ROLE.$(r))))
# A role is a target on every machine, so that a doc's or a habit's
# make vm-rt means the same everywhere; where this machine has no kernel
# for it, it says which kernel is missing, and where it comes from, and
# fails.
VM_ROLES_ABSENT := $(filter-out $(VM_ROLES),$(VM_ALL_ROLES))
vm_role_needs = $(if $(filter %-rt,$(1)),a PREEMPT_RT kernel (make kernel-roots installs \
	Debian's newest),$(if $(filter vm-host,$(1)),a generic kernel of this machine's own (make \
	deps-check installs them),$(if $(findstring newest,$(1)),a generic kernel (make kernel-roots \
	installs Debian's newest),a generic kernel (make deps-check installs this machine's)))), \
	with an image and 9p
$(VM_ROLES_ABSENT):
	@echo "make $@: no guest for this role here: it needs $(call vm_role_needs,$@)" >&2; exit 2

# Every guest's log with KTAP results, for make check's summary.
VM_LOGS = $(patsubst vm-%,$(BUILD)/vm/%.log,$(VM_RUNS) vm-notsc vm-suspend vm-vmclock vm-scaling vm-fleet-e2e $(ISOLATION_RUNS) \
	$(RT_SPINNER_RUNS) $(DEBUG_RUNS) $(addsuffix -rt-spinner,$(DEBUG_RUNS))) \
	$(foreach k,$(SELINUX_KERNELS),$(BUILD)/vm/selinux-$(k).log)

.PHONY: chronyd debug-kernels-start debug-kernels-wait vm-check vm-quick $(VM_ALL_ROLES) $(VM_RUNS) vm-fleet-e2e vm-notsc vm-suspend vm-vmclock vm-selinux vm-scaling $(ISOLATION_RUNS) \
	$(RT_SPINNER_RUNS) vm-debug $(DEBUG_RUNS)
