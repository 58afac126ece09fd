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
#include <linux/seccomp.h>
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
#define FS_V1 ((1ULL << 13) - 1)  // execute … make_sym
#define FS_REFER (1ULL << 13)     // ABI 2
#define FS_TRUNCATE (1ULL << 14)  // ABI 3
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

// The run's directories and the program's seccomp program, for ll_nest.
static const char *nest_dirs[2];
static struct sock_fprog nest_filter;

int ll_restrict(const struct ll_plan *p, const char **what) {
	nest_dirs[0] = p->workspace;
	nest_dirs[1] = p->tmp;
	nest_filter = (struct sock_fprog){(unsigned short)p->filter_len, p->filter};
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

// program_filter loads the program's seccomp program on top of the tier's: refused
// where the plan brought none, since the tier's guarantees count on it.
static int program_filter(void) {
	if (nest_filter.len == 0)
		return EINVAL;
	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &nest_filter) < 0 ? errno : 0;
}

int ll_nest(void) {
	if (ll_abi() < 6)
		return program_filter();
	// Every layer denies reparenting (a link or rename into another directory) unless
	// a rule of its own grants it, whether or not it handles the file system otherwise:
	// so this one grants it in the run's directories, as the outer layer does.
	struct ll_ruleset_attr attr = {.handled_access_fs = FS_REFER, .scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL};
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
	if (rs < 0)
		return errno;
	int err = 0;
	for (int i = 0; i < 2 && !err; i++)
		if (nest_dirs[i] && allow(rs, nest_dirs[i], FS_REFER, FS_REFER) < 0)
			err = errno;
	if (!err && syscall(SYS_landlock_restrict_self, rs, 0) < 0)
		err = errno;
	close(rs);
	return err ? err : program_filter();
}

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

// ppid_of is pid's parent from /proc/<pid>/stat, or -1.
static pid_t ppid_of(pid_t pid) {
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	// The name in parentheses may hold anything: the fields follow its last ')'.
	char *p = strrchr(buf, ')');
	long ppid;
	if (!p || sscanf(p + 1, " %*c %ld", &ppid) != 1)
		return -1;
	return (pid_t)ppid;
}

// tree is the descendants found in one round, each held by a pidfd.
struct tree {
	int *fds;
	pid_t *pids;
	size_t n, cap;
};

static void tree_add(struct tree *t, pid_t pid, int fd) {
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		int *fds = realloc(t->fds, cap * sizeof *fds);
		pid_t *pids = realloc(t->pids, cap * sizeof *pids);
		if (!fds || !pids) {
			// Out of memory: kill it now, unstopped; the next round sees the rest.
			syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
			close(fd);
			if (fds)
				t->fds = fds;
			if (pids)
				t->pids = pids;
			return;
		}
		t->fds = fds;
		t->pids = pids;
		t->cap = cap;
	}
	t->fds[t->n] = fd;
	t->pids[t->n] = pid;
	t->n++;
}

// stop_children stops every child of parent (each task's children file) and adds it to
// t. A child is taken only through a pidfd opened while its parent is still parent: a
// pid read from the file may have been reaped by parent and reused since, and the
// pidfd then pins the process that was checked.
static void stop_children(struct tree *t, pid_t parent) {
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d/task", parent);
	DIR *tasks = opendir(dir);
	if (!tasks)
		return;
	struct dirent *d;
	while ((d = readdir(tasks))) {
		if (d->d_name[0] == '.')
			continue;
		char path[sizeof dir + sizeof d->d_name + 16];
		snprintf(path, sizeof path, "%s/%s/children", dir, d->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		long pid;
		while (fscanf(f, "%ld", &pid) == 1) {
			int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
			if (fd < 0)
				continue;
			if (ppid_of((pid_t)pid) != parent) {
				close(fd);
				continue;
			}
			syscall(SYS_pidfd_send_signal, fd, SIGSTOP, NULL, 0);
			tree_add(t, (pid_t)pid, fd);
		}
		fclose(f);
	}
	closedir(tasks);
}

// kill_tree stops the whole tree below this process top down, each process before its
// children are listed, so none of it can fork past the walk; then kills all of it. It
// returns how many it found.
static size_t kill_tree(void) {
	struct tree t = {0};
	stop_children(&t, getpid());
	for (size_t i = 0; i < t.n; i++)
		stop_children(&t, t.pids[i]);
	for (size_t i = 0; i < t.n; i++) {
		syscall(SYS_pidfd_send_signal, t.fds[i], SIGKILL, NULL, 0);
		close(t.fds[i]);
	}
	size_t n = t.n;
	free(t.fds);
	free(t.pids);
	return n;
}

void ll_sweep(void) {
	for (;;) {
		size_t killed = kill_tree();
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
			// A killed child dies soon: wait for it rather than spin.
			while (waitpid(-1, NULL, __WALL) < 0 && errno == EINTR)
				;
		} else if (killed == 0 && reaped == 0) {
			// A child not listed yet (being reparented): look again shortly.
			usleep(1000);
		}
	}
}
