# SPDX-License-Identifier: GPL-2.0
#
# How the project ships, checked: make install staged, DKMS, the Debian
# packages, and the README's set-up in a fresh root.  Included by the
# top-level Makefile.

# make install, staged into INSTALL_MOD_PATH (where, unlike DESTDIR,
# depmod runs as on a machine), for a kernel by its KDIR alone (the
# headers' own directory, /usr/src/linux-headers-K, as a user gives it), from
# a scratch copy of the tree: the module must land where modprobe looks,
# and depmod must list it there.  For the kernels dkms-check builds for
# (this machine's generic ones): what differs between kernels here is the
# release the KDIR names and whether modules_install compresses (6.1's
# .ko, 6.12's .ko.xz), not the flavour, which kbuild-check builds.
install-check:
	set -e; for k in $(DKMS_CHECK_KERNELS); do \
		rm -rf $(BUILD)/install && mkdir -p $(BUILD)/install/src; \
		cp -a Kbuild Makefile mk dkms.conf module common $(BUILD)/install/src/; \
		$(MAKE) -s -C $(BUILD)/install/src install-module KDIR=$$(readlink -f /lib/modules/$$k/build) \
			INSTALL_MOD_PATH=$(BUILD)/install/root > $(BUILD)/install/log 2>&1 || \
			{ cat $(BUILD)/install/log; exit 1; }; \
		ls $(BUILD)/install/root/lib/modules/$$k/updates/tsc_freq_khz.ko*; \
		grep -q 'updates/tsc_freq_khz.ko' $(BUILD)/install/root/lib/modules/$$k/modules.dep; \
	done
	@# libtsc staged the same way, then used as a packager's user would.
	$(MAKE) -s -C userspace install OUT=$(BUILD)/userspace PREFIX=/usr \
		DESTDIR=$(BUILD)/install/root
	printf '#include <tsc.h>\n#include <libtsc.h>\nint main(void) { return tsc_source_name(TSC_SOURCE_SYSFS)[0] != 0x73; }\n' \
		> $(BUILD)/install/use.c
	PKG_CONFIG_SYSROOT_DIR=$(BUILD)/install/root \
	PKG_CONFIG_LIBDIR=$(BUILD)/install/root/usr/lib/pkgconfig \
	PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 \
		sh -c 'cc $(BUILD)/install/use.c $$(pkg-config --cflags --libs libtsc) \
			-Wl,-rpath,$(BUILD)/install/root/usr/lib -o $(BUILD)/install/use'
	$(BUILD)/install/use
	ls $(BUILD)/install/root/usr/share/man/man3/tsc_now.3 $(BUILD)/install/root/usr/lib/libtsc.so.1 \
		$(BUILD)/install/root/usr/bin/tsc-report $(BUILD)/install/root/usr/share/tsc/tsc-report.schema.json \
		$(BUILD)/install/root/usr/share/man/man1/tsc-report.1

# DKMS exactly as a fleet uses it (add, build, install), for the kernels
# whose guests load its module: this machine's generic ones (kbuild-check
# builds for every flavour; the guests of the roots' kernels load kbuild's
# module).  With private source, module and install trees instead of
# /usr/src, /var/lib/dkms/<module> and /lib/modules.  Like any DKMS host,
# dkms makes its signing key /var/lib/dkms/mok.key on first use, and its
# install step re-runs depmod for the kernel (the index stays the same:
# the module is installed in the private tree).  A build of its own.
DKMS_DIR := $(BUILD)/dkms
DKMS := $(OWN_BUILD) dkms --dkmstree $(DKMS_DIR)/tree --sourcetree $(DKMS_DIR)/src \
	--installtree $(DKMS_DIR)/install
DKMS_KO = $(wildcard $(DKMS_DIR)/tree/tsc-freq-khz/$(VERSION)/$(1)/$(shell uname -m)/module/tsc_freq_khz.ko*)
# Made again when a source or the list of kernels changed, not at every
# guest that loads its modules (each step of make check is a make of its
# own, where a phony prerequisite would run every time): the list is
# rewritten only when it differs, kbuild's if_changed in small.  Each
# stamp takes the time its work began (a file edited meanwhile is newer),
# and lives inside what it stands for.
stamp_begin = : > $(1).start
stamp_end = touch -r $(1).start $(1) && rm $(1).start
# The target's contents, $(1), written only when they differ.
write_if_changed = { echo "$(1)" | cmp -s - $@ || echo "$(1)" > $@; }
DKMS_STAMP := $(DKMS_DIR)/stamp
DKMS_KERNELS := $(BUILD)/dkms.kernels
DKMS_CHECK_KERNELS := $(or $(HOST_GENERIC),$(lastword $(KERNELS)))
$(DKMS_KERNELS): FORCE
	@mkdir -p $(@D) && $(call write_if_changed,$(DKMS_CHECK_KERNELS))
dkms-check: $(DKMS_STAMP)
$(DKMS_STAMP): $(SOURCES) dkms.conf $(DKMS_KERNELS)
	rm -rf $(DKMS_DIR) && mkdir -p $(DKMS_DIR)/tree $(DKMS_DIR)/src/tsc-freq-khz-$(VERSION)
	$(call stamp_begin,$@)
	cp -a Kbuild dkms.conf module common $(DKMS_DIR)/src/tsc-freq-khz-$(VERSION)/
	$(DKMS) add -m tsc-freq-khz -v $(VERSION)
	set -e; for k in $(DKMS_CHECK_KERNELS); do \
		mkdir -p $(DKMS_DIR)/install/$$k; \
		$(DKMS) build -m tsc-freq-khz -v $(VERSION) -k $$k; \
		$(DKMS) install -m tsc-freq-khz -v $(VERSION) -k $$k; \
		ls $(DKMS_DIR)/install/$$k/updates/dkms/tsc_freq_khz.ko*; \
	done
	$(DKMS) status -m tsc-freq-khz
	$(call stamp_end,$@)

# The Debian packages (packaging/debian/, debhelper and dh_dkms) in
# build/deb: tsc-freq-khz-dkms, libtsc1, libtsc-dev and tsc-tools, with the
# source package; lintian (any error or warning fails), their fields,
# files, maintainer scripts, the library's ABI and the systemd units checked.
# What it needs is installed first, or named all at once.
# Made again when a file of the project changed (what the build copies:
# tracked files and new ones not ignored; always, outside git), not at
# every make deb, nor at vm-fleet-e2e after deb-check built them.
DEB_STAMP := $(BUILD)/deb/stamp
PROJECT_FILES := $(wildcard $(shell git ls-files --cached --others --exclude-standard 2>/dev/null))
deb: $(DEB_STAMP)
$(DEB_STAMP): $(or $(PROJECT_FILES),FORCE) | deps-deb
	rm -f $@ && mkdir -p $(@D) && $(call stamp_begin,$@)
	scripts/packaging/deb-check.sh --build-only $(BUILD)/deb
	$(call stamp_end,$@)

# DKMS skipping what dkms.conf excludes (exit 77, nothing built); then the
# packages built, linted and inspected, and the packaged module built by
# DKMS in private trees (installed, used and purged: the fresh roots').
# The result goes to deb-check.log, as a KTAP line, for make check's
# summary: a skip there is counted and says why, not passed in silence.
deb-check:
	scripts/packaging/dkms-exclusive-check.sh $(BUILD)
	@mkdir -p $(BUILD)/deb && rm -f $(DEB_STAMP) && $(call stamp_begin,$(DEB_STAMP))
	{ scripts/packaging/deb-check.sh $(BUILD)/deb; echo $$? > $(BUILD)/deb-check.status; } | \
		tee $(BUILD)/deb-check.out
	@st=$$(cat $(BUILD)/deb-check.status); case $$st in \
	0) echo "ok 1 deb-check" ;; \
	4) echo "ok 1 deb-check # SKIP $$(sed -n 's/^SKIP: //p' $(BUILD)/deb-check.out | tail -n 1)" ;; \
	*) echo "not ok 1 deb-check # exit=$$st" ;; \
	esac | tee $(BUILD)/deb-check.log; [ "$$st" = 0 ] || [ "$$st" = 4 ]
	@# It built and inspected the packages: make deb need not again.
	@if grep -q '^inspect: ok' $(BUILD)/deb-check.out; then $(call stamp_end,$(DEB_STAMP)); \
	else rm $(DEB_STAMP).start; fi

# The README's set-up where nothing is installed: a clean bookworm root in
# which a clone of HEAD runs make run to its verdict (twice), then make
# deb, whose packages are installed with apt, used (in a guest too, with
# the module loaded), purged, nothing left.  The
# root tarball and apt's downloads are cached in FRESH_ROOT_CACHE.
# FRESH_ROOT_MAKE=check: only make check, from nothing, there: its first
# run on a fresh machine (40 minutes and more; by hand, not in make check).
# Then the packages of build/deb (make deb, or deb-check) alone in a
# clean trixie root with the headers of trixie-backports' kernel: DKMS
# must build the module for it.
# make check runs the two roots side by side, as two steps.
fresh-root-check: fresh-root-bookworm-check $(if $(FRESH_ROOT_MAKE),,fresh-root-trixie-check)
fresh-root-bookworm-check:
	scripts/fresh-root-check.sh $(if $(FRESH_ROOT_MAKE),--make $(FRESH_ROOT_MAKE)) $(BUILD)
fresh-root-trixie-check:
	scripts/fresh-root-check.sh --trixie $(BUILD)/deb $(BUILD)

# Always out of date (GNU make's idiom: no recipe, no prerequisites).
FORCE:
.PHONY: install-check dkms-check deb deb-check fresh-root-check fresh-root-bookworm-check fresh-root-trixie-check
