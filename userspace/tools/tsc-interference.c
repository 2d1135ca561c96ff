// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * tsc-interference: what does running something alongside cost my work?
 *
 * A counting loop of fixed duration (TSC time) on a pinned CPU, repeated:
 * how many iterations fit.  First without anything else (the baseline),
 * then with a command running alongside, then the baseline again, so that
 * a machine that drifts shows.  The share of iterations lost is the cost.
 * With --sweep, the command is a template whose "{}" takes each value in
 * turn: the classic table of sampling overhead against frequency, e.g.
 *
 *   tsc-interference --sweep 100,1000,4000 -- perf record -F {} -a -o /dev/null
 *
 * Each unit of work is a chain of 64 dependent register adds, so the
 * count measures the core's cycles, not memory; the TSC is read once per
 * unit, ordered.
 *
 * Exit status: 0 done, 2 usage, 3 failure.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "libtsc.h"

#define MAX_VALUES	64
#define MAX_RUNS	100

static const char usage[] =
"Usage: tsc-interference [--cpu N] [--seconds S] [--runs N] [--json]\n"
"                        [--sweep V1,V2,...] [-- COMMAND [ARG]...]\n"
"Count how much work fits in fixed time on CPU N, alone and with COMMAND\n"
"running alongside; with --sweep, once per value, put for {} in COMMAND.\n"
"\n"
"  --cpu N       the CPU to count on (default: the first this process may use)\n"
"  --seconds S   one count's length, 0.01 to 60 (default 1)\n"
"  --runs N      counts per case, 1 to 100 (default 5); the median is used\n"
"  --sweep LIST  values for {} in COMMAND, comma-separated, no spaces\n"
"  --json        JSON, as tsc-interference.schema.json describes\n"
"  -h, --help    this text;  -V, --version  the version\n";

/* One unit: 64 dependent register adds; the compiler cannot skip them. */
static inline void unit(void)
{
	uint64_t a = 0;

	__asm__ __volatile__(".rept 64\nadd %1, %0\n.endr\n" : "+r"(a) : "r"(1ull));
}

static uint64_t count_for(uint64_t ticks)
{
	uint64_t n = 0, end = tsc_rdtsc_ordered() + ticks;

	do {
		unit();
		n++;
	} while ((int64_t)(tsc_rdtsc_ordered() - end) < 0);
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

struct result {
	uint64_t median, min, max;
};

static struct result measure(uint64_t ticks, unsigned int runs)
{
	uint64_t n[MAX_RUNS];

	if (runs < 1 || runs > MAX_RUNS)	/* --runs keeps it within */
		return (struct result){ 0 };
	for (unsigned int r = 0; r < runs; r++)
		n[r] = count_for(ticks);
	qsort(n, runs, sizeof(n[0]), cmp_u64);
	return (struct result){ n[runs / 2], n[0], n[runs - 1] };
}

static void free_argv(char **argv)
{
	for (char **a = argv; a && *a; a++)
		free(*a);
	free(argv);
}

/* arg with every "{}" replaced by value, as GNU find -exec does; NULL if out of memory. */
static char *fill(const char *arg, const char *value)
{
	size_t n = 0;
	char *out, *o;

	for (const char *at = strstr(arg, "{}"); at; at = strstr(at + 2, "{}"))
		n++;
	out = malloc(strlen(arg) - 2 * n + n * strlen(value) + 1);
	for (o = out; out && *arg;) {
		if (arg[0] == '{' && arg[1] == '}') {
			o = stpcpy(o, value);
			arg += 2;
		} else {
			*o++ = *arg++;
		}
	}
	if (out)
		*o = '\0';
	return out;
}

/*
 * The command with every "{}" replaced by value (NULL: as it is); NULL
 * if out of memory, or if there is no command.
 */
static char **expand(char **cmd, int argc, const char *value)
{
	char **out;

	if (argc < 1)
		return NULL;
	out = calloc((size_t)argc + 1, sizeof(*out));
	for (int i = 0; out && i < argc; i++) {
		out[i] = value ? fill(cmd[i], value) : strdup(cmd[i]);
		if (!out[i]) {
			free_argv(out);
			out = NULL;
		}
	}
	return out;
}

/*
 * The command's process group while it runs, for the handler below: in
 * a group of its own it hears no Ctrl-C from the terminal, and a
 * tsc-interference killed meanwhile would leave it running (a perf
 * record -a, say) with nobody to stop it.
 */
static volatile sig_atomic_t command_group;

/* Pass the signal on to the command's group, then die of it as before. */
static void pass_on(int sig)
{
	pid_t group = command_group;

	if (group > 0)
		kill(-group, sig);
	cli_die_of(sig);
}

/*
 * Start cmd in its own process group, so that stopping it stops all.
 * The signals above wait until command_group names it.
 */
static pid_t start(char **argv)
{
	sigset_t fatal, old;
	pid_t pid;

	cli_fatal_signals(&fatal);
	sigprocmask(SIG_BLOCK, &fatal, &old);
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		/* exec keeps the mask; the handlers it resets. */
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[0], argv);
		fprintf(stderr, "tsc-interference: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (pid > 0) {
		setpgid(pid, pid);
		command_group = pid;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return pid;
}

/* Reap the command, no longer to be signalled: its pid may be reused. */
static void reap(pid_t pid, int *status)
{
	command_group = 0;
	waitpid(pid, status, 0);
}

/*
 * Whether the command ended by itself: then *status is its exit status,
 * or 128 and the signal that ended it, what is left of its process group
 * is killed, and it is reaped.  Looked at without reaping (WNOWAIT): the
 * zombie keeps its pid, so that the group killed is still its own.
 */
static bool ended(pid_t pid, int *status)
{
	siginfo_t info = { 0 };

	if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) || info.si_pid != pid)
		return false;
	*status = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
	kill(-pid, SIGKILL);
	reap(pid, NULL);
	return true;
}

/* SIGINT first (perf writes its data then), SIGKILL after 2 s. */
static int stop(pid_t pid)
{
	siginfo_t info = { 0 };
	int status = 0;

	kill(-pid, SIGINT);
	for (int i = 0; i < 200; i++) {
		struct timespec ms10 = { 0, 10000000 };

		/* Not reaped yet (WNOWAIT): a signal still goes to its group. */
		if (!waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) &&
		    info.si_pid == pid)
			break;
		nanosleep(&ms10, NULL);
	}
	if (info.si_pid != pid)
		kill(-pid, SIGKILL);
	reap(pid, &status);
	return status;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "cpu", required_argument, NULL, 'c' },
		{ "seconds", required_argument, NULL, 's' },
		{ "runs", required_argument, NULL, 'r' },
		{ "sweep", required_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t runs = 5;
	const char *cpu_arg = NULL;
	int cpu;
	double seconds = 1;
	char *sweep = NULL, *values[MAX_VALUES];
	int nvalues = 0, ncmd, opt;
	bool json = false, templated = false;
	struct result before, after, rows[MAX_VALUES + 1];
	TSC_CLOCK(clk);
	cpu_set_t allowed, one;
	uint64_t ticks;

	while ((opt = getopt_long(argc, argv, "+hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			cpu_arg = optarg;
			break;
		case 's':
			if (cli_parse_seconds(optarg, 0.01, 60, &seconds)) {
				fprintf(stderr, "tsc-interference: --seconds '%s': want 0.01 to 60\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'r':
			if (cli_parse_u64(optarg, 1, MAX_RUNS, &runs)) {
				fprintf(stderr, "tsc-interference: --runs '%s': want 1 to %d\n", optarg, MAX_RUNS);
				return EXIT_USAGE;
			}
			break;
		case 'w':
			sweep = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return cli_exit("tsc-interference", 0);
		case 'V':
			puts("tsc-interference " TSC_VERSION);
			return cli_exit("tsc-interference", 0);
		default:
			fputs(usage, stderr);
			return EXIT_USAGE;
		}
	}
	ncmd = argc - optind;
	for (int i = optind; i < argc; i++)
		templated |= strstr(argv[i], "{}") != NULL;
	if (sweep) {
		/* strsep, not strtok: "1,,2" has an empty value, not two. */
		for (char *p = sweep, *v; (v = strsep(&p, ","));) {
			if (nvalues == MAX_VALUES || !*v) {
				fprintf(stderr, "tsc-interference: --sweep: 1 to %d values, none empty\n",
					MAX_VALUES);
				return EXIT_USAGE;
			}
			values[nvalues++] = v;
		}
		if (!nvalues || !ncmd || !templated) {
			fprintf(stderr, "tsc-interference: --sweep needs a COMMAND with {} in it\n");
			return EXIT_USAGE;
		}
	} else if (templated) {
		fprintf(stderr, "tsc-interference: COMMAND has {} but there is no --sweep\n");
		return EXIT_USAGE;
	}
	if (cli_pick_cpu("tsc-interference", cpu_arg, &allowed, &cpu))
		return EXIT_USAGE;
	if (tsc_clock_init(&clk, NULL)) {
		fprintf(stderr, "tsc-interference: %s\n", tsc_last_error());
		return EXIT_FAIL;
	}
	/* A signal ignored where the tool started stays so: both go on (nohup). */
	cli_catch_fatal_signals(pass_on);
	/* Commands started later inherit the full mask, not ours. */
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	ticks = tsc_ns_to_ticks(&clk.conv, (uint64_t)(seconds * 1e9));

	if (sched_setaffinity(0, sizeof(one), &one)) {
		perror("tsc-interference: sched_setaffinity");
		return EXIT_FAIL;
	}
	before = measure(ticks, (unsigned int)runs);
	for (int v = 0; v < (sweep ? nvalues : ncmd ? 1 : 0); v++) {
		struct timespec settle = { 0, 200000000 };
		char **cmd;
		int status;
		pid_t pid;

		/* The command may run anywhere; the counting, only on cpu. */
		if (sched_setaffinity(0, sizeof(allowed), &allowed)) {
			perror("tsc-interference: sched_setaffinity");
			return EXIT_FAIL;
		}
		cmd = expand(argv + optind, ncmd, sweep ? values[v] : NULL);
		if (!cmd) {
			fprintf(stderr, "tsc-interference: out of memory\n");
			return EXIT_FAIL;
		}
		pid = start(cmd);
		if (pid < 0)
			perror("tsc-interference: fork");
		free_argv(cmd);
		if (pid < 0)
			return EXIT_FAIL;
		if (sched_setaffinity(0, sizeof(one), &one)) {
			perror("tsc-interference: sched_setaffinity");
			stop(pid);
			return EXIT_FAIL;
		}
		nanosleep(&settle, NULL);	/* let it get going */
		if (ended(pid, &status)) {
			fprintf(stderr, "tsc-interference: the command ended before the counting began (status %d)\n",
				status);
			return EXIT_FAIL;
		}
		rows[v] = measure(ticks, (unsigned int)runs);
		/* Counted partly without it: not its cost. */
		if (ended(pid, &status)) {
			fprintf(stderr, "tsc-interference: the command ended during the counting (status %d): its cost was not measured\n",
				status);
			return EXIT_FAIL;
		}
		stop(pid);
	}
	after = measure(ticks, (unsigned int)runs);

	{
		double base = (double)(before.median + after.median) / 2;
		/*
		 * How far the counts alone ranged: a cost smaller than that
		 * cannot be told from the machine's own noise (a vCPU the host
		 * takes away, a busy sibling hyperthread, a clock that moves).
		 */
		uint64_t lo = before.min < after.min ? before.min : after.min;
		uint64_t hi = before.max > after.max ? before.max : after.max;
		double spread = (double)(hi - lo) / base * 100;
		int nrows = sweep ? nvalues : ncmd ? 1 : 0;

		if (json) {
			printf("{\n  \"schema_version\": 1,\n  \"cpu\": %d, \"seconds\": %.3f, \"runs\": %llu,\n"
			       "  \"baseline_before\": %llu, \"baseline_after\": %llu,\n"
			       "  \"baseline_min\": %llu, \"baseline_max\": %llu, \"baseline_spread_percent\": %.3f,\n"
			       "  \"command\": ",
			       cpu, seconds, (unsigned long long)runs,
			       (unsigned long long)before.median, (unsigned long long)after.median,
			       (unsigned long long)lo, (unsigned long long)hi, spread);
			if (ncmd) {
				printf("[");
				for (int i = 0; i < ncmd; i++) {
					printf("%s", i ? ", " : "");
					cli_json_str(stdout, argv[optind + i]);
				}
				printf("]");
			} else {
				printf("null");
			}
			printf(",\n  \"rows\": [");
			for (int v = 0; v < nrows; v++) {
				printf("%s\n    {\"value\": ", v ? "," : "");
				if (sweep)
					cli_json_str(stdout, values[v]);
				else
					printf("null");
				printf(", \"iterations\": %llu, \"min\": %llu, \"max\": %llu, \"lost_percent\": %.3f}",
				       (unsigned long long)rows[v].median, (unsigned long long)rows[v].min,
				       (unsigned long long)rows[v].max,
				       (1 - (double)rows[v].median / base) * 100);
			}
			printf("\n  ]\n}\n");
			return cli_exit("tsc-interference", 0);
		}
		printf("cpu%d, %llu counts of %.3f s each (median), units of 64 dependent adds\n",
		       cpu, (unsigned long long)runs, seconds);
		printf("  %-24s %14s %9s\n", sweep ? "value" : "case", "iterations", "lost");
		printf("  %-24s %14llu %9s\n", "alone, before", (unsigned long long)before.median, "");
		for (int v = 0; v < nrows; v++)
			printf("  %-24s %14llu %8.2f%%\n", sweep ? values[v] : "with the command",
			       (unsigned long long)rows[v].median,
			       (1 - (double)rows[v].median / base) * 100);
		printf("  %-24s %14llu %8.2f%%   (drift of the baseline)\n", "alone, after",
		       (unsigned long long)after.median,
		       (1 - (double)after.median / (double)before.median) * 100);
		printf("The counts alone ranged over %.2f%% of the baseline: a smaller cost is noise.\n",
		       spread);
	}
	return cli_exit("tsc-interference", 0);
}
