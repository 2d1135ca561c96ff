// SPDX-License-Identifier: GPL-2.0
/*
 * A busy-poll thread as low-latency setups run one: SCHED_FIFO, pinned to
 * one CPU, never sleeping.  With RT throttling off nothing of lower
 * priority runs on that CPU again, kworkers included.
 *
 * Usage: rt_spinner CPU [NEXT_CPU]   (root; stop it with SIGKILL)
 *
 * It prints "spinning on cpuN" on stdout each time it starts to spin on a
 * CPU.  On SIGUSR1 it moves to NEXT_CPU and owns that one instead.  When
 * its CPU goes offline the kernel moves it elsewhere; spinning there would
 * starve that CPU, so it sleeps 1 ms at a time instead until it can pin
 * itself to its CPU again, and spins there once that CPU is back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t move;

static void on_usr1(int sig)
{
	(void)sig;
	move = 1;
}

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

int main(int argc, char **argv)
{
	struct timespec ms = { .tv_nsec = 1000000 };
	struct sched_param sp = { .sched_priority = 50 };
	int cpu, next = -1, announced = 0;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: rt_spinner CPU [NEXT_CPU]\n");
		return 2;
	}
	cpu = atoi(argv[1]);
	if (argc == 3) {
		next = atoi(argv[2]);
		signal(SIGUSR1, on_usr1);
	}
	/*
	 * Real-time first, then onto the CPU: arriving there as an ordinary
	 * task, it would wait behind whatever kernel thread runs there.
	 */
	if (sched_setscheduler(0, SCHED_FIFO, &sp)) {
		fprintf(stderr, "rt_spinner: SCHED_FIFO %d: %s\n",
			sp.sched_priority, strerror(errno));
		return 1;
	}
	if (pin(cpu)) {
		fprintf(stderr, "rt_spinner: cpu%d: %s\n", cpu, strerror(errno));
		return 1;
	}
	for (;;) {
		if (move && next >= 0) {
			move = 0;
			cpu = next;
			announced = 0;
			if (pin(cpu)) {
				fprintf(stderr, "rt_spinner: cpu%d: %s\n", cpu, strerror(errno));
				return 1;
			}
		}
		if (sched_getcpu() == cpu) {
			if (!announced) {
				announced = 1;
				printf("spinning on cpu%d\n", cpu);
				fflush(stdout);
			}
			continue;
		}
		/* Moved off its CPU: do not starve another one. */
		nanosleep(&ms, NULL);
		pin(cpu);
	}
}
