# SPDX-License-Identifier: GPL-2.0
#
# The selftests in QEMU guests (scripts/vm/): every bootable kernel at
# each CPU count, a CPU without a TSC, the benchmarks, the load-time
# scaling.  Included by the top-level Makefile.

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

# Load time against the CPU count, 1 to 8 (CPU hotplug in one 8-CPU guest).
# On a host with fewer CPUs the guest is overcommitted, and the test only
# logs the figures: they are the host's scheduling then.
SCALING_CPUS ?= 8
vm-scaling: selftests kbuild-check
	$(if $(filter-out 0,$(shell echo $$(( $(SCALING_CPUS) > $(HOST_CPUS) )))), \
		TSCFK_OVERCOMMITTED="$(SCALING_CPUS) vCPUs on $(HOST_CPUS) host CPUs") \
	TSCFK_KO=$(BUILD)/kbuild/$(NEWEST_GENERIC)/tsc_freq_khz.ko \
	scripts/vm/run-in-vm.sh --kernel $(NEWEST_GENERIC) --smp $(SCALING_CPUS) \
		--log $(BUILD)/vm/scaling.log --env TSCFK_KO --env TSCFK_OVERCOMMITTED -- \
		$(BUILD)/selftests/scaling_test
	@! grep -a '^not ok' $(BUILD)/vm/scaling.log

vm-check: $(VM_RUNS) vm-notsc vm-bench-smoke vm-scaling

.PHONY: vm-check $(VM_RUNS) vm-notsc vm-bench-smoke vm-scaling
