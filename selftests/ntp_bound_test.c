// SPDX-License-Identifier: GPL-2.0
/*
 * libtsc's bounded reader against a real NTP daemon, in a guest as root:
 * Debian's chronyd (TSCFK_CHRONYD, unpacked from its package on the host)
 * syncs the guest's clock to a second chronyd serving "local stratum 1"
 * on loopback, and writes the kernel's maxerror, esterror and status
 * bits as on any machine.  Synced, the bound is finite and its terms add
 * up (they are logged: the table the issue asks for); with the daemon
 * stopped, the bound is never under the kernel's maxerror read right
 * after it, and grows; the flags follow STA_INS, STA_DEL and STA_UNSYNC
 * set by adjtimex(); a step by ADJ_SETOFFSET is counted by the next read,
 * on the module's page and through clock_gettime(), and the bound stays
 * unknown until the daemon, let go again, states a maxerror.  Needs the
 * module loaded.
 */
#include <net/if.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timex.h>
#include <sys/wait.h>

#include "../testlib/harness.h"
#include "tscfk_test.h"
#include "libtsc.h"

#define SERVER_PORT	11123
#define SYNC_S		60	/* chrony's first sync, under TCG (2 s seen) */
#define SPEAK_S		60	/* its next update, let go again */
#define TEST_S		(SYNC_S + SPEAK_S + 60)

static const char *chronyd(void)
{
	const char *p = getenv("TSCFK_CHRONYD");

	return p && *p && access(p, X_OK) == 0 ? p : NULL;
}

/* chronyd -f conf, in the foreground, its log to dir/name.log: the pid, or -errno. */
static pid_t start_chronyd(const char *dir, const char *name, const char *conf, bool no_clock)
{
	char cfg[128], log[128];
	pid_t pid;
	FILE *f;

	snprintf(cfg, sizeof(cfg), "%s/%s.conf", dir, name);
	snprintf(log, sizeof(log), "%s/%s.log", dir, name);
	f = fopen(cfg, "w");
	if (!f)
		return -errno;
	fputs(conf, f);
	fclose(f);
	pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		/* -d: foreground, its messages to stderr; -u root: no _chrony user here. */
		if (no_clock)
			execl(chronyd(), "chronyd", "-d", "-x", "-u", "root", "-f", cfg, (char *)NULL);
		else
			execl(chronyd(), "chronyd", "-d", "-u", "root", "-f", cfg, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", chronyd() ?: "(none)", strerror(errno));
		_exit(127);
	}
	return pid < 0 ? -errno : pid;
}

/* The loopback interface up: a guest boots with it down, and the daemons talk over it. */
static int loopback_up(void)
{
	struct ifreq ifr = { .ifr_name = "lo" };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;

	if (fd < 0)
		return -errno;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		err = -errno;
	ifr.ifr_flags |= IFF_UP;
	if (!err && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		err = -errno;
	close(fd);
	return err;
}

static void stop(pid_t *pid)
{
	if (*pid <= 0)
		return;
	kill(*pid, SIGCONT);
	kill(*pid, SIGTERM);
	waitpid(*pid, NULL, 0);
	*pid = 0;
}

static int set_status(int set, int clear)
{
	struct timex tx = { .modes = 0 };

	if (adjtimex(&tx) < 0)
		return -errno;
	tx = (struct timex){ .modes = ADJ_STATUS, .status = (tx.status | set) & ~clear };
	return adjtimex(&tx) < 0 ? -errno : 0;
}

/* The flags of a bounded read within s seconds have all of want and none of unwanted. */
static bool flags_within(int s, uint32_t want, uint32_t unwanted, struct tsc_time_bound *b)
{
	for (int i = 0; i < s * 20; i++) {
		tsc_realtime_bounded(b);
		if ((b->flags & want) == want && !(b->flags & unwanted))
			return true;
		usleep(50000);
	}
	return false;
}

static void log_terms(struct __test_metadata *_metadata, const char *when)
{
	TSC_BOUND_TERMS(t);
	struct timex tx = { .modes = 0 };

	if (tsc_time_bound_terms(&t) || adjtimex(&tx) < 0) {
		TH_LOG("%s: no terms: %s", when, tsc_last_error());
		return;
	}
	TH_LOG("%s: bound %llu ns = maxerror %llu + growth %llu + slewing %llu + reading %llu + skew %llu + leap %llu; esterror %llu; age %llu ns; flags %#x; disruptions %u (step %u, resume %u, clocksource %u, vmclock %u, rate %u); kernel maxerror %ld us esterror %ld us status %#x",
	       when, (unsigned long long)t.bound_ns, (unsigned long long)t.maxerror_ns,
	       (unsigned long long)t.growth_ns, (unsigned long long)t.slewing_ns,
	       (unsigned long long)t.reading_ns, (unsigned long long)t.skew_ns,
	       (unsigned long long)t.leap_ns, (unsigned long long)t.esterror_ns,
	       (unsigned long long)t.age_ns, t.flags, t.disruptions,
	       t.by_cause[TSC_DISRUPTION_STEP], t.by_cause[TSC_DISRUPTION_RESUME],
	       t.by_cause[TSC_DISRUPTION_CLOCKSOURCE], t.by_cause[TSC_DISRUPTION_VMCLOCK],
	       t.by_cause[TSC_DISRUPTION_RATE], tx.maxerror, tx.esterror, tx.status);
}

FIXTURE(ntp) {
	char dir[64];
	pid_t server, client;
	struct timex saved;
};

FIXTURE_SETUP(ntp)
{
	char conf[1024];
	struct tsc_time_bound b;

	REQUIRE_MODULE();
	if (geteuid() != 0)
		SKIP(return, "not root: chronyd cannot set the clock");
	ASSERT_NE(NULL, chronyd()) TH_LOG("TSCFK_CHRONYD (%s): no chronyd to run",
					 getenv("TSCFK_CHRONYD") ?: "unset");
	ASSERT_LE(0, adjtimex(&self->saved));
	ASSERT_EQ(0, loopback_up());
	snprintf(self->dir, sizeof(self->dir), "/tmp/ntp_bound.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	/* The reference: this clock, served on loopback, left alone (-x). */
	snprintf(conf, sizeof(conf),
		 "local stratum 1\nallow 127.0.0.1\nport %d\ncmdport 0\nbindcmdaddress /\n"
		 "pidfile %s/server.pid\n", SERVER_PORT, self->dir);
	self->server = start_chronyd(self->dir, "server", conf, true);
	ASSERT_LT(0, self->server);
	/*
	 * The daemon under test: as Debian configures it (rtcsync, so that
	 * it clears STA_UNSYNC), polling 4 times a second, stepping an
	 * offset over 1 ms whenever it sees one.
	 */
	snprintf(conf, sizeof(conf),
		 "server 127.0.0.1 port %d iburst minpoll -2 maxpoll -2\nrtcsync\nmakestep 0.001 -1\n"
		 "port 0\ncmdport 0\nbindcmdaddress /\npidfile %s/client.pid\n", SERVER_PORT, self->dir);
	self->client = start_chronyd(self->dir, "client", conf, false);
	ASSERT_LT(0, self->client);
	if (!flags_within(SYNC_S, 0, TSC_BOUND_UNSYNCED, &b)) {
		char log[4096], path[128];

		snprintf(path, sizeof(path), "%s/client.log", self->dir);
		log[0] = '\0';
		read_file(path, log, sizeof(log));
		log_terms(_metadata, "not synced");
		ASSERT_TRUE(false) TH_LOG("chronyd did not sync in %d s (flags %#x); its log:\n%s",
					  SYNC_S, b.flags, log);
	}
}

FIXTURE_TEARDOWN(ntp)
{
	struct timex tx = { .modes = ADJ_STATUS | ADJ_MAXERROR | ADJ_ESTERROR,
			    .status = self->saved.status, .maxerror = self->saved.maxerror,
			    .esterror = self->saved.esterror };
	char cmd[128];

	stop(&self->client);
	stop(&self->server);
	if (self->saved.tick)
		adjtimex(&tx);
	if (self->dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", self->dir);
		if (system(cmd))
			TH_LOG("could not remove %s", self->dir);
	}
}

/*
 * Synced: a finite bound, the module's page, the module's skew; the terms
 * add up.  A kernel whose clocks left the TSC (its watchdog marked it
 * unstable: a guest starved by a loaded host) keeps no page to bound on,
 * and libtsc must say so rather than read one.
 */
TEST_F_TIMEOUT(ntp, synced_the_terms_add_up, TEST_S)
{
	TSC_BOUND_TERMS(t);
	struct tsc_time_bound b;
	const char *why;

	if (!clocksource_is_tsc()) {
		const char *must = getenv("TSCFK_CLOCKS_ON_TSC");

		ASSERT_NE(TSC_SYSCLOCK_KERNEL, tsc_time_path(&why));
		ASSERT_NE(NULL, strstr(why, "do not read the TSC")) TH_LOG("%s", why);
		/* Where they must (mk/vm.mk), the terms on the page are never left unchecked. */
		ASSERT_FALSE(must && !strcmp(must, "1")) TH_LOG("TSCFK_CLOCKS_ON_TSC: %s", why);
		SKIP(return, "the kernel's clocks do not read the TSC: %s", why);
	}
	ASSERT_EQ(TSC_SYSCLOCK_KERNEL, tsc_time_path(&why)) TH_LOG("%s", why);
	tsc_realtime_bounded(&b);
	EXPECT_FALSE(b.flags & (TSC_BOUND_UNSYNCED | TSC_BOUND_DISRUPTED)) TH_LOG("flags %#x", b.flags);
	EXPECT_GT(UINT64_MAX, b.latest);
	ASSERT_EQ(0, tsc_time_bound_terms(&t)) TH_LOG("%s", tsc_last_error());
	EXPECT_EQ(1u, t.reading_ns);
	EXPECT_FALSE(t.flags & TSC_BOUND_SKEW_UNKNOWN) TH_LOG("the module measured every CPU");
	EXPECT_EQ(t.maxerror_ns + t.growth_ns + t.slewing_ns + t.reading_ns + t.skew_ns +
		  t.leap_ns, t.bound_ns);
	EXPECT_GT(16000000000ull, t.maxerror_ns);
	for (int i = 0; i < 4; i++) {
		log_terms(_metadata, "synced");
		usleep(500000);
	}
}

/*
 * The daemon stopped: the kernel alone grows maxerror, 500 us at each
 * turn of a second; every bound read is at least the maxerror read right
 * after it, and the bound grows with it.
 */
TEST_F_TIMEOUT(ntp, never_under_the_kernels_maxerror, TEST_S)
{
	struct tsc_time_bound first, b;
	uint64_t end, reads = 0;

	ASSERT_EQ(0, kill(self->client, SIGSTOP));
	tsc_realtime_bounded(&first);
	end = first.now + 3000000000ull;
	do {
		struct timex tx = { .modes = 0 };

		tsc_realtime_bounded(&b);
		ASSERT_LE(0, adjtimex(&tx));
		ASSERT_FALSE(b.flags & TSC_BOUND_UNSYNCED);
		ASSERT_LE((uint64_t)tx.maxerror * 1000, b.latest - b.now)
			TH_LOG("read %llu: bound %llu ns under the kernel's maxerror %ld us",
			       (unsigned long long)reads, (unsigned long long)(b.latest - b.now),
			       tx.maxerror);
		reads++;
	} while (b.now < end);
	/*
	 * Refreshes 2 s apart at least, so two of the kernel's 500 us steps
	 * between them, less the first bound's own growth (500 ppm of at
	 * most a second): 500 us more at least.
	 */
	EXPECT_LE(first.latest - first.now + 500000, b.latest - b.now);
	log_terms(_metadata, "stopped 3 s");
	TH_LOG("%llu reads", (unsigned long long)reads);
}

/* The daemon stopped, the status set by hand: the flags follow within a refresh. */
TEST_F_TIMEOUT(ntp, the_flags_follow_the_kernel, TEST_S)
{
	struct tsc_time_bound b;

	ASSERT_EQ(0, kill(self->client, SIGSTOP));
	ASSERT_EQ(0, set_status(STA_INS, 0));
	EXPECT_TRUE(flags_within(3, TSC_BOUND_LEAP, 0, &b)) TH_LOG("STA_INS: flags %#x", b.flags);
	ASSERT_EQ(0, set_status(STA_DEL, STA_INS));
	EXPECT_TRUE(flags_within(3, TSC_BOUND_LEAP, 0, &b)) TH_LOG("STA_DEL: flags %#x", b.flags);
	ASSERT_EQ(0, set_status(0, STA_DEL));
	EXPECT_TRUE(flags_within(3, 0, TSC_BOUND_LEAP, &b)) TH_LOG("none: flags %#x", b.flags);
	ASSERT_EQ(0, set_status(STA_UNSYNC, 0));
	EXPECT_TRUE(flags_within(3, TSC_BOUND_UNSYNCED, 0, &b)) TH_LOG("STA_UNSYNC: flags %#x", b.flags);
	EXPECT_EQ(0u, b.earliest);
	EXPECT_EQ(UINT64_MAX, b.latest);
	ASSERT_EQ(0, set_status(0, STA_UNSYNC));
	EXPECT_TRUE(flags_within(3, 0, TSC_BOUND_UNSYNCED, &b)) TH_LOG("synced: flags %#x", b.flags);
}

/*
 * A step (ADJ_SETOFFSET, as chrony's makestep or a PTP servo makes one)
 * is counted by the very next read, on the page and through
 * clock_gettime(); the bound is unknown until the daemon speaks again.
 */
TEST_F_TIMEOUT(ntp, a_step_until_the_daemon_speaks, TEST_S)
{
	struct timex step = { .modes = ADJ_SETOFFSET | ADJ_NANO, .time = { .tv_usec = 5000000 } };
	TSC_SYSCLOCK_OPTS(o, .sysfs_root = "/nonexistent");
	TSC_BOUND_TERMS(t);
	TSC_SYSCLOCK(sc);
	struct tsc_time_bound b, sb, before, sbefore;

	ASSERT_EQ(0, tsc_sysclock_init(&sc, &o));
	ASSERT_EQ(TSC_SYSCLOCK_SYSCALL, sc.path) TH_LOG("%s", sc.why);
	ASSERT_EQ(0, kill(self->client, SIGSTOP));
	tsc_realtime_bounded(&before);
	tsc_sysclock_realtime_bounded(&sc, &sbefore);
	ASSERT_LE(0, clock_adjtime(CLOCK_REALTIME, &step)) TH_LOG("ADJ_SETOFFSET: %s", strerror(errno));
	tsc_realtime_bounded(&b);
	tsc_sysclock_realtime_bounded(&sc, &sb);
	EXPECT_EQ(before.disruptions + 1, b.disruptions);
	EXPECT_TRUE(b.flags & TSC_BOUND_DISRUPTED) TH_LOG("flags %#x", b.flags);
	EXPECT_EQ(0u, b.earliest);
	EXPECT_EQ(UINT64_MAX, b.latest);
	EXPECT_EQ(sbefore.disruptions + 1, sb.disruptions) TH_LOG("through clock_gettime()");
	EXPECT_TRUE(sb.flags & TSC_BOUND_DISRUPTED);
	ASSERT_EQ(0, tsc_time_bound_terms(&t));
	EXPECT_LE(1u, t.by_cause[TSC_DISRUPTION_STEP]);
	log_terms(_metadata, "stepped 5 ms");
	/* Let go, chronyd steps the 5 ms back and states its maxerror. */
	ASSERT_EQ(0, kill(self->client, SIGCONT));
	EXPECT_TRUE(flags_within(SPEAK_S, 0, TSC_BOUND_DISRUPTED | TSC_BOUND_UNSYNCED, &b))
		TH_LOG("still %#x %d s after the daemon was let go", b.flags, SPEAK_S);
	EXPECT_LE(before.disruptions + 1, b.disruptions);
	log_terms(_metadata, "the daemon spoke");
}

TEST_HARNESS_MAIN
