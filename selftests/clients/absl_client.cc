// SPDX-License-Identifier: GPL-2.0
/*
 * absl_client - print Abseil's idea of the CPU (TSC) frequency.
 *
 * absl::base_internal::NominalCPUFrequency() (libabsl_base) returns, on
 * x86-64 Linux, /sys/devices/system/cpu/cpu0/tsc_freq_khz * 1e3 when that
 * file holds a decimal number followed by '\n' or NUL; otherwise it measures
 * the TSC against CLOCK_MONOTONIC_RAW with nanosleep() for up to 8 rounds.
 *
 * Output (one "key value" per line):
 *   raw <value printed with %.17g>
 *   int <value as an exact decimal integer>   or   int none
 *   elapsed_ns <time the first call took>
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "absl/base/internal/sysinfo.h"

static long long now_ns()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

int main()
{
	long long t0 = now_ns();
	double freq = absl::base_internal::NominalCPUFrequency();
	long long t1 = now_ns();

	std::printf("raw %.17g\n", freq);
	// 2^53: every integer below it is exactly representable, so "%.0f"
	// prints the exact value and no rounding can hide a mismatch.
	if (std::isfinite(freq) && freq >= 0 && freq < 9007199254740992.0 &&
	    std::floor(freq) == freq)
		std::printf("int %.0f\n", freq);
	else
		std::printf("int none\n");
	std::printf("elapsed_ns %lld\n", t1 - t0);
	return std::fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
