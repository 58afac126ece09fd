// The Landlock tier (landlock_linux.go): the ruleset and the descendant sweep.
//
// Raw syscalls, not go-landlock: the domain must be created in the sandbox's init, a C
// process that never starts the Go runtime, and never in the server. The kernel's
// headers on the build host may predate ABI 4 and 6, so the structures and bits are
// spelled out here (include/uapi/linux/landlock.h).

#define _GNU_SOURCE
#include "landlock_linux.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1

// File system rights, by the ABI that introduced them.
#define FS_EXECUTE (1ULL << 0)
#define FS_WRITE_FILE (1ULL << 1)
#define FS_READ_FILE (1ULL << 2)
#define FS_READ_DIR (1ULL << 3)
#define FS_V1 ((1ULL << 13) - 1) // execute … make_sym
#define FS_REFER (1ULL << 13)    // ABI 2
#define FS_TRUNCATE (1ULL << 14) // ABI 3
#define FS_IOCTL_DEV (1ULL << 15) // ABI 5

#define NET_BIND_TCP (1ULL << 0) // ABI 4
#define NET_CONNECT_TCP (1ULL << 1)

#define SCOPE_ABSTRACT_UNIX (1ULL << 0) // ABI 6
#define SCOPE_SIGNAL (1ULL << 1)

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

int ll_abi(void) { return (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION); }

// handled_fs is every file system right this kernel knows: each one not granted by a
// rule below is denied everywhere.
static uint64_t handled_fs(int abi) {
	uint64_t fs = FS_V1;
	if (abi >= 2)
		fs |= FS_REFER;
	if (abi >= 3)
		fs |= FS_TRUNCATE;
	if (abi >= 5)
		fs |= FS_IOCTL_DEV;
	return fs;
}

// allow adds a rule for path. A path that does not exist is skipped: the plan lists
// what the namespace tier binds where present. A rule on a file may carry only file
// rights (the kernel refuses directory rights on a file with EINVAL).
static int allow(int ruleset, const char *path, uint64_t access, uint64_t handled) {
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		access &= FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV;
	struct ll_path_beneath pb = {access & handled, fd};
	long r = syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0);
	int e = errno;
	close(fd);
	errno = e;
	return r < 0 ? -1 : 0;
}

int ll_restrict(const struct ll_plan *p, const char **what) {
	int abi = ll_abi();
	if (abi < 1) {
		*what = "landlock: abi";
		return -1;
	}
	struct ll_ruleset_attr attr = {.handled_access_fs = handled_fs(abi)};
	size_t size = sizeof attr.handled_access_fs;
	if (p->want & LL_NET) {
		// No rule grants a port: every TCP bind and connect is denied.
		attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP;
		size = 2 * sizeof(uint64_t);
	}
	if (p->want & LL_SCOPE) {
		attr.scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL;
		size = sizeof attr;
	}
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (rs < 0) {
		*what = "landlock: create ruleset";
		return -1;
	}
	const uint64_t fs = attr.handled_access_fs;
	const uint64_t ro = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR;
	const uint64_t dev = FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE;
	int r = 0;
	const char *at = "";
	for (char **s = p->ro; r == 0 && *s; s++)
		r = allow(rs, at = *s, ro, fs);
	for (char **s = p->rw_files; r == 0 && *s; s++)
		r = allow(rs, at = *s, dev, fs);
	// The run's own directories: everything but device ioctls. Character and block
	// devices cannot be created there anyway without CAP_MKNOD.
	if (r == 0)
		r = allow(rs, at = p->workspace, fs & ~FS_IOCTL_DEV, fs);
	if (r == 0)
		r = allow(rs, at = p->tmp, fs & ~FS_IOCTL_DEV, fs);
	if (r < 0) {
		int e = errno;
		close(rs);
		static char msg[PATH_MAX + 32];
		snprintf(msg, sizeof msg, "landlock: add a rule for %s", at);
		errno = e;
		*what = msg;
		return -1;
	}
	if (syscall(SYS_landlock_restrict_self, rs, 0) < 0) {
		int e = errno;
		close(rs);
		errno = e;
		*what = "landlock: restrict self";
		return -1;
	}
	close(rs);
	return 0;
}

int ll_nest(void) {
	if (ll_abi() < 6)
		return 0;
	struct ll_ruleset_attr attr = {.scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL};
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
	if (rs < 0)
		return errno;
	int err = syscall(SYS_landlock_restrict_self, rs, 0) < 0 ? errno : 0;
	close(rs);
	return err;
}

// kill_children sends SIGKILL to every direct child of this process and says how many
// it found. Only direct children: a child's pid cannot be reused before this process
// reaps it, whereas a grandchild's can (its own parent may reap it meanwhile), and a
// killed child's children are reparented here, to be found in the next round.
static int kill_children(void) {
	int found = 0;
	DIR *tasks = opendir("/proc/self/task");
	if (!tasks)
		return 0;
	struct dirent *t;
	while ((t = readdir(tasks))) {
		if (t->d_name[0] == '.')
			continue;
		char path[sizeof t->d_name + 32];
		snprintf(path, sizeof path, "/proc/self/task/%s/children", t->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		long pid;
		while (fscanf(f, "%ld", &pid) == 1) {
			if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
				found++;
		}
		fclose(f);
	}
	closedir(tasks);
	return found;
}

void ll_sweep(void) {
	for (;;) {
		int killed = kill_children();
		int reaped = 0;
		for (;;) {
			pid_t w = waitpid(-1, NULL, __WALL | WNOHANG);
			if (w > 0) {
				reaped++;
				continue;
			}
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && errno == ECHILD)
				return;
			break; // children left, none dead yet
		}
		if (killed > 0 && reaped == 0) {
			// One of the killed dies soon: wait for it rather than spin.
			while (waitpid(-1, NULL, __WALL) < 0 && errno == EINTR)
				;
		} else if (killed == 0 && reaped == 0) {
			// A child not listed yet (being reparented): look again shortly.
			usleep(1000);
		}
	}
}
