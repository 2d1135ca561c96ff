// SPDX-License-Identifier: GPL-2.0
/*
 * Helper for run_tests.sh in a QEMU guest: hold open, for this thread,
 * the perf events tsc-jitter counts (the tool's own list,
 * jitter_causes.c), until SIGTERM or SIGINT (run_tests.sh sends neither:
 * the guest powers off with it).  While one of each is open
 * the kernel's static keys behind them stay on (each tracepoint's, perf's
 * per-software-event ones, its scheduler hooks'), so the runs of
 * tsc-jitter in between open and close theirs without patching the
 * kernel's text.
 *
 * Why: the kernel patches a key's sites live, int3 first, then the new
 * bytes, with an IPI to every CPU between; under QEMU's multi-threaded
 * TCG a vCPU can still take that int3 once the patch is complete, and the
 * kernel, no longer patching, oopses.  tsc-jitter's tests open and close
 * the page-fault event hundreds of times while the other vCPU faults:
 * three guests of one make check died at do_user_addr_fault+0xc5 (7.3, 2
 * vCPUs, 2026-11-28).  Hardware does not do this; the tests, whose
 * counters are per-thread, count the same with the keys held.
 *
 * Prints one line once the events are open (what could not be, too), then
 * sleeps.  Exit: 0 on the signal, 1 if nothing could be opened.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "jitter_causes.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct jc_counters c;
	char missing[512];
	sigset_t block, old;

	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	/*
	 * Blocked until sigsuspend(), which takes them whatever mask this
	 * process inherited: a signal before it is not lost.
	 */
	sigprocmask(SIG_BLOCK, &block, &old);
	sigdelset(&old, SIGTERM);
	sigdelset(&old, SIGINT);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	jc_open(&c, 0, 1, 1, 0);
	if (!c.nr) {
		printf("perf_keys_hold: no event opened: %s\n", jc_missing(&c, missing, sizeof(missing)));
		return 1;
	}
	printf("perf_keys_hold: %u events held open; not: %s\n", c.nr,
	       jc_missing(&c, missing, sizeof(missing)));
	fflush(stdout);
	while (!stop)
		sigsuspend(&old);
	jc_close(&c);
	return 0;
}
