// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc-coreclock: at what clock is this core really running, and how many
 * simple instructions does it retire per cycle?
 *
 * A chain of dependent 'add src, reg' takes one core cycle per add,
 * whatever the core can do in parallel: timed with the TSC, its length
 * gives the core clock, to be compared with the TSC's (turbo, power
 * limits, a hypervisor taking time).  Then 2, 4 and 8 independent chains of
 * the same total length: adds per core cycle is the sustained IPC, whose
 * plateau is the issue width for simple ALU ops.
 *
 * Not 'add $1, reg' nor 'lea 1(reg), reg': recent cores fold immediates
 * into the register renamer, and such chains ran at "24 GHz" on this
 * project's Xeon.  A chain of 'imul src, reg', three cycles on every x86
 * core since the Pentium Pro, cross-checks the clock.
 *
 * The pitfalls, handled:
 *  - the chains are inline assembly (.rept), so the compiler can neither
 *    reorder nor fold them;
 *  - the loop around them (dec and a fused branch) is one more chain, on
 *    other registers, 1 uop per 1024 adds; the 1-chain loop is also run
 *    at half the length, and the per-add time must not change (the
 *    "overhead" line), which shows the loop costs nothing measurable;
 *  - each timing lasts --ms of TSC time (default 20 ms), far above the
 *    TSC's read error, and is repeated --reps times; the median is the
 *    result and the spread is reported;
 *  - the thread is pinned to the CPU measured.
 *
 * Exit status: 0 done, 2 usage, 3 failure.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "libtsc.h"

#define EXIT_FAIL	3
#define ADDS		1024	/* adds per loop iteration, every variant */

static const char usage[] =
"Usage: tsc-coreclock [--cpu N] [--ms MS] [--reps N] [--json]\n"
"Measure the effective core clock against the TSC with a chain of dependent\n"
"adds, and the sustained instructions per cycle with independent ones.\n"
"\n"
"  --cpu N      the CPU to measure (default: the first this process may use)\n"
"  --ms MS      length of one timing, 1 to 10000 ms (default 20)\n"
"  --reps N     timings per variant, 3 to 1000 (default 15); the median wins\n"
"  --json       JSON, as tsc-coreclock.schema.json describes\n"
"  -h, --help   this text;  -V, --version  the version\n";

#define S(x) #x
#define REPT(n, body) ".rept " S(n) "\n" body ".endr\n"

/* One iteration: ADDS adds in 'chains' independent chains. */
#define CHAIN_LOOP(name, reps_expr, body)				\
static void name(uint64_t iters)					\
{									\
	uint64_t a = 0, b = 0, c = 0, d = 0, e = 0, f = 0, g = 0, h = 0; \
									\
	__asm__ __volatile__("1:\n" REPT(reps_expr, body)		\
			     "dec %[n]\n"				\
			     "jnz 1b\n"					\
			     : [n] "+r"(iters), "+r"(a), "+r"(b), "+r"(c), \
			       "+r"(d), "+r"(e), "+r"(f), "+r"(g), "+r"(h) \
			     : [s] "r"(3ull));				\
}

CHAIN_LOOP(chain1, 1024, "add %[s], %1\n")
CHAIN_LOOP(chain1_half, 512, "add %[s], %1\n")
CHAIN_LOOP(chain2, 512, "add %[s], %1\nadd %[s], %2\n")
CHAIN_LOOP(chain4, 256, "add %[s], %1\nadd %[s], %2\nadd %[s], %3\nadd %[s], %4\n")
CHAIN_LOOP(chain8, 128, "add %[s], %1\nadd %[s], %2\nadd %[s], %3\nadd %[s], %4\n"
			"add %[s], %5\nadd %[s], %6\nadd %[s], %7\nadd %[s], %8\n")
CHAIN_LOOP(imul1, 1024, "imul %[s], %1\n")

static const struct variant {
	const char *name;
	void (*run)(uint64_t iters);
	unsigned int chains, adds;
} variants[] = {
	{ "1 chain", chain1, 1, ADDS },
	{ "1 chain, half length", chain1_half, 1, ADDS / 2 },
	{ "2 chains", chain2, 2, ADDS },
	{ "4 chains", chain4, 4, ADDS },
	{ "8 chains", chain8, 8, ADDS },
	{ "imul chain (3 cycles)", imul1, 1, ADDS },
};
#define NV (sizeof(variants) / sizeof(variants[0]))

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* ns per add, one timing of about 'ms' of TSC time. */
static double time_one(const struct tsc_clock *clk, const struct variant *v,
		       uint64_t ms)
{
	uint64_t iters = 1000, t0, t1, want = tsc_ns_to_ticks(&clk->conv, ms * 1000000);

	/* Grow until a timing is long enough, then time that. */
	for (;;) {
		t0 = tsc_rdtsc_ordered();
		v->run(iters);
		t1 = tsc_rdtsc_ordered();
		if (t1 - t0 >= want / 4 || iters > (1ull << 40))
			break;
		iters *= 2;
	}
	iters = (uint64_t)((double)iters * (double)want / (double)(t1 - t0)) + 1;
	t0 = tsc_rdtsc_ordered();
	v->run(iters);
	t1 = tsc_rdtsc_ordered();
	return (double)tsc_ticks_to_ns(&clk->conv, t1 - t0) / ((double)iters * v->adds);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "cpu", required_argument, NULL, 'c' },
		{ "ms", required_argument, NULL, 'm' },
		{ "reps", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t ms = 20, reps = 15;
	const char *cpu_arg = NULL;
	int cpu;
	double med[NV], lo[NV], hi[NV], core_hz, imul_hz, ipc[NV];
	bool json = false;
	TSC_CLOCK(clk);
	cpu_set_t allowed, one;
	int opt;

	while ((opt = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			cpu_arg = optarg;
			break;
		case 'm':
			if (cli_parse_u64(optarg, 1, 10000, &ms)) {
				fprintf(stderr, "tsc-coreclock: --ms '%s': want 1 to 10000\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'r':
			if (cli_parse_u64(optarg, 3, 1000, &reps)) {
				fprintf(stderr, "tsc-coreclock: --reps '%s': want 3 to 1000\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case 'V':
			puts("tsc-coreclock " TSC_VERSION);
			return 0;
		default:
			fputs(usage, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tsc-coreclock: unexpected argument '%s'\n%s", argv[optind], usage);
		return EXIT_USAGE;
	}
	if (cli_pick_cpu("tsc-coreclock", cpu_arg, &allowed, &cpu))
		return EXIT_USAGE;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one)) {
		perror("tsc-coreclock: sched_setaffinity");
		return EXIT_FAIL;
	}
	if (tsc_clock_init(&clk, NULL)) {
		fprintf(stderr, "tsc-coreclock: %s\n", tsc_last_error());
		return EXIT_FAIL;
	}

	{
		double (*t)[1000] = calloc(NV, sizeof(*t));
		double (*ratio)[1000] = calloc(NV, sizeof(*ratio));

		if (!t || !ratio) {
			fprintf(stderr, "tsc-coreclock: out of memory\n");
			free(t);
			free(ratio);
			return EXIT_FAIL;
		}
		/*
		 * Within each repetition the chain alternates with the other
		 * variants (A v1 A v2 ... A), and each variant is compared with
		 * the mean of the two chain timings around it; then the median
		 * of those ratios.  A core clock that drifts during the run
		 * (turbo, a busy host: 4% within 60 ms on an AMD EPYC VM) would
		 * otherwise pass for a difference between variants; a linear
		 * drift cancels, a step moves one repetition, which the median
		 * outvotes.
		 */
		for (uint64_t r = 0; r < reps; r++) {
			double before = time_one(&clk, &variants[0], ms);

			t[0][r] = before;
			ratio[0][r] = 1;
			for (size_t v = 1; v < NV; v++) {
				double after;

				t[v][r] = time_one(&clk, &variants[v], ms);
				after = time_one(&clk, &variants[0], ms);
				ratio[v][r] = (before + after) / 2 / t[v][r];
				before = after;
			}
		}
		for (size_t v = 0; v < NV; v++) {
			qsort(ratio[v], reps, sizeof(double), cmp);
			qsort(t[v], reps, sizeof(double), cmp);
			med[v] = t[v][reps / 2];
			lo[v] = t[v][0];
			hi[v] = t[v][reps - 1];
			/* Adds per cycle: the cycle (a chain add) over the time per add. */
			ipc[v] = ratio[v][reps / 2];
		}
		free(t);
		free(ratio);
	}
	/* One add per cycle along a chain: its time per add is the cycle. */
	core_hz = 1e9 / med[0];
	/* An imul takes 3 cycles: 3 x its IPC against the add chain is 1. */
	imul_hz = core_hz * 3 * ipc[NV - 1];

	if (json) {
		printf("{\n  \"schema_version\": 1,\n  \"cpu\": %d,\n  \"tsc_hz\": %.3f, \"tsc_source\": \"%s\",\n"
		       "  \"core_hz\": %.0f, \"core_to_tsc\": %.6f,\n  \"timing_ms\": %llu, \"reps\": %llu,\n"
		       "  \"loop_overhead\": %.6f, \"core_hz_by_imul\": %.0f,\n  \"variants\": [",
		       cpu, clk.freq.hz, tsc_source_name(clk.freq.source),
		       core_hz, core_hz / clk.freq.hz, (unsigned long long)ms,
		       (unsigned long long)reps, 1 / ipc[1] - 1, imul_hz);
		for (size_t v = 0; v < NV; v++)
			printf("%s\n    {\"name\": \"%s\", \"chains\": %u, \"adds_per_iteration\": %u, "
			       "\"ns_per_add\": %.6f, \"ns_per_add_min\": %.6f, \"ns_per_add_max\": %.6f, "
			       "\"ipc\": %.4f}", v ? "," : "", variants[v].name, variants[v].chains,
			       variants[v].adds, med[v], lo[v], hi[v], ipc[v]);
		printf("\n  ]\n}\n");
		return 0;
	}
	printf("cpu%d: TSC at %.3f MHz (%s); %llu timings of %llu ms per variant\n",
	       cpu, clk.freq.hz / 1e6, tsc_source_name(clk.freq.source),
	       (unsigned long long)reps, (unsigned long long)ms);
	printf("  core clock     %.1f MHz = %.3f x the TSC   (dependent adds, 1 per cycle)\n",
	       core_hz / 1e6, core_hz / clk.freq.hz);
	printf("  cross-check    %.1f MHz from the imul chain (%+.2f%%)\n", imul_hz / 1e6,
	       (imul_hz / core_hz - 1) * 100);
	printf("  loop overhead  %+.2f%% per add at half the chain length\n",
	       (1 / ipc[1] - 1) * 100);
	printf("  %-22s %10s %10s %10s %8s\n", "variant", "ns/add", "min", "max", "IPC");
	for (size_t v = 0; v < NV; v++)
		printf("  %-22s %10.4f %10.4f %10.4f %8.2f\n", variants[v].name, med[v], lo[v],
		       hi[v], ipc[v]);
	printf("  sustained width (simple ALU ops per cycle): %.2f\n", ipc[NV - 2]);
	return 0;
}
