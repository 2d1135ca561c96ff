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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../testlib/harness.h"
#include "tsc_clock_page.h"

#define POLICY		"/policy"
#define MODULE		"/tsc_freq_khz.ko"
#define SELINUXFS	"/sys/fs/selinux"
#define PAGE_FILE	"/sys/devices/system/cpu/tsc/clock_page"
#define BIN_DIR		"/confined"	/* a tmpfs labelled bin_t: an entrypoint */
#define NOBODY		65534

enum step {
	STEP_OPEN = 1, STEP_MMAP, STEP_PROT_NONE, STEP_PROT_READ, STEP_VERSION,
	STEP_READ, STEP_DOMAIN, STEP_UID,
	/* Before the domain's: this program failed to start it. */
	START_CONTEXT = 100, START_UID, START_EXEC,
};

static const char *const step_names[] = {
	[STEP_OPEN] = "open()", [STEP_MMAP] = "mmap(PROT_READ)",
	[STEP_PROT_NONE] = "mprotect(PROT_NONE)", [STEP_PROT_READ] = "mprotect(PROT_READ)",
	[STEP_VERSION] = "the page's version through the mapping", [STEP_READ] = "read()",
	[STEP_DOMAIN] = "not in the domain asked for", [STEP_UID] = "not uid 65534",
};

static int write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, buf, len) != (ssize_t)len)
		err = errno ? -errno : -EIO;
	close(fd);
	return err;
}

/* The whole file in one write(): selinuxfs takes a policy no other way. */
static int load_policy(void)
{
	struct stat st;
	char *buf;
	int fd, err;

	fd = open(POLICY, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st))
		return -errno;
	buf = malloc(st.st_size);
	if (!buf || read(fd, buf, st.st_size) != st.st_size) {
		close(fd);
		free(buf);
		return -EIO;
	}
	close(fd);
	err = write_file(SELINUXFS "/load", buf, st.st_size);
	free(buf);
	return err;
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

/* In the confined domain: each step, in order; the first that fails. */
static int confined(const char *context)
{
	const struct tscfk_clock_page *cp;
	struct tscfk_clock_page copy;
	char current[256] = "";
	int fd;

	fd = open("/proc/self/attr/current", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, current, sizeof(current) - 1) < 0)
		return STEP_DOMAIN;
	close(fd);
	if (strncmp(current, context, strlen(context)))
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

/* In modprobe's domain: the module loaded, 0, or 1. */
static int insmod(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	return fd < 0 || syscall(SYS_finit_module, fd, "", 0) ? 1 : 0;
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
		if (write_file("/proc/self/attr/exec", context, strlen(context)))
			_exit(START_CONTEXT);
		if (nobody && (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY)))
			_exit(START_UID);
		execv(BIN_DIR "/selinux_test", argv);
		_exit(START_EXEC);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void expect_all_steps(struct __test_metadata *_metadata, const char *context)
{
	int step = run_as(context, "--confined");

	if (step > 0 && step < (int)(sizeof(step_names) / sizeof(step_names[0])))
		TH_LOG("%s: refused at %s", context, step_names[step]);
	else if (step)
		TH_LOG("%s: could not be started in it (status %d: %s)", context, step,
		       step == START_CONTEXT ? "/proc/self/attr/exec refused it" :
		       step == START_UID ? "setuid(65534)" : step == START_EXEC ? "execv()" : "?");
	if (step)
		log_denials(_metadata);
	EXPECT_EQ(0, step);
}

/* First: every other test runs under it. */
TEST(policy_loaded_and_enforcing)
{
	char mode = 0;
	int fd;

	ASSERT_EQ(0, mount("selinuxfs", SELINUXFS, "selinuxfs", 0, NULL))
		TH_LOG("selinuxfs: %s (booted with lsm=...,selinux?)", strerror(errno));
	ASSERT_EQ(0, load_policy()) TH_LOG("%s: the policy did not load", POLICY);
	ASSERT_EQ(0, mkdir(BIN_DIR, 0755));
	ASSERT_EQ(0, mount("tmpfs", BIN_DIR, "tmpfs", 0, "context=system_u:object_r:bin_t:s0"));
	ASSERT_EQ(0, copy_self(BIN_DIR "/selinux_test"));
	ASSERT_EQ(0, run_as("system_u:system_r:kmod_t:s0", "--insmod"))
		TH_LOG("%s: not loaded", MODULE);
	ASSERT_EQ(0, access(PAGE_FILE, R_OK));
	ASSERT_EQ(0, write_file(SELINUXFS "/enforce", "1", 1));
	fd = open(SELINUXFS "/enforce", O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(1, read(fd, &mode, 1));
	close(fd);
	ASSERT_EQ('1', mode);
}

/* refpolicy's own rules let sysadm_t map sysfs files. */
TEST(sysadm_t)
{
	expect_all_steps(_metadata, "staff_u:sysadm_r:sysadm_t:s0");
}

TEST(staff_t)
{
	expect_all_steps(_metadata, "staff_u:staff_r:staff_t:s0");
}

TEST(user_t)
{
	expect_all_steps(_metadata, "user_u:user_r:user_t:s0");
}

TEST(unconfined_t)
{
	expect_all_steps(_metadata, "unconfined_u:unconfined_r:unconfined_t:s0");
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--confined"))
		return confined(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "--insmod"))
		return insmod(MODULE);
	return test_harness_run(argc, argv);
}
