# SPDX-License-Identifier: GPL-2.0
#
# The benchmarks (bench/): programs that print ratios measured side by
# side, here, and in QEMU guests where they need the module or clocks
# they may slew.  make check runs them quick, and holds clock_accuracy to
# its bounds (vm-bench-smoke).  Included by the top-level Makefile.

# The offsets benchmark needs the module: on this kernel if it loads
# modules, else in a guest of the newest kernel with 2 and 4 CPUs.
bench: lib
	$(MAKE) -C bench full OUT=$(BUILD)/bench LIBTSC=$(BUILD)/userspace
	@if [ -e /proc/modules ]; then \
		$(MAKE) -s module && scripts/show.sh --load tsc_freq_khz.ko > /dev/null; \
		$(BUILD)/bench/offsets_bench; \
	else \
		k=$(RUN_KERNEL); \
		$(MAKE) -s module KDIR=/lib/modules/$$k/build && \
		for n in 2 4; do \
			echo "offsets_bench in a guest of $$k with $$n CPUs:"; \
			scripts/vm/run-in-vm.sh --quiet --kernel $$k --smp $$n -- sh -c \
				"insmod tsc_freq_khz.ko && $(BUILD)/bench/offsets_bench"; \
		done; \
	fi
	$(MAKE) --no-print-directory bench-windows
	$(MAKE) --no-print-directory bench-accuracy

# libtsc's clocks while the system's are slewed and stepped: always in a
# guest (it adjusts the clocks of the machine it runs on), of each generic
# kernel but the cloud ones, with 1 and 2 CPUs, the module loaded.
bench-accuracy: lib
	$(MAKE) -C bench all OUT=$(BUILD)/bench LIBTSC=$(BUILD)/userspace
	@for k in $(HOST_GENERIC); do \
		$(MAKE) -s module KDIR=/lib/modules/$$k/build || exit 1; \
		for n in 1 2; do \
			echo "clock_accuracy in a guest of $$k with $$n CPUs:"; \
			scripts/vm/run-in-vm.sh --quiet --kernel $$k --smp $$n --timeout 1200 -- sh -c \
				"insmod tsc_freq_khz.ko && $(BUILD)/bench/clock_accuracy --adjust-clocks" || exit 1; \
		done; \
	done

# Quick runs of those that need nothing: make check's.
bench-smoke: lib
	$(MAKE) -C bench smoke OUT=$(BUILD)/bench LIBTSC=$(BUILD)/userspace

# offsets_bench and irqoff_windows.sh need the module, clock_accuracy a
# clock it may slew and step: smoke-run them in a 2-CPU guest, the last
# held to its bounds (the exact path's too: the module is loaded).
vm-bench-smoke: dkms-check kbuild-check bench-smoke
	scripts/vm/run-in-vm.sh --kernel $(NEWEST_GENERIC) --smp 2 \
		--log $(BUILD)/vm/bench.log -- sh -c \
		"bench/irqoff_windows.sh $(call VM_KO,$(NEWEST_GENERIC)) --quick && \
		 insmod $(call VM_KO,$(NEWEST_GENERIC)) && $(BUILD)/bench/offsets_bench --quick && \
		 $(BUILD)/bench/clock_accuracy --adjust-clocks --quick --assert"

# tsc-jitter's causes beside rtla osnoise's on the same injections
# (bench/jitter_vs_rtla.sh), in a 2-CPU guest of the newest rt kernel:
# Debian builds the osnoise tracer rtla reads into its rt kernels alone.
vm-bench-causes: selftests lib
	scripts/vm/run-in-vm.sh --kernel $(NEWEST_RT) --smp 2 --log $(BUILD)/vm/bench-causes.log -- \
		bench/jitter_vs_rtla.sh $(BUILD)/userspace/tsc-jitter $(BUILD)/selftests/cause_inject

# What the interrupts-off window length buys (bench/irqoff_windows.sh):
# on this kernel if it loads modules, else in a 2-CPU guest of each
# generic kernel (make bench runs it).
bench-windows:
	@if [ -e /proc/modules ]; then \
		$(MAKE) -s module && bench/irqoff_windows.sh tsc_freq_khz.ko $(WINDOWS_ARGS); \
	else \
		for k in $(HOST_GENERIC); do \
			$(MAKE) -s module KDIR=/lib/modules/$$k/build && \
			echo "irqoff_windows.sh in a guest of $$k with 2 CPUs:" && \
			scripts/vm/run-in-vm.sh --quiet --kernel $$k --smp 2 --timeout 1800 \
				--log $(BUILD)/vm/windows-$$k.log -- \
				bench/irqoff_windows.sh tsc_freq_khz.ko $(WINDOWS_ARGS) || exit 1; \
		done; \
	fi

.PHONY: bench bench-accuracy bench-smoke bench-windows vm-bench-smoke vm-bench-causes
