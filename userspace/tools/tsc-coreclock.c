// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc-coreclock: at what clock is this core really running, and how many
 * simple instructions does it retire per cycle?
 *
 * A chain of dependent 'add src, reg' takes one core cycle per add,
 * whatever the core can do in parallel: timed with the TSC, its length
 * gives the core clock, to be compared with the TSC's (turbo, power
 * limits, a hypervisor taking time).  Then 2, 4, 8, 10 and 12 independent
 * chains of the same total length: adds per core cycle, whose plateau is
 * reached at 10 and 12 chains (within 5%).  The integer ALU count itself
 * comes from compares, which write only the flags, so that no op waits
 * for another: on an AMD EPYC (Zen 5, six ALUs) 8 to 12 chains of adds
 * gave 5.2-5.4 adds per cycle (5.1-5.2 with 24 adds per iteration),
 * while 12 registers compared (3 bytes each, as the adds), or an andn
 * writing a register that nothing in the loop reads, gave 6.0.  So
 * neither the front end nor the ALU count was the limit there: dependent
 * adds do not keep every ALU busy, whatever the reason inside the core,
 * and the chains' plateau is a figure of its own.
 *
 * Twelve chains, not eight: with as many chains as ALUs or a few more,
 * the ports' schedulers leave some idle.  On an Intel Xeon with five ALUs
 * (Emerald Rapids class), 6, 8, 10 and 12 chains gave 3.9, 4.7, 4.95 and
 * 4.98 adds per cycle, the same with 24 adds per iteration as with 6144;
 * the size of the loop body was not the limit.  It is beyond the L1i: 12
 * chains in 36 KB and more fell to 4.2-4.3.  So the front end gets figures
 * of its own: nops per cycle (rename and allocation, with no ALU to wait
 * for) and adds per cycle from a body past the L1i (fetch and decode).
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
 *    another register, 1 uop per 1020 adds or more; the 1-chain loop is
 *    also run at half the length, and the per-add time must not change
 *    (the "overhead" line), which shows the loop costs nothing measurable;
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
#include "coreclock_calc.h"
#include "libtsc.h"

#define MAX_REPS	1000	/* --reps at most: the rows of timings */

static const char usage[] =
"Usage: tsc-coreclock [--cpu N] [--ms MS] [--reps N] [--json]\n"
"Measure the effective core clock against the TSC with a chain of dependent\n"
"adds, the integer ALUs with independent compares, independent chains of adds,\n"
"and the front end's width.\n"
"\n"
"  --cpu N      the CPU to measure (default: the first this process may use)\n"
"  --ms MS      length of one timing, 1 to 10000 ms (default 20)\n"
"  --reps N     timings per variant, 3 to 1000 (default 15); the median wins\n"
"  --json       JSON, as tsc-coreclock.schema.json describes\n"
"  -h, --help   this text;  -V, --version  the version\n";

#define S(x) #x
#define REPT(n, body) ".rept " S(n) "\n" body ".endr\n"

/*
 * One iteration: 'reps' copies of 'body', in registers named outright
 * (the source in rsi, the chains in the thirteen others clobbered), so
 * that twelve chains fit beside the counter, a frame pointer and the
 * stack pointer.  Their values do not matter, only the dependences.
 */
#define LOOP(name, reps, body)						\
static void name(uint64_t iters)					\
{									\
	__asm__ __volatile__("mov $3, %%rsi\n"				\
			     "1:\n" REPT(reps, body)			\
			     "dec %[n]\n"				\
			     "jnz 1b\n"					\
			     : [n] "+r"(iters)				\
			     :						\
			     : "rax", "rbx", "rcx", "rdx", "rsi", "rdi",	\
			       "r8", "r9", "r10", "r11", "r12", "r13", "r14", \
			       "cc");					\
}

#define ADD(r)	"add %%rsi, %%" #r "\n"
#define ADD4	ADD(rax) ADD(rbx) ADD(rcx) ADD(rdx)
#define ADD8	ADD4 ADD(rdi) ADD(r8) ADD(r9) ADD(r10)
#define ADD12	ADD8 ADD(r11) ADD(r12) ADD(r13) ADD(r14)
#define CMP(r)	"cmp %%rsi, %%" #r "\n"
#define CMP12	CMP(rax) CMP(rbx) CMP(rcx) CMP(rdx) CMP(rdi) CMP(r8) CMP(r9) \
		CMP(r10) CMP(r11) CMP(r12) CMP(r13) CMP(r14)

LOOP(chain1, 1024, ADD(rax))
LOOP(chain1_half, 512, ADD(rax))
LOOP(chain2, 512, ADD(rax) ADD(rbx))
LOOP(chain4, 256, ADD4)
LOOP(chain8, 128, ADD8)
LOOP(chain10, 102, ADD8 ADD(r11) ADD(r12))
LOOP(chain12, 85, ADD12)
LOOP(compares, 85, CMP12)
LOOP(imul1, 1024, "imul %%rsi, %%rax\n")
LOOP(nops, 1024, "nop\n")
/* 16380 adds of 3 bytes: 48 KB, past the 32 KB L1i of both vendors' cores. */
LOOP(chain12_cold, 1365, ADD12)

static const struct variant {
	struct cc_variant v;
	void (*run)(uint64_t iters);
} variants[] = {
	{ { "1 chain", CC_CHAIN, 1, 1024 }, chain1 },
	{ { "1 chain, half length", CC_HALF, 1, 512 }, chain1_half },
	{ { "2 chains", CC_CHAINS, 2, 1024 }, chain2 },
	{ { "4 chains", CC_CHAINS, 4, 1024 }, chain4 },
	{ { "8 chains", CC_CHAINS, 8, 1024 }, chain8 },
	{ { "10 chains", CC_CHAINS, 10, 1020 }, chain10 },
	{ { "12 chains", CC_CHAINS, 12, 1020 }, chain12 },
	{ { "imul chain (3 cycles)", CC_IMUL, 1, 1024 }, imul1 },
	{ { "nops", CC_NOPS, 1, 1024 }, nops },
	{ { "12 chains, 48 KB body", CC_COLD, 12, 16380 }, chain12_cold },
	/* Last: JSON readers may index the variants above by position. */
	{ { "compares, no chain", CC_COMPARES, 12, 1020 }, compares },
};
#define NV (sizeof(variants) / sizeof(variants[0]))

/* What time_one() needs besides the variant. */
struct timing {
	const struct tsc_clock *clk;
	uint64_t ms;
};

/* ns per op of variant v, one timing of about 'ms' of TSC time. */
static double time_one(size_t v, void *ctx)
{
	const struct timing *tm = ctx;
	uint64_t iters = 100, t0, t1;
	uint64_t want = tsc_ns_to_ticks(&tm->clk->conv, tm->ms * 1000000);

	/* Grow until a timing is long enough, then time that. */
	for (;;) {
		t0 = tsc_rdtsc_ordered();
		variants[v].run(iters);
		t1 = tsc_rdtsc_ordered();
		if (t1 - t0 >= want / 4 || iters > (1ull << 40))
			break;
		iters *= 2;
	}
	iters = (uint64_t)((double)iters * (double)want / (double)(t1 - t0)) + 1;
	t0 = tsc_rdtsc_ordered();
	variants[v].run(iters);
	t1 = tsc_rdtsc_ordered();
	return (double)tsc_ticks_to_ns(&tm->clk->conv, t1 - t0) /
	       ((double)iters * variants[v].v.ops);
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
	double med[NV], lo[NV], hi[NV], ipc[NV];
	struct cc_result res;
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
			if (cli_parse_u64(optarg, 3, MAX_REPS, &reps)) {
				fprintf(stderr, "tsc-coreclock: --reps '%s': want 3 to 1000\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return cli_exit("tsc-coreclock", 0);
		case 'V':
			puts("tsc-coreclock " TSC_VERSION);
			return cli_exit("tsc-coreclock", 0);
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
		double (*t)[MAX_REPS] = calloc(NV, sizeof(*t));
		double (*ratio)[MAX_REPS] = calloc(NV, sizeof(*ratio));
		struct timing tm = { &clk, ms };
		struct cc_variant vars[NV];

		if (!t || !ratio) {
			fprintf(stderr, "tsc-coreclock: out of memory\n");
			free(t);
			free(ratio);
			return EXIT_FAIL;
		}
		for (uint64_t r = 0; r < reps; r++)
			cc_repetition(NV, time_one, &tm, &t[0][r], &ratio[0][r], MAX_REPS);
		/* The median of the ratios: a clock step moves one repetition's. */
		for (size_t v = 0; v < NV; v++) {
			ipc[v] = cc_median(ratio[v], reps);
			med[v] = cc_median(t[v], reps);
			lo[v] = t[v][0];
			hi[v] = t[v][reps - 1];
			vars[v] = variants[v].v;
		}
		free(t);
		free(ratio);
		cc_conclude(vars, NV, ipc, med[0], &res);
	}

	if (json) {
		printf("{\n  \"schema_version\": 1,\n  \"cpu\": %d,\n  \"tsc_hz\": %.3f, \"tsc_source\": \"%s\",\n"
		       "  \"core_hz\": %.0f, \"core_to_tsc\": %.6f,\n  \"timing_ms\": %llu, \"reps\": %llu,\n"
		       "  \"loop_overhead\": %.6f, \"core_hz_by_imul\": %.0f,\n"
		       "  \"alu_width\": %.4f,\n"
		       "  \"width\": %.4f, \"width_chains\": %u, \"width_plateau\": %s,\n"
		       "  \"nops_per_cycle\": %.4f, \"cold_width\": %.4f,\n  \"variants\": [",
		       cpu, clk.freq.hz, tsc_source_name(clk.freq.source),
		       res.core_hz, res.core_hz / clk.freq.hz, (unsigned long long)ms,
		       (unsigned long long)reps, res.overhead, res.imul_hz, res.alu_width,
		       res.width, res.width_chains, res.plateau ? "true" : "false",
		       res.nops_per_cycle, res.cold_width);
		for (size_t v = 0; v < NV; v++)
			printf("%s\n    {\"name\": \"%s\", \"chains\": %u, \"adds_per_iteration\": %u, "
			       "\"ns_per_add\": %.6f, \"ns_per_add_min\": %.6f, \"ns_per_add_max\": %.6f, "
			       "\"ipc\": %.4f}", v ? "," : "", variants[v].v.name, variants[v].v.chains,
			       variants[v].v.ops, med[v], lo[v], hi[v], ipc[v]);
		printf("\n  ]\n}\n");
		return cli_exit("tsc-coreclock", 0);
	}
	printf("cpu%d: TSC at %.3f MHz (%s); %llu timings of %llu ms per variant\n",
	       cpu, clk.freq.hz / 1e6, tsc_source_name(clk.freq.source),
	       (unsigned long long)reps, (unsigned long long)ms);
	printf("  core clock     %.1f MHz = %.3f x the TSC   (dependent adds, 1 per cycle)\n",
	       res.core_hz / 1e6, res.core_hz / clk.freq.hz);
	printf("  cross-check    %.1f MHz from the imul chain (%+.2f%%)\n", res.imul_hz / 1e6,
	       (res.imul_hz / res.core_hz - 1) * 100);
	printf("  loop overhead  %+.2f%% per add at half the chain length\n", res.overhead * 100);
	printf("  %-22s %10s %10s %10s %8s\n", "variant", "ns/op", "min", "max", "IPC");
	for (size_t v = 0; v < NV; v++)
		printf("  %-22s %10.4f %10.4f %10.4f %8.2f\n", variants[v].v.name, med[v], lo[v],
		       hi[v], ipc[v]);
	printf("  integer ALUs   %.2f compares per cycle (none waits for another)\n",
	       res.alu_width);
	printf("  chains         %.2f adds per cycle, from %u chains%s\n", res.width,
	       res.width_chains, res.plateau ? " (dependent adds)" :
	       " (still rising with the most chains: there may be more)");
	printf("  front end      %.2f nops per cycle (rename and allocation, no ALU needed)\n",
	       res.nops_per_cycle);
	printf("                 %.2f adds per cycle from a body past the L1i (fetch and decode)\n",
	       res.cold_width);
	return cli_exit("tsc-coreclock", 0);
}
