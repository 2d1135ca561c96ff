// SPDX-License-Identifier: GPL-2.0
/*
 * The clock page under SELinux enforcing, Debian's reference policy: an
 * unprivileged process (uid 65534) of each confined domain maps the page,
 * protects it PROT_NONE and back, reads it through the mapping and
 * through read().  SELinux checks a mapping's file again at every
 * mprotect(), even to PROT_NONE: whether the caller may use a file the
 * opener's domain opened (fd:use), then whether it may read the inode.
 * Neither may depend on who loaded the module.
 *
 * Run by scripts/vm/migrate_test.py as the only program of a guest of
 * the initramfs alone (a root of files SELinux can label), linked
 * statically, with the module as a file, MODULE.  It loads POLICY: the
 * distribution's, built by mk/vm.mk with selinux_harness.cil, which lets
 * this program (kernel_t) start the confined domains as a login program
 * would, and lets user_t and staff_t map sysfs files (refpolicy gives
 * them no map on sysfs_t, with or without this module).  It loads the
 * module in modprobe's domain, kmod_t, as a distribution would, still
 * permissive; then it switches to enforcing and runs itself in each
 * domain (--confined), which reports through its exit status: a step
 * below, or 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../testlib/harness.h"
#include "tsc_clock_page.h"
#include "tscfk_test.h"

#define POLICY		"/policy"
#define MODULE		"/tsc_freq_khz.ko"
#define SELINUXFS	"/sys/fs/selinux"
#define PAGE_FILE	"/sys/devices/system/cpu/tsc/clock_page"
#define BIN_DIR		"/confined"	/* a tmpfs labelled bin_t: an entrypoint */
#define NOBODY		65534
#define KMOD_T		"system_u:system_r:kmod_t:s0"

/* The domains a user logs in to; each may map sysfs files (see above). */
static const char *const users[] = {
	"staff_u:sysadm_r:sysadm_t:s0", "staff_u:staff_r:staff_t:s0",
	"user_u:user_r:user_t:s0", "unconfined_u:unconfined_r:unconfined_t:s0",
};

enum step {
	STEP_OPEN = 1, STEP_MMAP, STEP_PROT_NONE, STEP_PROT_READ, STEP_VERSION,
	STEP_READ, STEP_DOMAIN, STEP_UID, STEP_LOAD,
	/* Before the domain's: this program failed to start it. */
	START_CONTEXT = 100, START_UID, START_EXEC,
};

static const char *const step_names[] = {
	[STEP_OPEN] = "open()", [STEP_MMAP] = "mmap(PROT_READ)",
	[STEP_PROT_NONE] = "mprotect(PROT_NONE)", [STEP_PROT_READ] = "mprotect(PROT_READ)",
	[STEP_VERSION] = "the page's version through the mapping", [STEP_READ] = "read()",
	[STEP_DOMAIN] = "not in the domain asked for", [STEP_UID] = "not uid 65534",
	[STEP_LOAD] = "finit_module()",
};

/* The whole of s in one write(2): 0, or -errno. */
static int write_str(const char *path, const char *s)
{
	ssize_t n = write_file(path, s, strlen(s));

	return n == (ssize_t)strlen(s) ? 0 : n < 0 ? (int)n : -EIO;
}

/* The whole file in one write(): selinuxfs takes a policy no other way. */
static int load_policy(void)
{
	struct stat st;
	ssize_t n;
	char *buf;
	int fd, err;

	fd = open(POLICY, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		close(fd);
		return err;
	}
	buf = malloc(st.st_size);
	if (!buf || read(fd, buf, st.st_size) != st.st_size) {
		close(fd);
		free(buf);
		return -EIO;
	}
	close(fd);
	n = write_file(SELINUXFS "/load", buf, st.st_size);
	free(buf);
	return n == st.st_size ? 0 : n < 0 ? (int)n : -EIO;
}

static int copy_self(const char *to)
{
	char buf[65536];
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	ssize_t n;

	if (in < 0 || out < 0)
		return -errno;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			return -EIO;
	close(in);
	return close(out) ? -errno : 0;
}

/* Is this process in 'context'? */
static bool in_domain(const char *context)
{
	char current[256];

	return read_file("/proc/self/attr/current", current, sizeof(current)) > 0 &&
	       !strncmp(current, context, strlen(context));
}

/* In the confined domain: each step, in order; the first that fails. */
static int confined(const char *context)
{
	const struct tscfk_clock_page *cp;
	struct tscfk_clock_page copy;
	int fd;

	if (!in_domain(context))
		return STEP_DOMAIN;
	if (getuid() != NOBODY || geteuid() != NOBODY)
		return STEP_UID;
	fd = open(PAGE_FILE, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return STEP_OPEN;
	cp = mmap(NULL, sizeof(*cp), PROT_READ, MAP_SHARED, fd, 0);
	if (cp == MAP_FAILED)
		return STEP_MMAP;
	if (mprotect((void *)cp, sizeof(*cp), PROT_NONE))
		return STEP_PROT_NONE;
	if (mprotect((void *)cp, sizeof(*cp), PROT_READ))
		return STEP_PROT_READ;
	if (cp->version < TSCFK_CLOCK_PAGE_VERSION)
		return STEP_VERSION;
	if (pread(fd, &copy, sizeof(copy), 0) != sizeof(copy) ||
	    copy.version != cp->version)
		return STEP_READ;
	return 0;
}

/* The kernel's log lines that say what SELinux denied. */
static void log_denials(struct __test_metadata *_metadata)
{
	static char buf[1 << 20];
	int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, sizeof(buf) - 1);
	char *line, *save;

	if (n <= 0)
		return;
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strstr(line, "avc:  denied"))
			TH_LOG("%s", line);
}

/* In modprobe's domain: the module loaded, or the step that failed. */
static int insmod(const char *context)
{
	int fd;

	if (!in_domain(context))
		return STEP_DOMAIN;
	fd = open(MODULE, O_RDONLY | O_CLOEXEC);
	return fd < 0 || syscall(SYS_finit_module, fd, "", 0) ? STEP_LOAD : 0;
}

/*
 * This program with 'mode' in 'context', as uid 65534 unless it is
 * kmod_t: its exit status, or -1.
 */
static int run_as(const char *context, const char *mode)
{
	bool nobody = strcmp(mode, "--insmod");
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (!pid) {
		char *argv[] = { "selinux_test", (char *)mode, (char *)context, NULL };

		/* Inherited descriptors the domain may not use: none. */
		close(0);
		close(1);
		close(2);
		if (write_str("/proc/self/attr/exec", context))
			_exit(START_CONTEXT);
		if (nobody && (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY)))
			_exit(START_UID);
		execv(BIN_DIR "/selinux_test", argv);
		_exit(START_EXEC);
	}
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	if (WIFSIGNALED(status))
		return 1000 + WTERMSIG(status);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void expect_all_steps(struct __test_metadata *_metadata, const char *context)
{
	int step = run_as(context, "--confined");

	if (step > 0 && step < (int)ARRAY_SIZE(step_names))
		TH_LOG("%s: refused at %s", context, step_names[step]);
	else if (step > 1000)
		TH_LOG("%s: killed by signal %d", context, step - 1000);
	else if (step)
		TH_LOG("%s: could not be started in it (status %d: %s)", context, step,
		       step == START_CONTEXT ? "/proc/self/attr/exec refused it" :
		       step == START_UID ? "setuid(65534)" : step == START_EXEC ? "execv()" : "?");
	if (step)
		log_denials(_metadata);
	EXPECT_EQ(0, step);
}

/* A number selinuxfs gives, as under class/: 0 if unreadable. */
static unsigned long selinuxfs_number(const char *path)
{
	char buf[32];

	return read_file(path, buf, sizeof(buf)) > 0 ? strtoul(buf, NULL, 10) : 0;
}

/* Does the policy let 'scon' use a descriptor of 'tcon'?  1, 0, or -1. */
static int may_use_fd(const char *scon, const char *tcon)
{
	unsigned long class = selinuxfs_number(SELINUXFS "/class/fd/index");
	unsigned long perm = selinuxfs_number(SELINUXFS "/class/fd/perms/use");
	unsigned long allowed;
	char buf[256];
	int fd, n;

	if (!class || !perm)
		return -1;
	fd = open(SELINUXFS "/access", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = snprintf(buf, sizeof(buf), "%s %s %lu", scon, tcon, class);
	if (write(fd, buf, n) != n || read(fd, buf, sizeof(buf) - 1) <= 0) {
		close(fd);
		return -1;
	}
	close(fd);
	buf[sizeof(buf) - 1] = '\0';
	allowed = strtoul(buf, NULL, 16);
	return !!(allowed & (1UL << (perm - 1)));
}

/* First: every other test runs under it. */
TEST(policy_loaded_and_enforcing)
{
	char mode[4] = "";

	/* The kernel's audit lines, every one, for log_denials(). */
	ASSERT_EQ(0, write_str("/proc/sys/kernel/printk_ratelimit", "0"));
	ASSERT_EQ(0, mount("selinuxfs", SELINUXFS, "selinuxfs", 0, NULL))
		TH_LOG("selinuxfs: %s (booted with lsm=...,selinux?)", strerror(errno));
	ASSERT_EQ(0, load_policy()) TH_LOG("%s: the policy did not load", POLICY);
	ASSERT_EQ(0, mkdir(BIN_DIR, 0755));
	ASSERT_EQ(0, mount("tmpfs", BIN_DIR, "tmpfs", 0, "context=system_u:object_r:bin_t:s0"));
	ASSERT_EQ(0, copy_self(BIN_DIR "/selinux_test"));
	ASSERT_EQ(0, run_as(KMOD_T, "--insmod"))
		TH_LOG("%s: not loaded in %s", MODULE, KMOD_T);
	ASSERT_EQ(0, access(PAGE_FILE, R_OK));
	ASSERT_EQ(0, write_str(SELINUXFS "/enforce", "1"));
	ASSERT_LT(0, read_file(SELINUXFS "/enforce", mode, sizeof(mode)));
	ASSERT_EQ('1', mode[0]);
}

/*
 * What a mapping's file made in modprobe's domain would need, which the
 * policy refuses every confined user: the tests below would pass without
 * the module's own file per mapping only if it did not.
 */
TEST(the_policy_refuses_users_kmod_t_descriptors)
{
	for (size_t i = 0; i < ARRAY_SIZE(users); i++) {
		bool unconfined = strstr(users[i], "unconfined_t");

		EXPECT_EQ(unconfined, may_use_fd(users[i], KMOD_T))
			TH_LOG("%s: fd use on %s", users[i], KMOD_T);
	}
}

/* refpolicy's own rules let sysadm_t map sysfs files. */
TEST(sysadm_t)
{
	expect_all_steps(_metadata, users[0]);
}

TEST(staff_t)
{
	expect_all_steps(_metadata, users[1]);
}

TEST(user_t)
{
	expect_all_steps(_metadata, users[2]);
}

TEST(unconfined_t)
{
	expect_all_steps(_metadata, users[3]);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--confined"))
		return confined(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "--insmod"))
		return insmod(argv[2]);
	return test_harness_run(argc, argv);
}
