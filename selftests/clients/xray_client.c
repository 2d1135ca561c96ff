// SPDX-License-Identifier: GPL-2.0
/*
 * xray_client - a tiny program instrumented with LLVM X-Ray.
 *
 * Built with: clang-14 -fxray-instrument -fxray-instruction-threshold=1
 *
 * Run it with
 *   XRAY_OPTIONS="patch_premain=true xray_mode=xray-basic \
 *                 xray_logfile_base=<dir>/xray-log."
 * and the X-Ray basic-mode runtime writes <dir>/xray-log.xray_client.XXXXXX.
 * The log starts with a 32-byte XRayFileHeader whose u64 CycleFrequency
 * (byte offset 8) is what the runtime learnt about the TSC rate: on Linux it
 * reads /sys/devices/system/cpu/cpu0/tsc_freq_khz (then
 * cpufreq/cpuinfo_max_freq) and multiplies by 1000.  When it cannot, it
 * prints "Unable to determine CPU frequency for TSC accounting." on stderr
 * and falls back to clock_gettime() with CycleFrequency = 1000000000.
 *
 * X-Ray also requires RDTSCP (CPUID 0x80000001, EDX bit 27) before it uses
 * the TSC at all, so this program reports that bit on stdout ("rdtscp=0|1")
 * for the test to decide what to expect.
 */
#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEVER_INSTRUMENT __attribute__((xray_never_instrument))

static NEVER_INSTRUMENT int have_rdtscp(void)
{
	unsigned int eax, ebx, ecx, edx;

	if (!__get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx))
		return 0;
	return !!(edx & (1u << 27));
}

static __attribute__((noinline)) unsigned long fib(unsigned int n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static __attribute__((noinline)) unsigned long hash_str(const char *s)
{
	unsigned long h = 5381;

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h;
}

static __attribute__((noinline)) unsigned long sum_squares(unsigned long n)
{
	unsigned long i, acc = 0;

	for (i = 0; i < n; i++)
		acc += i * i;
	return acc;
}

static __attribute__((noinline)) unsigned long work(int argc, char **argv)
{
	unsigned long acc = fib(12);
	int i;

	for (i = 0; i < argc; i++)
		acc ^= hash_str(argv[i]);
	acc += sum_squares(100000);
	return acc;
}

int main(int argc, char **argv)
{
	unsigned long result = work(argc, argv);

	printf("rdtscp=%d\n", have_rdtscp());
	printf("result=%lu\n", result);
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
