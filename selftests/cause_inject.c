// SPDX-License-Identifier: GPL-2.0
/*
 * Helper for jitter_causes_test.sh: from the CPU it runs on, inject one
 * cause of interruption at a time into CPU 'target', where tsc-jitter
 * spins, without running anything there:
 *
 *  timer    a sampling cpu-clock perf event bound to 'target': a pinned
 *           hrtimer there, re-armed by the kernel, RATE times a second;
 *           its expiries counted as the samples it wrote (a vCPU that
 *           stalled misses periods, which the kernel skips when it
 *           re-arms: they are no interruption);
 *  ipi      a counting cpu-clock event bound to 'target', read RATE times
 *           a second from here: each read() of an event active on another
 *           CPU is a function-call IPI to it (perf_event_read());
 *  softirq  RPS on the loopback device steering to 'target', and UDP
 *           datagrams to a socket of ours: each is taken off the backlog
 *           by 'target''s NET_RX softirq (raised by an RPS IPI), and the
 *           next is sent only once it has come through.
 *
 * It starts after DELAY_MS, injects for SECONDS or until SIGINT or
 * SIGTERM, restores what it changed (the loopback's rps_cpus), and prints
 * how many it injected.
 *
 * Usage: cause_inject timer|ipi|softirq TARGET RATE SECONDS DELAY_MS
 * Exit: 0 done, 1 failure, 2 usage, 4 not possible here (a skip).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RPS "/sys/class/net/lo/queues/rx-0/rps_cpus"

/* SIGINT or SIGTERM: stop injecting, restore, report. */
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	nanosleep(&ts, NULL);
}

static int cpu_clock(int target, uint64_t period_ns)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = period_ns,
		.sample_type = PERF_SAMPLE_TIME,
	};
	int fd = (int)syscall(SYS_perf_event_open, &attr, -1, target, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0)
		fprintf(stderr, "cause_inject: perf_event_open(cpu-clock on cpu%d): %s\n", target,
			strerror(errno));
	return fd;
}

/*
 * The ring buffer of a sampling event, for 'records' samples of
 * PERF_SAMPLE_TIME (16 bytes) with room to spare: it is read once, at
 * the end, and a sample that found it full would be counted only in a
 * PERF_RECORD_LOST written once there is room again, which is never.
 */
static void *ring_map(int fd, double records, size_t *data_size)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t pages = 1;
	void *ring;

	while ((double)pages * (double)page < records * 16 * 2)
		pages *= 2;
	ring = mmap(NULL, (pages + 1) * (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ring == MAP_FAILED) {
		perror("cause_inject: mmap of the event's ring buffer");
		return NULL;
	}
	*data_size = pages * (size_t)page;
	return ring;
}

/*
 * The samples in the ring buffer, and those lost; -1 if it filled up
 * (then some lost ones are in no record).
 */
static long ring_samples(void *ring, size_t data_size)
{
	struct perf_event_mmap_page *meta = ring;
	const char *data = (const char *)ring + meta->data_offset;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE), at;
	long n = 0;

	if (head + 64 > data_size) {
		fprintf(stderr, "cause_inject: the event's ring buffer filled up (%llu of %zu bytes)\n",
			(unsigned long long)head, data_size);
		return -1;
	}
	for (at = 0; at < head;) {
		const struct perf_event_header *h = (const void *)(data + at);

		if (h->type == PERF_RECORD_SAMPLE)
			n++;
		else if (h->type == PERF_RECORD_LOST)
			n += (long)((const uint64_t *)(h + 1))[1];
		if (!h->size)
			break;
		at += h->size;
	}
	return n;
}

/* A file's first line into buf (newline dropped); 0 or -1. */
static int read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	int ret = f && fgets(buf, (int)size, f) ? 0 : -1;

	if (f)
		fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return ret;
}

static int write_str(const char *path, const char *s)
{
	FILE *f = fopen(path, "we");
	int ret;

	if (!f)
		return -1;
	ret = fputs(s, f) < 0 ? -1 : 0;
	return fclose(f) || ret ? -1 : 0;
}

/* A socket bound to 127.0.0.1 on a port of the kernel's choosing, and a sender to it. */
static int udp_pair(int *rx, int *tx)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	*rx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	*tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (*rx < 0 || *tx < 0 || bind(*rx, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(*rx, (struct sockaddr *)&a, &len) ||
	    connect(*tx, (struct sockaddr *)&a, sizeof(a))) {
		fprintf(stderr, "cause_inject: a loopback UDP socket: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Wait, up to 100 ms, until the datagram just sent has come through
 * 'target''s softirq to our socket.  Only then is the next one sent: one
 * sent while the last is still on the backlog joins it, with no IPI and
 * no softirq of its own, and would be one injection counted twice.  A
 * late vCPU makes that common under emulation.
 */
static bool received(int rx)
{
	struct pollfd p = { .fd = rx, .events = POLLIN };
	char buf[64];

	if (poll(&p, 1, 100) != 1)
		return false;
	while (recv(rx, buf, sizeof(buf), 0) > 0)
		;
	return true;
}

int main(int argc, char **argv)
{
	char old_rps[64] = "", mask[32];
	double rate, seconds, delay_ms, t0, next;
	int target, fd = -1, rx = -1, tx = -1;
	unsigned long n = 0;
	const char *mode;

	if (argc != 6 || (target = atoi(argv[2])) < 0 || (rate = atof(argv[3])) <= 0 ||
	    (seconds = atof(argv[4])) <= 0 || (delay_ms = atof(argv[5])) < 0) {
		fprintf(stderr, "usage: cause_inject timer|ipi|softirq TARGET RATE SECONDS DELAY_MS\n");
		return 2;
	}
	mode = argv[1];
	{
		struct sigaction sa = { .sa_handler = on_signal };

		/* No SA_RESTART: a sleep ends at the signal. */
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	sleep_s(delay_ms / 1e3);
	t0 = now_s();
	if (!strcmp(mode, "timer")) {
		size_t size;
		void *ring;
		long samples;

		/* The kernel re-arms the hrtimer on 'target': nothing to do but wait. */
		fd = cpu_clock(target, (uint64_t)(1e9 / rate));
		if (fd < 0)
			return 4;
		ring = ring_map(fd, rate * (seconds + 1), &size);
		if (!ring)
			return 1;
		sleep_s(seconds);
		close(fd);
		samples = ring_samples(ring, size);
		if (samples < 0)
			return 1;
		n = (unsigned long)samples;
	} else if (!strcmp(mode, "ipi")) {
		uint64_t count;

		fd = cpu_clock(target, 0);
		if (fd < 0)
			return 4;
		for (next = t0; !stop && now_s() < t0 + seconds; next += 1 / rate) {
			if (read(fd, &count, sizeof(count)) != (ssize_t)sizeof(count)) {
				perror("cause_inject: read");
				return 1;
			}
			n++;
			if (next + 1 / rate > now_s())
				sleep_s(next + 1 / rate - now_s());
		}
	} else if (!strcmp(mode, "softirq")) {
		if (read_line(RPS, old_rps, sizeof(old_rps))) {
			fprintf(stderr, "cause_inject: %s: %s (no RPS here)\n", RPS, strerror(errno));
			return 4;
		}
		snprintf(mask, sizeof(mask), "%x", 1u << target);
		if (udp_pair(&rx, &tx) || write_str(RPS, mask)) {
			fprintf(stderr, "cause_inject: %s: %s\n", RPS, strerror(errno));
			return 4;
		}
		for (next = t0; !stop && now_s() < t0 + seconds; next += 1 / rate) {
			if (send(tx, "x", 1, 0) == 1 && received(rx))
				n++;
			if (next + 1 / rate > now_s())
				sleep_s(next + 1 / rate - now_s());
		}
		if (write_str(RPS, old_rps))
			fprintf(stderr, "cause_inject: restoring %s to %s: %s\n", RPS, old_rps,
				strerror(errno));
	} else {
		fprintf(stderr, "cause_inject: mode '%s': want timer, ipi or softirq\n", mode);
		return 2;
	}
	printf("%s %lu %.3f\n", mode, n, now_s() - t0);
	return 0;
}
