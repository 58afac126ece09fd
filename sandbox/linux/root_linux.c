// The root builder and the rest of the init's setup, up to seccomp. setup() at the end
// is the whole sequence:
//
//	build_root (the mount plan; apply_op per step) → join_net → bridge (allowlist)
//	→ pivot → seal → sethostname → not dumpable → fds ≥ 3 close-on-exec → drop_caps
//	→ cgroup namespace → load_seccomp (no_new_privs, then the filter)

#include "init_linux.h"

// mkdir_parent creates the directories above path (it and mkdir_p call each other).
int mkdir_parent(const char *path);

// mkdir_p creates path and its parents; an existing directory is fine. Most parents
// already exist, so it tries path itself first and climbs only on ENOENT: one syscall
// for most of the root plan's steps instead of one per component.
int mkdir_p(const char *path, mode_t mode) {
	if (mkdir(path, mode) == 0)
		return 0;
	if (errno == ENOENT) {
		if (mkdir_parent(path) < 0)
			return -1;
		if (mkdir(path, mode) == 0)
			return 0;
	}
	if (errno != EEXIST)
		return -1;
	struct stat st;
	if (stat(path, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}

int mkdir_parent(const char *path) {
	char buf[PATH_MAX];
	size_t n = strlen(path);
	if (n >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, n + 1);
	char *slash = strrchr(buf, '/');
	if (!slash || slash == buf)
		return 0;
	*slash = 0;
	return mkdir_p(buf, 0755);
}

// known_dir is the directory of the new root the plan's last step made sure of: most
// steps put several entries into one directory (/etc, /dev, /proc), and plan_parent
// skips asking the kernel again for each (a mkdir and a stat). Nothing but the plan
// writes to the new root while it is built, and a mount over a directory leaves a
// directory there, so what was one stays one.
static char known_dir[PATH_MAX];

static void know_dir(const char *dir, size_t n) {
	if (n >= sizeof known_dir)
		n = 0;
	memcpy(known_dir, dir, n);
	known_dir[n] = 0;
}

// plan_parent is mkdir_parent for the root plan's steps.
static int plan_parent(const char *dst) {
	const char *slash = strrchr(dst, '/');
	size_t n = slash ? (size_t)(slash - dst) : 0;
	if (n && strlen(known_dir) == n && memcmp(known_dir, dst, n) == 0)
		return 0;
	if (mkdir_parent(dst) < 0)
		return -1;
	know_dir(dst, n);
	return 0;
}

static int mount_point(const char *dst, int is_file) {
	if (!is_file)
		return mkdir_p(dst, 0755);
	if (plan_parent(dst) < 0)
		return -1;
	int fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
struct airlock_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

// The MOUNT_ATTR_* bits of mount_setattr.
#define ATTR_RDONLY 0x1
#define ATTR_NOSUID 0x2
#define ATTR_NODEV 0x4
#define ATTR_NOEXEC 0x8

// no_setattr is set once mount_setattr turned out to be missing (before Linux 5.12) or
// refused (a container's seccomp profile): remount does it the old way from then on.
static int no_setattr;

// remount remounts dst (a bind mount) with add, keeping its locked flags. mount_setattr
// only sets flags, so the ones the mount has (locked or not) stay without being read
// first: one system call instead of a statfs and a remount.
static int remount(const char *dst, unsigned long add) {
	if (!no_setattr) {
		struct airlock_mount_attr attr = {0};
		attr.attr_set = (add & MS_RDONLY ? ATTR_RDONLY : 0) | (add & MS_NOSUID ? ATTR_NOSUID : 0) |
				(add & MS_NODEV ? ATTR_NODEV : 0) | (add & MS_NOEXEC ? ATTR_NOEXEC : 0);
		if (syscall(SYS_mount_setattr, AT_FDCWD, dst, 0, &attr, sizeof attr) == 0)
			return 0;
		if (errno != ENOSYS && errno != EPERM)
			return -1;
		no_setattr = 1;
	}
	struct statfs st;
	if (statfs(dst, &st) < 0)
		return -1;
	unsigned long flags = ((unsigned long)st.f_flags & LOCKED_FLAGS) | MS_BIND | MS_REMOUNT | add;
	return mount(NULL, dst, NULL, flags, NULL);
}

// readonly_tree makes dst and every mount under it read-only, nosuid and nodev in one
// step (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV).
static int readonly_tree(const char *dst) {
	struct airlock_mount_attr attr = {.attr_set = ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV};
	return (int)syscall(SYS_mount_setattr, AT_FDCWD, dst, AT_RECURSIVE, &attr, sizeof attr);
}

// op_stage names a failed step of the root plan ("mount /etc/passwd"). It is made only
// when a step fails: the name and the step's path in the new root were two snprintf
// calls for each of a run's 68 steps (the default plan), and vfprintf with the strlen
// it calls was the largest user-space cost of the spawner and init (≈ 50 of their
// ≈ 235 µs of user time a call, perf record at load 9-27).
static const char *op_stage(const struct op *o) {
	static char stage[PATH_MAX + 16];
	snprintf(stage, sizeof stage, "mount %s", o->target);
	return stage;
}

// root_path writes NEW_ROOT followed by the absolute path p to out (PATH_MAX bytes);
// -1 if p is not absolute or the result does not fit.
static int root_path(char *out, const char *p) {
	const size_t root = sizeof NEW_ROOT - 1, n = strlen(p);
	if (p[0] != '/' || root + n >= PATH_MAX)
		return -1;
	memcpy(out, NEW_ROOT, root);
	memcpy(out + root, p, n + 1);
	return 0;
}

// empty_fd is an empty directory of the root (an O_PATH descriptor), made by the /proc
// step just before the fresh /proc covers it: the source of the first directory mask,
// so that mask is a bind rather than an empty tmpfs of its own (a superblock: ~35 us to
// mount and tear down here, a bind ~5). No mount the program can write through reaches
// it: its path is under /proc.
static int empty_fd = -1;

// mask_dir hides the directory dst with an empty read-only directory: the first one a
// bind of empty_fd's directory remounted read-only, nosuid, nodev and noexec (or, before
// the /proc step made it, an empty read-only tmpfs), the others a bind of that first
// mask, which carries its flags over (a bind copies the source mount's flags), so one
// remount serves them all. -1 with errno if the first mount fails (nothing was mounted).
static char empty_dir[PATH_MAX];

static int mask_dir(const struct op *o, const char *dst) {
	if (empty_dir[0])
		return mount(empty_dir, dst, NULL, MS_BIND, NULL);
	if (empty_fd >= 0) {
		// Through the fresh /proc: the directory's own path is covered.
		char src[64];
		snprintf(src, sizeof src, "%s/proc/self/fd/%d", NEW_ROOT, empty_fd);
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			return -1;
		if (remount(dst, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC) < 0)
			fail(op_stage(o), "remount read-only");
		close(empty_fd);
		empty_fd = -1;
	} else if (mount("airlock", dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555,size=4k,nr_inodes=1") < 0) {
		// A mask before the /proc step (a directory a container bound under /usr,
		// cover_submounts) gets an empty tmpfs of its own.
		return -1;
	}
	snprintf(empty_dir, sizeof empty_dir, "%s", dst);
	return 0;
}

// null_file is the first file mask of /dev/null (a path of the new root), which the
// others bind.
static char null_file[PATH_MAX];

// mask_file hides dst, anything but a directory, with null (a bind of /dev/null, as
// runc masks): the first one remounted read-only, nosuid and noexec, the others a bind
// of it. -1 with errno if the bind fails (nothing was mounted).
static int mask_file(const struct op *o, const char *dst, const char *null) {
	const int dev_null = strcmp(null, "/dev/null") == 0;
	if (null_file[0] && dev_null)
		return mount(null_file, dst, NULL, MS_BIND, NULL);
	if (mount(null, dst, NULL, MS_BIND, NULL) < 0)
		return -1;
	if (remount(dst, MS_RDONLY | MS_NOSUID | MS_NOEXEC) < 0)
		fail(op_stage(o), "remount read-only");
	if (dev_null)
		snprintf(null_file, sizeof null_file, "%s", dst);
	return 0;
}

// What mask expects dst to be: the plan's kind for each /proc mask, or none (an lstat
// asks).
enum { MASK_DIR,
       MASK_FILE,
       MASK_ASK };

// mask hides dst, if it exists: a directory with an empty one (mask_dir), anything else
// with null (mask_file). Given the kind, it asks no lstat first: the mount looks dst up
// anyway and says ENOENT for a missing dst. (A wrong kind is refused with ENOTDIR and
// the other one is tried; that refusal costs an RCU grace period, since the kernel drops
// the bind it had cloned, so the plan says which masks are directories.) ENOENT may be
// the source's as well as dst's. A source that served a mask before is a mount this
// setup made, and nothing else changes the new root while it is built: then it is dst's.
// Otherwise only an lstat that finds no dst either leaves it unmasked.
static void mask(const struct op *o, const char *dst, const char *null, int kind) {
	struct stat st;
	if (kind == MASK_ASK) {
		if (lstat(dst, &st) < 0) {
			if (errno == ENOENT)
				return;
			fail(op_stage(o), "stat");
		}
		kind = S_ISDIR(st.st_mode) ? MASK_DIR : MASK_FILE;
	}
	const int known_source = kind == MASK_DIR ? empty_dir[0] != 0 : null_file[0] && strcmp(null, "/dev/null") == 0;
	if ((kind == MASK_DIR ? mask_dir(o, dst) : mask_file(o, dst, null)) == 0)
		return;
	if (errno == ENOENT) {
		if (known_source || (lstat(dst, &st) < 0 && errno == ENOENT))
			return;
		errno = ENOENT;
		fail(op_stage(o), "bind a mask");
	}
	if (errno != ENOTDIR)
		fail(op_stage(o), "bind a mask");
	if ((kind == MASK_DIR ? mask_file(o, dst, null) : mask_dir(o, dst)) < 0)
		fail(op_stage(o), "bind a mask");
}

// unescape_octal decodes mountinfo's \ooo escapes (space, tab, newline, backslash) in
// place.
static void unescape_octal(char *s) {
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = 0;
}

// cover_submounts masks every mount below dst, as this mount namespace's mountinfo lists
// them (parents before children; a child under a covered parent is gone already). The
// list is read whole first: each cover is a new line of mountinfo.
static void cover_submounts(const struct op *o, const char *dst) {
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		fail(op_stage(o), "read mountinfo");
	size_t n = strlen(dst), count = 0;
	char **points = NULL;
	char line[PATH_MAX * 2 + 512];
	while (fgets(line, sizeof line, f)) {
		char *field = line, *point = NULL;
		for (int i = 0; i < 5 && field; i++) {
			char *sp = strchr(field, ' ');
			if (i == 4) {
				point = field;
				if (sp)
					*sp = 0;
			}
			field = sp ? sp + 1 : NULL;
		}
		if (!point)
			continue;
		unescape_octal(point);
		if (strncmp(point, dst, n) != 0 || point[n] != '/')
			continue;
		char **grown = realloc(points, (count + 1) * sizeof *points);
		if (!grown || !(grown[count] = strdup(point)))
			_exit(EXIT_SETUP_FAILED);
		points = grown;
		count++;
	}
	fclose(f);
	for (size_t i = 0; i < count; i++) {
		mask(o, points[i], "/dev/null", MASK_ASK);
		free(points[i]);
	}
	free(points);
}

// no_sendfile is set once sendfile could not copy into the new root's tmpfs: OP_COPY
// reads and writes through a buffer from then on.
static int no_sendfile;

// copy_kernel copies src to dst inside the kernel, without a buffer: two system calls
// for a file of any size instead of a read and a write per 16 KB. It returns 0 with
// no_sendfile set where sendfile cannot serve (nothing was copied then).
static int copy_kernel(int src, int dst) {
	for (int first = 1;; first = 0) {
		ssize_t n = sendfile(dst, src, NULL, 1 << 30);
		if (n > 0)
			continue;
		if (n == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (first && (errno == EINVAL || errno == ENOSYS)) {
			no_sendfile = 1;
			return 0;
		}
		return -1;
	}
}

static void apply_op(const struct op *o) {
	char dst[PATH_MAX];
	if (root_path(dst, o->target) < 0)
		failf(op_stage(o), EINVAL, "bad target");
	switch (o->kind) {
	case OP_DIR:
		if (mkdir_p(dst, 0755) < 0)
			fail(op_stage(o), "mkdir");
		know_dir(dst, strlen(dst));
		break;
	case OP_SYMLINK:
		if (plan_parent(dst) < 0)
			fail(op_stage(o), "mkdir");
		if (symlink(o->link, dst) < 0)
			fail(op_stage(o), "symlink");
		break;
	case OP_COPY: {
		if (plan_parent(dst) < 0)
			fail(op_stage(o), "mkdir");
		int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			fail(op_stage(o), "create");
		if (!o->source[0]) {
			if (write_all(fd, o->content, o->content_len) < 0)
				fail(op_stage(o), "write");
		} else {
			// The host's file, read through the host's root, which is still in place. A
			// missing one leaves an empty file.
			int src = open(o->source, O_RDONLY | O_CLOEXEC | O_NOCTTY);
			if (src < 0 && errno != ENOENT)
				fail(op_stage(o), "open source");
			if (src >= 0 && !no_sendfile && copy_kernel(src, fd) < 0)
				fail(op_stage(o), "copy");
			char buf[16384];
			for (ssize_t n; src >= 0 && no_sendfile;) {
				n = read(src, buf, sizeof buf);
				if (n < 0 && errno == EINTR)
					continue;
				if (n < 0)
					fail(op_stage(o), "read source");
				if (n == 0)
					break;
				if (write_all(fd, buf, (size_t)n) < 0)
					fail(op_stage(o), "write");
			}
			if (src >= 0)
				close(src);
		}
		close(fd);
		break;
	}
	case OP_BIND_RO:
		if (mount_point(dst, o->is_file) < 0)
			fail(op_stage(o), "mount point");
		// Not recursive: submounts of the source stay hidden. Where the source holds
		// mounts locked by a more privileged user namespace (a file a container engine
		// bound under /usr), the kernel refuses that with EINVAL, since it would uncover
		// what they hide: then the whole tree, made read-only as a whole.
		if (mount(o->source, dst, NULL, MS_BIND, NULL) == 0) {
			if (remount(dst, MS_RDONLY | MS_NOSUID | MS_NODEV) < 0)
				fail(op_stage(o), "remount read-only");
			break;
		}
		// The submounts come along, but stay hidden as before: each is covered (they
		// are locked and cannot be unmounted), and then the whole tree is read-only.
		if (errno != EINVAL)
			fail(op_stage(o), "bind");
		if (mount(o->source, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
			fail(op_stage(o), "bind recursively");
		cover_submounts(o, dst);
		if (readonly_tree(dst) < 0)
			fail(op_stage(o), "mount_setattr read-only (Linux 5.12 or later)");
		break;
	case OP_MASK:
		// A path of the fresh /proc the program must not read (procMasks).
		mask(o, dst, o->source, o->is_file ? MASK_FILE : MASK_DIR);
		break;
	case OP_BIND_DEV:
		// The host's own node: read-only, or utimensat (which needs only write
		// permission, and /dev/null is 0666) would set the host's times to now, a change
		// every other run sees (TestDeviceNodesUnchanged). The kernel's read-only checks
		// spare device files, so writing to /dev/null still works; a nodev mount would
		// make the node unusable. nosuid and noexec cost nothing.
		if (mount_point(dst, 1) < 0)
			fail(op_stage(o), "mount point");
		if (mount(o->source, dst, NULL, MS_BIND, NULL) < 0)
			fail(op_stage(o), "bind");
		if (remount(dst, MS_RDONLY | MS_NOSUID | MS_NOEXEC) < 0)
			fail(op_stage(o), "remount");
		break;
	case OP_SCRATCH: {
		// A directory of the root's superblock where the program writes (/tmp,
		// /dev/shm): a bind instead of a tmpfs of its own. Its path (source) lies under
		// a later step's mount, so the bind is the only way to it. The bind takes the
		// root mount's flags (nosuid, nodev, still writable) and seal, which remounts
		// only "/", leaves it writable.
		char src[PATH_MAX];
		if (root_path(src, o->source) < 0)
			failf(op_stage(o), EINVAL, "bad source");
		if (mkdir_p(src, 0755) < 0 || mkdir_p(dst, 0755) < 0)
			fail(op_stage(o), "mkdir");
		// Past the umask, as a tmpfs's mode= option was.
		if (chmod(src, 01777) < 0)
			fail(op_stage(o), "chmod");
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			fail(op_stage(o), "bind");
		if (remount(dst, (unsigned long)o->flags) < 0)
			fail(op_stage(o), "remount");
		know_dir(dst, strlen(dst));
		break;
	}
	case OP_TMPFS:
		if (mkdir_p(dst, 0755) < 0)
			fail(op_stage(o), "mkdir");
		if (mount("airlock", dst, "tmpfs", (unsigned long)o->flags, o->data) < 0)
			fail(op_stage(o), "mount tmpfs");
		know_dir(dst, strlen(dst));
		break;
	case OP_PROC: {
		char empty[PATH_MAX + 8];
		snprintf(empty, sizeof empty, "%s/empty", dst);
		if (mkdir_p(empty, 0555) < 0)
			fail(op_stage(o), "mkdir");
		empty_fd = open(empty, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (empty_fd < 0)
			fail(op_stage(o), "open an empty directory");
		if (mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			fail(op_stage(o), "mount proc");
		break;
	}
	default:
		failf(op_stage(o), EINVAL, "unknown step %u", o->kind);
	}
}

// make_private cuts the mount namespace off from the host's: nothing mounted here
// propagates out, and nothing the host mounts later appears in the sandbox.
void make_private(void) {
	if (mount("", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fail("mount: make / private", "mount");
}

static void build_root(const struct config *cfg) {
	// The skeleton's size and inodes are the first step's data (rootPlan).
	if (cfg->nops == 0 || cfg->ops[0].kind != OP_TMPFS || strcmp(cfg->ops[0].target, "/") != 0)
		failf("mount: root tmpfs", EINVAL, "the plan does not start with the root tmpfs");
	if (mount("airlock", NEW_ROOT, "tmpfs", (unsigned long)cfg->ops[0].flags, cfg->ops[0].data) < 0)
		fail("mount: root tmpfs", "mount");
	know_dir(NEW_ROOT, strlen(NEW_ROOT));
	for (uint32_t i = 1; i < cfg->nops; i++)
		apply_op(&cfg->ops[i]);
}

// pivot makes the new root the root and detaches the host's, so no path leads back.
static void pivot(void) {
	if (chdir(NEW_ROOT) < 0)
		fail("pivot_root: chdir", "chdir");
	// pivot_root(".", ".") stacks the old root on the new one; detaching "." then
	// removes the old root without a put_old directory.
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		fail("pivot_root", "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		fail("pivot_root: detach old root", "umount");
	if (chdir("/") < 0)
		fail("pivot_root: chdir /", "chdir");
}

// seal makes the root skeleton (/dev with it) and /proc read-only once they are
// complete.
static void seal(void) {
	static const char *const paths[] = {"/", "/proc"};
	for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
		if (remount(paths[i], MS_RDONLY) < 0) {
			char stage[64];
			snprintf(stage, sizeof stage, "remount %s read-only", paths[i]);
			fail(stage, "remount");
		}
	}
}

// drop_caps empties the bounding, ambient and inheritable sets, so nothing the program
// execs can regain a capability in this user namespace. The inheritable set matters on
// its own: the kernel does not mask it with the bounding set. The init keeps its
// permitted and effective sets for the few steps left.
void drop_caps(void) {
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		fail("drop capabilities", "clear ambient");
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		fail("drop capabilities", "capget");
	data[0].inheritable = 0;
	data[1].inheritable = 0;
	if (syscall(SYS_capset, &hdr, data) < 0)
		fail("drop capabilities", "clear inheritable capabilities");
	// Capabilities are numbered from 0 to the kernel's last without a gap: the first
	// EINVAL is the end of the set (about 40 calls instead of 64).
	for (int c = 0; c < 64; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL && c > 0)
			break;
		fail("drop capabilities", "drop a bounding capability");
	}
}

void load_seccomp(const struct config *cfg) {
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail(cfg->filter_len ? "seccomp" : "no_new_privs", "no_new_privs");
	if (cfg->filter_len == 0)
		return; // only tests that prove a probe can fail without it
	struct sock_fprog prog = {(unsigned short)cfg->filter_len, cfg->filter};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		fail("seccomp", "seccomp: load");
}

static void *net_thread_main(void *arg) {
	struct net_thread *n = arg;
	__atomic_store_n(&n->started, 1, __ATOMIC_RELEASE);
	if (unshare(CLONE_NEWNET) < 0) {
		n->err = errno;
		return NULL;
	}
	n->fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (n->fd < 0)
		n->err = errno;
	return NULL;
}

// The network thread's stack: the thread makes one system call and opens one file. A
// stack of glibc's own is an 8 MiB mapping with a guard page (mmap, mprotect) that the
// thread hands back with an madvise as it exits, whose TLB shoot-down interrupts the
// init's other CPU (in a VM, an exit to the host); glibc leaves a stack it was given
// alone. Untouched pages of it cost nothing; 256 KiB is at least PTHREAD_STACK_MIN on
// every architecture (128 KiB on arm64). An init starts the thread once.
static char net_stack[256 << 10] __attribute__((aligned(64)));

// new_net_thread starts the thread, on cpus if given, on net_stack if stack is set:
// 0 or the error.
static int new_net_thread(struct net_thread *n, const cpu_set_t *cpus, int stack) {
	pthread_attr_t attr;
	int e = pthread_attr_init(&attr);
	if (e != 0)
		return e;
	if (stack)
		e = pthread_attr_setstack(&attr, net_stack, sizeof net_stack);
	if (e == 0 && cpus)
		e = pthread_attr_setaffinity_np(&attr, sizeof *cpus, cpus);
	if (e == 0)
		e = pthread_create(&n->thread, &attr, net_thread_main, n);
	pthread_attr_destroy(&attr);
	return e;
}

// start_net starts the thread on the CPUs this one may use but is not on, when there are
// any. Placed on its creator's CPU, as a new thread is, it did not run until the main
// thread blocked in join_net, the other CPU idle all the while: the namespace was
// created after the root instead of beside it (0.40–0.58 ms of the init's wait in
// join_net, sched_switch traces of cold runs on this 2-CPU VM).
void start_net(struct net_thread *n) {
	n->fd = -1;
	n->err = 0;
	n->started = 0;
	n->pinned = 0;
	cpu_set_t allowed;
	int cpu = sched_getcpu(), e = -1;
	if (cpu >= 0 && sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 1) {
		cpu_set_t others = allowed;
		CPU_CLR(cpu, &others);
		e = new_net_thread(n, &others, 1);
		n->pinned = e == 0;
	}
	// Not started for the affinity's sake: started as before, on a stack of glibc's
	// (a thread that failed to start may still be leaving net_stack).
	if (e != 0)
		e = new_net_thread(n, NULL, 0);
	if (e != 0) {
		errno = e;
		fail("network namespace", "thread");
	}
}

// pass_fd sends the server a report frame of kind with fd attached (SCM_RIGHTS); a
// failure fails stage.
static void pass_fd(uint8_t kind, int fd, const char *stage, const char *what) {
	uint8_t frame[5];
	uint32_t len = 1;
	memcpy(frame, &len, 4);
	frame[4] = kind;
	struct iovec iov = {frame, sizeof frame};
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof cbuf);
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	ssize_t n;
	do
		n = sendmsg(REPORT_FD, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof frame)
		fail(stage, what);
}

static void join_net(struct net_thread *n) {
	// A thread the other CPUs have not run yet (they are busy) is moved to this one,
	// which is about to wait for it: at worst the namespace is made after the root, as
	// before the pin. (The scheduler does not move a queued thread that has just run to
	// an idle CPU at once: once, 1.4 ms.)
	if (n->pinned && !__atomic_load_n(&n->started, __ATOMIC_ACQUIRE)) {
		cpu_set_t here;
		int cpu = sched_getcpu();
		CPU_ZERO(&here);
		if (cpu >= 0) {
			CPU_SET(cpu, &here);
			(void)pthread_setaffinity_np(n->thread, sizeof here, &here);
		}
	}
	int e = pthread_join(n->thread, NULL);
	if (e != 0) {
		errno = e;
		fail("network namespace", "join thread");
	}
	if (n->fd < 0) {
		errno = n->err;
		fail("network namespace", "unshare");
	}
	if (setns(n->fd, CLONE_NEWNET) < 0)
		fail("network namespace", "setns");
	// The server holds the namespace once the sandbox is dead and drops it with
	// others (netns_linux.go: the kernel's teardown is largely per batch).
	pass_fd(REP_NETNS, n->fd, "network namespace", "pass the namespace");
	close(n->fd);
}

// bridge is the sandbox's one way out under network "allowlist": it brings up lo, the
// namespace's only interface, listens on 127.0.0.1:port there, and passes the listening
// socket to the server over the report socket (SCM_RIGHTS, with a REP_LISTENER frame).
// The server accepts its connections into the egress proxy; the init keeps no copy, so
// the program can neither accept them itself nor bind the port while the server holds it.
static void bridge(uint32_t port) {
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		fail("network bridge", "socket");
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		fail("network bridge", "get lo flags");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		fail("network bridge", "bring lo up");
	close(s);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		fail("network bridge", "socket");
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (struct sockaddr *)&sa, sizeof sa) < 0)
		fail("network bridge", "bind");
	if (listen(l, 128) < 0)
		fail("network bridge", "listen");
	pass_fd(REP_LISTENER, l, "network bridge", "pass the listener");
	close(l);
}

// setup builds the sandbox up to the point where a program can start. The order is
// fixed:
//
//	mounts (while a thread creates the network namespace) → join it → the bridge
//	(allowlist only) → pivot_root → seal root → hostname → dumpable off → close-on-exec fds ≥ 3
//	→ drop capabilities → cgroup ns → seccomp
//
// Seccomp comes last, so the fewest syscalls run under it before exec; it applies to
// the init too, which needs nothing it denies from then on.
void setup(const struct config *cfg, struct net_thread *net) {
	int new_net = (cfg->clone_flags & CLONE_NEWNET) != 0;
	build_root(cfg);
	if (new_net)
		join_net(net);
	if (cfg->proxy_port)
		bridge(cfg->proxy_port);
	pivot();
	seal();
	// An empty name: the container forbids sethostname, and the namespace keeps the
	// name it inherited (KeepHostname).
	if (cfg->hostname[0] && sethostname(cfg->hostname, strlen(cfg->hostname)) < 0)
		fail("sethostname", "sethostname");
	// Not dumpable: the program (same uid) cannot open /proc/1/mem or /proc/1/fd.
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fail("prctl dumpable", "prctl");
	// The report pipe included: the program inherits only stdin, stdout and stderr.
	if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		fail("close fds", "close_range");
	drop_caps();
	// A cgroup namespace rooted at the sandbox's own cgroup hides the host's paths.
	if (unshare(CLONE_NEWCGROUP) < 0)
		fail("unshare cgroup namespace", "unshare");
	load_seccomp(cfg);
}
