/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * The mult and shift real kernels gave MONOTONIC_RAW for the tsc_khz they
 * had: what TSC_REFERENCE_KERNEL is, not what libtsc computes of it.  Each
 * from a guest's clock_page_test log line "tsc_khz K; MONOTONIC_RAW's
 * mult M, shift S" (make vm-check; the module's page holds them whole).
 * The last, a 4 MHz TSC no guest has, is __clocksource_update_freq_scale()
 * of 6.1 run by hand: its mult halved, truncated, to leave NTP room.
 */
#ifndef KERNEL_MULTS_H
#define KERNEL_MULTS_H

#include <stdint.h>

static const struct {
	uint64_t khz;
	uint32_t mult, shift;
	double units;	/* how far mult may be from exact: 0.5, 0.75 once halved */
} kernel_mults[] = {
	{ 2445409, 6860699, 24, 0.5 },		/* 6.1.0-56-amd64, 1 vCPU */
	{ 2445430, 6860640, 24, 0.5 },		/* 6.12.117+deb12-amd64, 2 vCPUs */
	{ 2445407, 6860705, 24, 0.5 },		/* 7.3.4+deb13-amd64, 2 vCPUs */
	{ 4077, 2057544272, 23, 0.75 },		/* by hand: halved once */
};

/* The tsc clocksource's rate, MONOTONIC_RAW's, in Hz. */
static inline double kernel_hz(unsigned int i)
{
	return 1e9 * (double)(1ull << kernel_mults[i].shift) / kernel_mults[i].mult;
}

#endif
