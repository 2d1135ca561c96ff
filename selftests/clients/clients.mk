# SPDX-License-Identifier: GPL-2.0
#
# Make fragment: builds the "real client" programs that read
# /sys/devices/system/cpu/cpu0/tsc_freq_khz.
#
# The includer sets:
#   OUTPUT       directory for the binaries
#   CLIENTS_DIR  directory holding this file and the sources
#                (defaults to the directory of this file)
# and gets:
#   CLIENT_PROGS := $(OUTPUT)/xray_client $(OUTPUT)/absl_client
#
# Needs (Debian bookworm): clang-14, libclang-rt-14-dev (X-Ray runtime),
# libabsl-dev, g++, pkg-config.
#
# This fragment defines no default goal: whatever .DEFAULT_GOAL was before
# the include is restored at the end.

_clients_saved_default_goal := $(.DEFAULT_GOAL)

ifeq ($(origin CLIENTS_DIR),undefined)
CLIENTS_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
endif
OUTPUT ?= .

CLIENT_PROGS := $(OUTPUT)/xray_client $(OUTPUT)/absl_client

XRAY_CC ?= clang-14
CLIENTS_CXX ?= $(if $(CXX),$(CXX),g++)
CLIENTS_PKG_CONFIG ?= pkg-config
CLIENTS_WARN := -Wall -Wextra -Werror

# -fxray-instrument at link time makes the clang driver pull in the X-Ray
# runtime (libclang_rt.xray, -xray-basic, -xray-fdr as whole archives) plus
# the libraries it needs; -fxray-instruction-threshold=1 instruments every
# function, however small.
XRAY_CFLAGS ?= -O1 -g
XRAY_FLAGS := -fxray-instrument -fxray-instruction-threshold=1

# NominalCPUFrequency() lives in libabsl_base (Debian: libabsl20220623,
# libabsl_base.so.20220623).  By default the client links the shared
# libraries, so the machine running it needs libabsl20220623; with
# ABSL_STATIC=1 the Abseil libraries (libabsl-dev ships the .a files too) are
# linked statically instead and only libstdc++/libc remain shared.
ABSL_CXXFLAGS ?= -O2 -g -std=c++17
ABSL_STATIC ?= 0
ABSL_PKG_CFLAGS = $(shell $(CLIENTS_PKG_CONFIG) --cflags absl_base)
ABSL_PKG_LIBS_SHARED = $(shell $(CLIENTS_PKG_CONFIG) --libs absl_base)
ifeq ($(ABSL_STATIC),1)
ABSL_PKG_LIBS = $(patsubst -labsl_%,-l:libabsl_%.a,$(ABSL_PKG_LIBS_SHARED))
else
ABSL_PKG_LIBS = $(ABSL_PKG_LIBS_SHARED)
endif

$(OUTPUT)/xray_client: $(CLIENTS_DIR)/xray_client.c $(CLIENTS_DIR)/clients.mk
	@mkdir -p $(@D)
	$(XRAY_CC) $(CLIENTS_WARN) $(XRAY_CFLAGS) $(XRAY_FLAGS) -o $@ $<

$(OUTPUT)/absl_client: $(CLIENTS_DIR)/absl_client.cc $(CLIENTS_DIR)/clients.mk
	@mkdir -p $(@D)
	$(CLIENTS_CXX) $(CLIENTS_WARN) $(ABSL_CXXFLAGS) $(ABSL_PKG_CFLAGS) -o $@ $< $(ABSL_PKG_LIBS)

EXTRA_CLEAN += $(CLIENT_PROGS)

.DEFAULT_GOAL := $(_clients_saved_default_goal)
