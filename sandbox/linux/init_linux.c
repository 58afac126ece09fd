// The sandbox's init (pid 1 of its namespaces), in C.
//
// The server starts its own binary once as argv "airlock-sandbox-init zygote". This
// constructor runs before the Go runtime starts and sees that: the process is the
// zygote, which forks one spawner per sandbox (zygote below); the spawner clones the
// init into new namespaces (spawner); the init builds the sandbox, runs the program,
// reaps everything, reports, and exits. None of them ever starts the Go runtime. A Go
// init cost ~2.3 ms of runtime and package start-up per sandbox, its threads, and a
// signal handler for every signal (which pid 1 must then ignore by hand). A C pid 1
// with default dispositions is immune to every signal sent from inside its pid
// namespace, SIGKILL included, by the kernel's own rule.
//
// The parent (launch_linux.go) plans everything: the mount plan, the rlimits, the
// seccomp program, the files. This code executes that plan, in a fixed order, and
// trusts its input, which comes from the server binary itself over fd 3. It trusts
// nothing the program leaves behind (the output directory it reads after the program is
// dead). The wire format is in protocol_linux.go; both ends are this one binary.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "landlock_linux.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

// Keep in step with protocol_linux.go.
#define INIT_NAME "airlock-sandbox-init"
#define CONFIG_FD 3
#define REPORT_FD 4
#define EXIT_SETUP_FAILED 125
#define MAX_FRAME (1U << 30)

enum { REP_READY = 1, REP_STARTED = 2, REP_EXIT = 3, REP_ERROR = 4, REP_LEFTOVER = 5, REP_LISTENER = 6 };
enum { CFG_SETUP_ONLY = 1, CFG_OWN_UID = 2 };

// Kinds of mount plan steps: mountKind in mount_linux.go.
enum { OP_DIR, OP_SYMLINK, OP_BIND_RO, OP_TMPFS, OP_PROC, OP_COPY, OP_BIND_DEV, OP_MASK };

// The root is built in a tmpfs over /tmp of the private mount namespace (newRoot).
#define NEW_ROOT "/tmp"

// The program's working directory: /workspace of the new root, or in the Landlock tier
// the run's own directory on the host (landlock_setup).
static const char *workspace_dir = "/workspace";

// The Landlock tier: no pid namespace ends the program's descendants (reap, ll_sweep).
static int landlock_tier;

// Per-mount flags the kernel locks on mounts from a more privileged user namespace: a
// remount that drops one fails with EPERM, so they are carried over from the source.
#define LOCKED_FLAGS (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME)

// ---- reporting ----------------------------------------------------------------------

struct wbuf {
	uint8_t *p;
	size_t n, cap;
};

static void wb_put(struct wbuf *b, const void *src, size_t n) {
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p)
			_exit(EXIT_SETUP_FAILED);
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, src, n);
	b->n += n;
}

static void wb_u8(struct wbuf *b, uint8_t v) { wb_put(b, &v, 1); }
static void wb_u32(struct wbuf *b, uint32_t v) { wb_put(b, &v, 4); }
static void wb_i64(struct wbuf *b, int64_t v) { wb_put(b, &v, 8); }

static void wb_bytes(struct wbuf *b, const void *p, size_t n) {
	wb_u32(b, (uint32_t)n);
	wb_put(b, p, n);
}

static void wb_str(struct wbuf *b, const char *s) { wb_bytes(b, s, s ? strlen(s) : 0); }

static int write_all(int fd, const void *p, size_t n) {
	const uint8_t *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

// report sends one frame: its length, the kind, the payload. A failed write means the
// parent is gone, and Pdeathsig ends us anyway.
static void report(uint8_t kind, struct wbuf *payload) {
	struct wbuf f = {0};
	wb_u32(&f, (uint32_t)(1 + (payload ? payload->n : 0)));
	wb_u8(&f, kind);
	if (payload && payload->n)
		wb_put(&f, payload->p, payload->n);
	write_all(REPORT_FD, f.p, f.n);
	free(f.p);
}

// fail reports a setup failure at stage and exits.
static void __attribute__((noreturn)) failf(const char *stage, int err, const char *fmt, ...) {
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	struct wbuf b = {0};
	wb_str(&b, stage);
	wb_u32(&b, (uint32_t)err);
	wb_str(&b, msg);
	report(REP_ERROR, &b);
	_exit(EXIT_SETUP_FAILED);
}

// fail reports errno at stage, with what was being done.
#define fail(stage, what) \
	do { \
		int e_ = errno; \
		failf((stage), e_, "%s: %s", (what), strerror(e_)); \
	} while (0)

// ---- reading the parent's frames ----------------------------------------------------

static int read_full(int fd, void *p, size_t n) {
	uint8_t *c = p;
	while (n > 0) {
		ssize_t r = read(fd, c, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			errno = EPIPE;
			return -1;
		}
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

struct cur {
	const uint8_t *p;
	size_t n;
	int bad;
};

// read_frame reads one length-prefixed frame from the parent.
static struct cur read_frame(const char *stage) {
	uint32_t n;
	if (read_full(CONFIG_FD, &n, 4) < 0)
		fail(stage, "read");
	if (n > MAX_FRAME)
		failf(stage, EINVAL, "frame of %u bytes", n);
	uint8_t *p = malloc(n ? n : 1);
	if (!p)
		fail(stage, "malloc");
	if (read_full(CONFIG_FD, p, n) < 0)
		fail(stage, "read");
	return (struct cur){p, n, 0};
}

// rd_fixed copies the next n bytes into out, or marks the frame bad and zeroes out.
static void rd_fixed(struct cur *c, void *out, size_t n) {
	if (c->n < n) {
		c->bad = 1;
		memset(out, 0, n);
		return;
	}
	memcpy(out, c->p, n);
	c->p += n;
	c->n -= n;
}

static uint32_t rd_u32(struct cur *c) {
	uint32_t v;
	rd_fixed(c, &v, sizeof v);
	return v;
}

static uint64_t rd_u64(struct cur *c) {
	uint64_t v;
	rd_fixed(c, &v, sizeof v);
	return v;
}

static const uint8_t *rd_bytes(struct cur *c, uint32_t *len) {
	uint32_t n = rd_u32(c);
	if (c->bad || c->n < n) {
		c->bad = 1;
		*len = 0;
		return (const uint8_t *)"";
	}
	const uint8_t *p = c->p;
	c->p += n;
	c->n -= n;
	*len = n;
	return p;
}

// rd_str reads a string that must not contain NUL (paths, argv, environment).
static char *rd_str(struct cur *c) {
	uint32_t n;
	const uint8_t *p = rd_bytes(c, &n);
	if (memchr(p, 0, n))
		c->bad = 1;
	char *s = malloc(n + 1);
	if (!s)
		_exit(EXIT_SETUP_FAILED);
	memcpy(s, p, n);
	s[n] = 0;
	return s;
}

static char **rd_strv(struct cur *c) {
	uint32_t n = rd_u32(c);
	if (c->bad || n > c->n / 4) {
		c->bad = 1;
		n = 0;
	}
	char **v = calloc(n + 1, sizeof *v);
	if (!v)
		_exit(EXIT_SETUP_FAILED);
	for (uint32_t i = 0; i < n; i++)
		v[i] = rd_str(c);
	return v;
}

struct rlim {
	uint32_t res;
	uint64_t value;
};

static struct rlim *rd_rlimits(struct cur *c, uint32_t *n) {
	*n = rd_u32(c);
	if (c->bad || *n > 64) {
		c->bad = 1;
		*n = 0;
	}
	struct rlim *r = calloc(*n + 1, sizeof *r);
	if (!r)
		_exit(EXIT_SETUP_FAILED);
	for (uint32_t i = 0; i < *n; i++) {
		r[i].res = rd_u32(c);
		r[i].value = rd_u64(c);
	}
	return r;
}

struct op {
	uint32_t kind, is_file;
	uint64_t flags;
	char *source, *target, *link, *data;
	const uint8_t *content;
	uint32_t content_len;
};

struct config {
	uint32_t flags;
	uint32_t clone_flags; // the namespaces
	uint32_t host_uid, host_gid; // what the sandbox's uid and gid map to
	char *uidmap, *gidmap;       // newuidmap, newgidmap; empty: the spawner writes the maps
	char *hostname;
	uint32_t nops;
	struct op *ops;
	struct sock_filter *filter;
	uint32_t filter_len; // instructions
	char **env;
	char **preload;
	char *out_dir;
	int64_t max_files, max_file_bytes, max_total;
	uint32_t max_entries, max_depth;
	uint32_t nrl;
	struct rlim *rl;
	uint32_t proxy_port; // network "allowlist": the bridge's port on 127.0.0.1, else 0
	struct ll_plan ll;   // CFG_LANDLOCK: the landlock frame
};

static void read_config(struct config *cfg) {
	struct cur c = read_frame("read config");
	cfg->flags = rd_u32(&c);
	cfg->clone_flags = rd_u32(&c);
	cfg->host_uid = rd_u32(&c);
	cfg->host_gid = rd_u32(&c);
	cfg->uidmap = rd_str(&c);
	cfg->gidmap = rd_str(&c);
	cfg->hostname = rd_str(&c);
	cfg->nops = rd_u32(&c);
	if (c.bad || cfg->nops > 4096)
		failf("read config", EINVAL, "malformed mount plan");
	cfg->ops = calloc(cfg->nops + 1, sizeof *cfg->ops);
	if (!cfg->ops)
		fail("read config", "malloc");
	for (uint32_t i = 0; i < cfg->nops; i++) {
		struct op *o = &cfg->ops[i];
		o->kind = rd_u32(&c);
		o->is_file = rd_u32(&c);
		o->flags = rd_u64(&c);
		o->source = rd_str(&c);
		o->target = rd_str(&c);
		o->link = rd_str(&c);
		o->data = rd_str(&c);
		o->content = rd_bytes(&c, &o->content_len);
	}
	uint32_t flen;
	const uint8_t *f = rd_bytes(&c, &flen);
	if (flen % sizeof(struct sock_filter) != 0 || flen / sizeof(struct sock_filter) > BPF_MAXINSNS)
		failf("seccomp", EINVAL, "seccomp: malformed program of %u bytes", flen);
	// A copy: the frame gives no alignment, the kernel wants struct sock_filter's.
	cfg->filter = malloc(flen ? flen : 1);
	if (!cfg->filter)
		fail("read config", "malloc");
	memcpy(cfg->filter, f, flen);
	cfg->filter_len = flen / sizeof(struct sock_filter);
	cfg->env = rd_strv(&c);
	cfg->preload = rd_strv(&c);
	cfg->out_dir = rd_str(&c);
	cfg->max_files = (int64_t)rd_u64(&c);
	cfg->max_file_bytes = (int64_t)rd_u64(&c);
	cfg->max_total = (int64_t)rd_u64(&c);
	cfg->max_entries = rd_u32(&c);
	cfg->max_depth = rd_u32(&c);
	cfg->rl = rd_rlimits(&c, &cfg->nrl);
	cfg->proxy_port = rd_u32(&c);
	if (c.bad || c.n != 0 || cfg->proxy_port > 65535)
		failf("read config", EINVAL, "malformed config frame");
}

struct file {
	char *path;
	uint32_t mode;
	const uint8_t *data;
	uint32_t len;
};

struct handover {
	char **argv, **tail;
	const uint8_t *code;
	uint32_t code_len;
	char *code_file;
	uint32_t nfiles;
	struct file *files;
	uint32_t nrl;
	struct rlim *rl;
};

static void read_handover(struct handover *h) {
	struct cur c = read_frame("read handover");
	h->argv = rd_strv(&c);
	h->tail = rd_strv(&c);
	h->code = rd_bytes(&c, &h->code_len);
	h->code_file = rd_str(&c);
	h->nfiles = rd_u32(&c);
	if (c.bad || h->nfiles > c.n / 4)
		failf("read handover", EINVAL, "malformed handover");
	h->files = calloc(h->nfiles + 1, sizeof *h->files);
	if (!h->files)
		fail("read handover", "malloc");
	for (uint32_t i = 0; i < h->nfiles; i++) {
		h->files[i].path = rd_str(&c);
		h->files[i].mode = rd_u32(&c);
		h->files[i].data = rd_bytes(&c, &h->files[i].len);
	}
	h->rl = rd_rlimits(&c, &h->nrl);
	if (c.bad || c.n != 0)
		failf("read handover", EINVAL, "malformed handover frame");
}

// ---- the root -----------------------------------------------------------------------

// mkdir_parent creates the directories above path (it and mkdir_p call each other).
static int mkdir_parent(const char *path);

// mkdir_p creates path and its parents; an existing directory is fine. Most parents
// already exist, so it tries path itself first and climbs only on ENOENT: one syscall
// for most of the root plan's steps instead of one per component.
static int mkdir_p(const char *path, mode_t mode) {
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

static int mkdir_parent(const char *path) {
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

static int mount_point(const char *dst, int is_file) {
	if (!is_file)
		return mkdir_p(dst, 0755);
	if (mkdir_parent(dst) < 0)
		return -1;
	int fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

// remount_flags remounts dst (a bind mount) with add, keeping its locked flags.
static int remount(const char *dst, unsigned long add) {
	struct statfs st;
	if (statfs(dst, &st) < 0)
		return -1;
	unsigned long flags = ((unsigned long)st.f_flags & LOCKED_FLAGS) | MS_BIND | MS_REMOUNT | add;
	return mount(NULL, dst, NULL, flags, NULL);
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

// readonly_tree makes dst and every mount under it read-only, nosuid and nodev in one
// step (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV).
static int readonly_tree(const char *dst) {
	struct airlock_mount_attr attr = {.attr_set = 0x1 | 0x2 | 0x4};
	return (int)syscall(SYS_mount_setattr, AT_FDCWD, dst, AT_RECURSIVE, &attr, sizeof attr);
}

// mask hides dst, if it exists: an empty read-only tmpfs over a directory, null (a bind
// of /dev/null, as runc masks) over anything else. The first directory gets the tmpfs and
// the others a bind of it: a tmpfs superblock cost ~35 us here, a bind ~5.
static void mask(const char *stage, const char *dst, const char *null) {
	static char empty_dir[PATH_MAX];
	struct stat st;
	if (lstat(dst, &st) < 0) {
		if (errno == ENOENT)
			return;
		fail(stage, "stat");
	}
	if (S_ISDIR(st.st_mode)) {
		if (empty_dir[0]) {
			// A bind keeps the source mount's read-only flag.
			if (mount(empty_dir, dst, NULL, MS_BIND, NULL) < 0)
				fail(stage, "bind an empty directory");
			return;
		}
		if (mount("airlock", dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555,size=4k,nr_inodes=1") < 0)
			fail(stage, "mount an empty tmpfs");
		snprintf(empty_dir, sizeof empty_dir, "%s", dst);
		return;
	}
	if (mount(null, dst, NULL, MS_BIND, NULL) < 0)
		fail(stage, "bind");
	if (remount(dst, MS_RDONLY | MS_NOSUID | MS_NOEXEC) < 0)
		fail(stage, "remount read-only");
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
static void cover_submounts(const char *stage, const char *dst) {
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		fail(stage, "read mountinfo");
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
		mask(stage, points[i], "/dev/null");
		free(points[i]);
	}
	free(points);
}

static void apply_op(const struct op *o) {
	char dst[PATH_MAX];
	char stage[PATH_MAX + 16];
	snprintf(stage, sizeof stage, "mount %s", o->target);
	if (o->target[0] != '/' || snprintf(dst, sizeof dst, "%s%s", NEW_ROOT, o->target) >= (int)sizeof dst)
		failf(stage, EINVAL, "bad target");
	switch (o->kind) {
	case OP_DIR:
		if (mkdir_p(dst, 0755) < 0)
			fail(stage, "mkdir");
		break;
	case OP_SYMLINK:
		if (mkdir_parent(dst) < 0)
			fail(stage, "mkdir");
		if (symlink(o->link, dst) < 0)
			fail(stage, "symlink");
		break;
	case OP_COPY: {
		if (mkdir_parent(dst) < 0)
			fail(stage, "mkdir");
		int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			fail(stage, "create");
		if (!o->source[0]) {
			if (write_all(fd, o->content, o->content_len) < 0)
				fail(stage, "write");
		} else {
			// The host's file, read through the host's root, which is still in place. A
			// missing one leaves an empty file.
			int src = open(o->source, O_RDONLY | O_CLOEXEC | O_NOCTTY);
			if (src < 0 && errno != ENOENT)
				fail(stage, "open source");
			char buf[16384];
			for (ssize_t n; src >= 0;) {
				n = read(src, buf, sizeof buf);
				if (n < 0 && errno == EINTR)
					continue;
				if (n < 0)
					fail(stage, "read source");
				if (n == 0)
					break;
				if (write_all(fd, buf, (size_t)n) < 0)
					fail(stage, "write");
			}
			if (src >= 0)
				close(src);
		}
		close(fd);
		break;
	}
	case OP_BIND_RO:
		if (mount_point(dst, o->is_file) < 0)
			fail(stage, "mount point");
		// Not recursive: submounts of the source stay hidden. Where the source holds
		// mounts locked by a more privileged user namespace (a file a container engine
		// bound under /usr), the kernel refuses that with EINVAL, since it would uncover
		// what they hide: then the whole tree, made read-only as a whole.
		if (mount(o->source, dst, NULL, MS_BIND, NULL) == 0) {
			if (remount(dst, MS_RDONLY | MS_NOSUID | MS_NODEV) < 0)
				fail(stage, "remount read-only");
			break;
		}
		// The submounts come along, but stay hidden as before: each is covered (they
		// are locked and cannot be unmounted), and then the whole tree is read-only.
		if (errno != EINVAL)
			fail(stage, "bind");
		if (mount(o->source, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
			fail(stage, "bind recursively");
		cover_submounts(stage, dst);
		if (readonly_tree(dst) < 0)
			fail(stage, "mount_setattr read-only (Linux 5.12 or later)");
		break;
	case OP_MASK:
		// A path of the fresh /proc the program must not read (procMasks).
		mask(stage, dst, o->source);
		break;
	case OP_BIND_DEV:
		// A read-only or nodev mount would make the node unusable (writing to /dev/null
		// must work); nosuid and noexec cost nothing.
		if (mount_point(dst, 1) < 0)
			fail(stage, "mount point");
		if (mount(o->source, dst, NULL, MS_BIND, NULL) < 0)
			fail(stage, "bind");
		if (remount(dst, MS_NOSUID | MS_NOEXEC) < 0)
			fail(stage, "remount");
		break;
	case OP_TMPFS:
		if (mkdir_p(dst, 0755) < 0)
			fail(stage, "mkdir");
		if (mount("airlock", dst, "tmpfs", (unsigned long)o->flags, o->data) < 0)
			fail(stage, "mount tmpfs");
		break;
	case OP_PROC:
		if (mkdir_p(dst, 0555) < 0)
			fail(stage, "mkdir");
		if (mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			fail(stage, "mount proc");
		break;
	default:
		failf(stage, EINVAL, "unknown step %u", o->kind);
	}
}

// make_private cuts the mount namespace off from the host's: nothing mounted here
// propagates out, and nothing the host mounts later appears in the sandbox.
static void make_private(void) {
	if (mount("", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fail("mount: make / private", "mount");
}

static void build_root(const struct config *cfg) {
	// The skeleton's size and inodes are the first step's data (rootPlan).
	if (cfg->nops == 0 || cfg->ops[0].kind != OP_TMPFS || strcmp(cfg->ops[0].target, "/") != 0)
		failf("mount: root tmpfs", EINVAL, "the plan does not start with the root tmpfs");
	if (mount("airlock", NEW_ROOT, "tmpfs", (unsigned long)cfg->ops[0].flags, cfg->ops[0].data) < 0)
		fail("mount: root tmpfs", "mount");
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

// seal makes the root skeleton, /dev and /proc read-only once they are complete.
static void seal(void) {
	static const char *const paths[] = {"/", "/dev", "/proc"};
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
static void drop_caps(void) {
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
	for (int c = 0; c < 64; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			fail("drop capabilities", "drop a bounding capability");
	}
}

static void load_seccomp(const struct config *cfg) {
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail(cfg->filter_len ? "seccomp" : "no_new_privs", "no_new_privs");
	if (cfg->filter_len == 0)
		return; // only tests that prove a probe can fail without it
	struct sock_fprog prog = {(unsigned short)cfg->filter_len, cfg->filter};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		fail("seccomp", "seccomp: load");
}

// await reads the spawner's next byte, which must be want. Anything else means the
// spawner failed (and reported why) or is gone: the init leaves without a word.
static void await(int sync, char want) {
	char b = 0;
	ssize_t n;
	do
		n = read(sync, &b, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1 || b != want)
		_exit(EXIT_SETUP_FAILED);
}

// A network namespace costs ~0.8 ms to create, most of a whole clone's, so a thread of
// the init creates it while the main thread builds the root, then the init joins it
// (start_net, join_net). A thread, not a process: forking the init cost more than it
// saved. The thread's namespace is reached through its descriptor, opened before the
// thread exits.
struct net_thread {
	pthread_t thread;
	int fd;  // the new namespace, or -1
	int err; // why there is none
};

static void *net_thread_main(void *arg) {
	struct net_thread *n = arg;
	if (unshare(CLONE_NEWNET) < 0) {
		n->err = errno;
		return NULL;
	}
	n->fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (n->fd < 0)
		n->err = errno;
	return NULL;
}

static void start_net(struct net_thread *n) {
	n->fd = -1;
	n->err = 0;
	int e = pthread_create(&n->thread, NULL, net_thread_main, n);
	if (e != 0) {
		errno = e;
		fail("network namespace", "thread");
	}
}

static void join_net(struct net_thread *n) {
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
	uint8_t frame[5];
	uint32_t len = 1;
	memcpy(frame, &len, 4);
	frame[4] = REP_LISTENER;
	struct iovec iov = {frame, sizeof frame};
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof cbuf);
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &l, sizeof l);
	ssize_t n;
	do
		n = sendmsg(REPORT_FD, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof frame)
		fail("network bridge", "pass the listener");
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
static void setup(const struct config *cfg, struct net_thread *net) {
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

// ---- programs -----------------------------------------------------------------------

static const char *const base_env[] = {
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/workspace",
	"TMPDIR=/tmp",
	"LANG=C.UTF-8",
	"USER=sandbox",
	"LOGNAME=sandbox",
};

// program_env is the whole environment of a program: nothing of the server's.
static char **program_env(char **extra) {
	size_t nb = sizeof base_env / sizeof *base_env, ne = 0;
	while (extra[ne])
		ne++;
	char **env = calloc(nb + ne + 1, sizeof *env);
	if (!env)
		_exit(EXIT_SETUP_FAILED);
	size_t n = 0;
	for (size_t i = 0; i < nb; i++) {
		// An entry of extra with the same name replaces the base one (the Landlock
		// tier's HOME and TMPDIR): getenv finds the first.
		size_t k = strcspn(base_env[i], "=") + 1;
		int replaced = 0;
		for (size_t j = 0; j < ne && !replaced; j++)
			replaced = strncmp(extra[j], base_env[i], k) == 0;
		if (!replaced)
			env[n++] = (char *)base_env[i];
	}
	for (size_t i = 0; i < ne; i++)
		env[n++] = extra[i];
	return env;
}

// spawn is what start_program's child needs, and where it leaves why it failed.
struct spawn {
	char **argv, **env;
	int *fds, nfds;
	const struct rlim *rl;
	uint32_t nrl;
	int what, err; // what failed: 0 the descriptors, 1 an rlimit, 2 execve, 3 the nested Landlock domain
};

static int spawn_child(void *arg) {
	struct spawn *sp = arg;
	int err = 0;
	if (setsid() < 0 || chdir(workspace_dir) < 0)
		err = errno;
	// Move sources out of the way of the targets, then place them.
	for (int i = 0; !err && i < sp->nfds; i++) {
		if (sp->fds[i] != i && sp->fds[i] < sp->nfds) {
			int d = fcntl(sp->fds[i], F_DUPFD_CLOEXEC, sp->nfds);
			if (d < 0)
				err = errno;
			sp->fds[i] = d;
		}
	}
	for (int i = 0; !err && i < sp->nfds; i++) {
		if (sp->fds[i] == i) {
			if (fcntl(i, F_SETFD, 0) < 0)
				err = errno;
		} else if (dup2(sp->fds[i], i) < 0) {
			err = errno;
		}
	}
	for (uint32_t i = 0; !err && i < sp->nrl; i++) {
		struct rlimit l = {sp->rl[i].value, sp->rl[i].value};
		// The CPU limit's hard value is one second above the soft one: SIGXCPU first,
		// SIGKILL as the backstop.
		if (sp->rl[i].res == RLIMIT_CPU)
			l.rlim_max = sp->rl[i].value + 1;
		if (setrlimit((int)sp->rl[i].res, &l) < 0) {
			sp->what = 1;
			err = errno;
		}
	}
	// The Landlock tier: the program's own domain, nested in the init's.
	if (!err && landlock_tier && (err = ll_nest()) != 0)
		sp->what = 3;
	if (!err) {
		execve(sp->argv[0], sp->argv, sp->env);
		sp->what = 2;
		err = errno;
	}
	sp->err = err;
	_exit(127);
}

// start_program starts argv with the rlimits set in the child between fork and exec,
// so they hold from the program's first instruction. fds[i] becomes its descriptor i;
// nothing else is inherited. The child shares the init's memory until its execve (as
// posix_spawn does), so nothing is copied, and the init resumes once execve has
// succeeded or the child has failed and said why in sp.
static pid_t start_program(char **argv, char **env, int *fds, int nfds, const struct rlim *rl, uint32_t nrl) {
	char stage[PATH_MAX + 8];
	snprintf(stage, sizeof stage, "exec %s", argv[0] ? argv[0] : "");
	if (!argv[0])
		failf("start", EINVAL, "empty argv");
	static char *stack;
	const size_t stack_size = 64 << 10;
	if (!stack && !(stack = malloc(stack_size)))
		fail(stage, "malloc");
	struct spawn sp = {argv, env, fds, nfds, rl, nrl, 0, 0};
	pid_t pid = clone(spawn_child, stack + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &sp);
	if (pid < 0)
		fail(stage, "clone");
	if (sp.err) {
		int ws;
		while (waitpid(pid, &ws, __WALL) < 0 && errno == EINTR)
			;
		errno = sp.err;
		fail(sp.what == 1 ? "rlimits" : sp.what == 3 ? "landlock" : stage,
		     sp.what == 1 ? "setrlimit" : sp.what == 2 ? "execve" : sp.what == 3 ? "nested domain" : "descriptors");
	}
	return pid;
}

// cpu_seconds_used is a process's CPU time so far, rounded up to whole seconds, from its
// CPU clock: no /proc needed, which a sandbox in a container that masks its own may not
// have.
static uint64_t cpu_seconds_used(pid_t pid) {
	clockid_t clk;
	int e = clock_getcpuclockid(pid, &clk);
	if (e != 0) {
		errno = e;
		fail("rlimits", "cpu clock");
	}
	struct timespec ts;
	if (clock_gettime(clk, &ts) < 0)
		fail("rlimits", "read cpu time");
	return (uint64_t)ts.tv_sec + (ts.tv_nsec > 0 ? 1 : 0);
}

// lower_rlimits lowers a preloaded interpreter's limits to the call's, never raising
// one. Its CPU clock ran while it loaded, so the CPU limit counts from now.
static void lower_rlimits(pid_t pid, const struct rlim *rl, uint32_t n) {
	uint64_t used = cpu_seconds_used(pid);
	for (uint32_t i = 0; i < n; i++) {
		struct rlimit cur;
		if (prlimit(pid, rl[i].res, NULL, &cur) < 0)
			fail("rlimits", "prlimit");
		uint64_t want = rl[i].value;
		if (rl[i].res == RLIMIT_CPU)
			want += used;
		if (want >= cur.rlim_max)
			continue; // the preloaded limits already bound the call
		struct rlimit l = {want, want};
		if (rl[i].res == RLIMIT_CPU)
			l.rlim_max = want + 1 < cur.rlim_max ? want + 1 : cur.rlim_max;
		if (prlimit(pid, rl[i].res, &l, NULL) < 0)
			fail("rlimits", "prlimit");
	}
}

struct preloaded {
	pid_t pid;
	int argv_w; // write end of its fd 3
};

// preload starts the interpreter ahead of the call and waits until it has loaded: it
// writes a byte to its fd 4, then blocks reading the program's argv from its fd 3.
static struct preloaded preload(const struct config *cfg, char **env) {
	int argvp[2], loaded[2];
	if (pipe2(argvp, O_CLOEXEC) < 0 || pipe2(loaded, O_CLOEXEC) < 0)
		fail("preload pipe", "pipe");
	int fds[5] = {0, 1, 2, argvp[0], loaded[1]};
	pid_t pid = start_program(cfg->preload, env, fds, 5, cfg->rl, cfg->nrl);
	close(argvp[0]);
	close(loaded[1]);
	char b;
	ssize_t n;
	do
		n = read(loaded[0], &b, 1);
	while (n < 0 && errno == EINTR);
	int e = errno;
	close(loaded[0]);
	if (n != 1) {
		kill(pid, SIGKILL);
		char stage[PATH_MAX + 16];
		snprintf(stage, sizeof stage, "preload %s", cfg->preload[0]);
		failf(stage, n < 0 ? e : 0, "%s", n < 0 ? strerror(e) : "the interpreter exited while loading");
	}
	return (struct preloaded){pid, argvp[1]};
}

// clean_relative reports whether p is "a/b/c": relative, no empty, "." or ".." part.
static int clean_relative(const char *p) {
	if (!*p || *p == '/')
		return 0;
	for (const char *s = p;;) {
		const char *e = strchrnul(s, '/');
		size_t n = (size_t)(e - s);
		if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
		if (!*e)
			return 1;
		s = e + 1;
	}
}

// create_file writes one file of the call into the fresh workspace. No code of the call
// has run yet, so there is nothing to race; O_NOFOLLOW|O_EXCL still refuses surprises.
static void create_file(const char *stage, const char *rel, const uint8_t *data, uint32_t len, mode_t mode) {
	char full[PATH_MAX];
	if (!clean_relative(rel))
		failf(stage, EINVAL, "path \"%s\" is not clean and relative", rel);
	if (snprintf(full, sizeof full, "%s/%s", workspace_dir, rel) >= (int)sizeof full)
		failf(stage, ENAMETOOLONG, "path too long");
	if (mkdir_parent(full) < 0)
		fail(stage, "mkdir");
	int fd = open(full, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		fail(stage, "create");
	if (write_all(fd, data, len) < 0)
		fail(stage, "write");
	close(fd);
}

static void write_workspace(const struct config *cfg, const struct handover *h) {
	if (h->code_file[0])
		create_file("write code file", h->code_file, h->code, h->code_len, 0644);
	for (uint32_t i = 0; i < h->nfiles; i++) {
		char stage[PATH_MAX + 32];
		snprintf(stage, sizeof stage, "write input file %s", h->files[i].path);
		mode_t mode = h->files[i].mode & 0777;
		create_file(stage, h->files[i].path, h->files[i].data, h->files[i].len, mode ? mode : 0644);
	}
	if (cfg->out_dir[0]) {
		char full[PATH_MAX];
		if (!clean_relative(cfg->out_dir) ||
		    snprintf(full, sizeof full, "%s/%s", workspace_dir, cfg->out_dir) >= (int)sizeof full)
			failf("create output dir", EINVAL, "bad output dir");
		if (mkdir_p(full, 0755) < 0)
			fail("create output dir", "mkdir");
	}
}

struct exit_info {
	int exited, code, signal;
	int64_t cpu_usec, max_rss;
};

// reap waits for the program, then kills and reaps everything else in the pid namespace
// (background processes, setsid'd grandchildren).
static struct exit_info reap(pid_t pid) {
	struct exit_info x = {0};
	for (;;) {
		int ws;
		pid_t w = wait4(-1, &ws, __WALL, NULL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			break; // ECHILD: nothing left
		}
		if (w == pid) {
			x.exited = WIFEXITED(ws);
			x.code = x.exited ? WEXITSTATUS(ws) : -1;
			if (WIFSIGNALED(ws))
				x.signal = WTERMSIG(ws);
			// pid 1 is exempt from kill(-1): this ends every other process here. The
			// Landlock tier has no pid namespace: its init, a subreaper, kills its
			// descendants instead.
			if (landlock_tier)
				ll_sweep();
			else
				kill(-1, SIGKILL);
		}
	}
	struct rusage ru;
	if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
		x.cpu_usec = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec +
		             (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
		x.max_rss = (int64_t)ru.ru_maxrss * 1024;
	}
	return x;
}

// cpu_usec_of is the CPU time (user + system, every thread) process pid has used so far,
// or 0 when it cannot be read.
static int64_t cpu_usec_of(pid_t pid) {
	clockid_t clk;
	struct timespec ts;
	if (clock_getcpuclockid(pid, &clk) != 0 || clock_gettime(clk, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

// ---- artifacts ----------------------------------------------------------------------

// The collector runs after every process of the sandbox is dead, so nothing changes the
// tree while it is read, and it trusts nothing in it: each component is opened with
// O_NOFOLLOW relative to its parent, so a symlink is never followed; FIFOs, devices and
// sockets are skipped unopened; files with more than one link are skipped, because a
// hard link may name a file outside the output directory. The parent hashes the data.

struct collector {
	const struct config *cfg;
	struct wbuf out;
	uint32_t listed, count, unlisted;
	int64_t total;
};

static void art_entry(struct collector *c, const char *path, int64_t size, const char *skipped,
                      const uint8_t *data, uint32_t len, int has_data) {
	wb_str(&c->out, path);
	wb_i64(&c->out, size);
	wb_str(&c->out, skipped);
	wb_u8(&c->out, (uint8_t)has_data);
	wb_bytes(&c->out, data, has_data ? len : 0);
	c->listed++;
}

static int art_full(struct collector *c) {
	if (c->listed < c->cfg->max_entries)
		return 0;
	c->unlisted++;
	return 1;
}

static void art_skip(struct collector *c, const char *path, int64_t size, const char *why) {
	if (!art_full(c))
		art_entry(c, path, size, why, NULL, 0, 0);
}

static void art_file(struct collector *c, int dirfd, const char *name, const char *path, const struct stat *st) {
	int64_t size = st->st_size;
	const struct config *cfg = c->cfg;
	if (art_full(c))
		return;
	if (st->st_nlink > 1) {
		art_skip(c, path, size, "hard link");
		return;
	}
	if (cfg->max_files > 0 && c->count >= cfg->max_files) {
		art_skip(c, path, size, "too many files");
		return;
	}
	if (cfg->max_file_bytes > 0 && size > cfg->max_file_bytes) {
		art_skip(c, path, size, "file too large");
		return;
	}
	if (cfg->max_total > 0 && c->total + size > cfg->max_total) {
		art_skip(c, path, size, "total size cap reached");
		return;
	}
	if (size > (int64_t)MAX_FRAME) {
		art_skip(c, path, size, "file too large");
		return;
	}
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		art_skip(c, path, size, "unreadable");
		return;
	}
	struct stat st2;
	uint8_t *data = malloc((size_t)size + 1);
	if (!data || fstat(fd, &st2) < 0 || st2.st_ino != st->st_ino || st2.st_dev != st->st_dev ||
	    !S_ISREG(st2.st_mode)) {
		close(fd);
		free(data);
		art_skip(c, path, size, "changed while read");
		return;
	}
	size_t got = 0;
	for (;;) {
		ssize_t r = read(fd, data + got, (size_t)size + 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == (size_t)size + 1)
			break;
	}
	close(fd);
	if (got != (size_t)size) {
		free(data);
		art_skip(c, path, size, "changed while read");
		return;
	}
	c->count++;
	c->total += size;
	art_entry(c, path, size, "", data, (uint32_t)size, 1);
	free(data);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void art_walk(struct collector *c, int dirfd, const char *rel, uint32_t depth) {
	int dup = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (dup < 0)
		return;
	DIR *d = fdopendir(dup);
	if (!d) {
		close(dup);
		return;
	}
	size_t n = 0, cap = 64;
	char **names = malloc(cap * sizeof *names);
	struct dirent *e;
	while (names && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap *= 2) * sizeof *names);
			if (!nn)
				break;
			names = nn;
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	if (!names)
		return;
	qsort(names, n, sizeof *names, cmp_names);
	for (size_t i = 0; i < n; i++) {
		const char *name = names[i];
		if (!name)
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof path, "%s%s%s", rel, *rel ? "/" : "", name) >= (int)sizeof path) {
			art_skip(c, name, 0, "path too long");
			continue;
		}
		struct stat st;
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		switch (st.st_mode & S_IFMT) {
		case S_IFDIR: {
			if (depth + 1 >= c->cfg->max_depth) {
				art_skip(c, path, 0, "directory too deep");
				break;
			}
			int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				break;
			art_walk(c, sub, path, depth + 1);
			close(sub);
			break;
		}
		case S_IFREG:
			art_file(c, dirfd, name, path, &st);
			break;
		case S_IFLNK:
			art_skip(c, path, 0, "symlink");
			break;
		default:
			art_skip(c, path, 0, "not a regular file");
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static void collect_artifacts(struct collector *c) {
	int fd = open(workspace_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	char *rel = strdup(c->cfg->out_dir);
	for (char *save = NULL, *part = strtok_r(rel, "/", &save); fd >= 0 && part; part = strtok_r(NULL, "/", &save)) {
		int next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
	}
	free(rel);
	if (fd < 0)
		return;
	art_walk(c, fd, "", 0);
	close(fd);
	if (c->unlisted > 0) {
		char why[128];
		snprintf(why, sizeof why, "%u more entries not listed (at most %u are)", c->unlisted, c->cfg->max_entries);
		art_entry(c, "...", 0, why, NULL, 0, 0);
	}
}

// ---- pid 1 --------------------------------------------------------------------------

// default_signals resets every signal to its default action and unblocks it. An
// ignored signal stays ignored across fork and exec: whatever the server's own parent
// ignored must not reach the program. The raw syscall reaches the two real-time signals
// glibc keeps for itself, too. The struct is the kernel's sigaction, not glibc's: the
// same layout on x86_64 and arm64, which both define SA_RESTORER.
static void default_signals(void) {
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} sa = {SIG_DFL, 0, NULL, 0};
	for (int sig = 1; sig <= 64; sig++) {
		if (sig != SIGKILL && sig != SIGSTOP)
			syscall(SYS_rt_sigaction, sig, &sa, NULL, sizeof sa.mask);
	}
	uint64_t none = 0;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
}

// become_sandbox_user makes the init uid and gid 1000 of its user namespace once the
// spawner has written the maps, keeping the full capability set the namespace's
// creator holds there for the setup steps. It then asks to die with the spawner: a
// credential change clears that request, so it comes after. Raw syscalls: glibc's
// wrappers would stop every thread to change its ids too, and so wait for the network
// thread's unshare; that thread only creates the namespace and ends.
static void become_sandbox_user(void) {
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		fail("set the sandbox user", "keepcaps");
	if (syscall(SYS_setresgid, 1000, 1000, 1000) < 0)
		fail("set the sandbox user", "setresgid");
	if (syscall(SYS_setresuid, 1000, 1000, 1000) < 0)
		fail("set the sandbox user", "setresuid");
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		fail("set the sandbox user", "capget");
	data[0].effective = data[0].permitted;
	data[1].effective = data[1].permitted;
	if (syscall(SYS_capset, &hdr, data) < 0)
		fail("set the sandbox user", "capset");
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
		fail("set the sandbox user", "keepcaps");
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail("set the sandbox user", "pdeathsig");
}

// ---- the Landlock tier's hooks (landlock_linux.c has the rest) ----------------------
//
// The same spawner and init, with three differences: no namespaces (the spawner's
// clone creates none, and no id maps are written); the host ids instead of a mapped
// uid; and instead of the new root, a Landlock domain over the host's tree, applied in
// the init before seccomp, so it covers the init and everything it starts, never the
// server. Both the spawner and the init are child subreapers: a pid namespace no
// longer takes the program's descendants with it, so each sweeps what is reparented
// to it (ll_sweep).

// landlock_spawner reads the landlock frame (after the cgroup frame) and prepares the
// spawner: a root server's spawner empties the capability bounding set while it still
// can, and becomes a subreaper before the init exists.
static void landlock_spawner(struct config *cfg) {
	struct cur c = read_frame("read landlock plan");
	cfg->ll.want = rd_u32(&c);
	cfg->ll.workspace = rd_str(&c);
	cfg->ll.tmp = rd_str(&c);
	cfg->ll.ro = rd_strv(&c);
	cfg->ll.rw_files = rd_strv(&c);
	if (c.bad || c.n != 0 || !cfg->ll.workspace[0] || !cfg->ll.tmp[0])
		failf("read landlock plan", EINVAL, "malformed landlock frame");
	landlock_tier = 1;
	workspace_dir = cfg->ll.workspace;
	// HOME and TMPDIR are the run's own directories (program_env lets them replace
	// the base ones).
	size_t n = 0;
	while (cfg->env[n])
		n++;
	char **env = calloc(n + 3, sizeof *env);
	if (!env || asprintf(&env[0], "HOME=%s", cfg->ll.workspace) < 0 || asprintf(&env[1], "TMPDIR=%s", cfg->ll.tmp) < 0)
		fail("read landlock plan", "malloc");
	memcpy(env + 2, cfg->env, n * sizeof *env);
	cfg->env = env;
	if (geteuid() == 0)
		drop_caps();
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		fail("landlock: subreaper", "prctl");
}

// landlock_user gives the init the sandbox's host ids where the spawner did not (a root
// server with one shared host user), then asks it to die with the spawner: a
// credential change clears that request.
static void landlock_user(const struct config *cfg) {
	if (geteuid() == 0) {
		if (cfg->host_uid == 0 || cfg->host_gid == 0)
			failf("set the sandbox user", EPERM, "the Landlock tier never runs a program as root");
		if (setresgid(cfg->host_gid, cfg->host_gid, cfg->host_gid) < 0)
			fail("set the sandbox user", "setresgid");
		if (setresuid(cfg->host_uid, cfg->host_uid, cfg->host_uid) < 0)
			fail("set the sandbox user", "setresuid");
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail("set the sandbox user", "pdeathsig");
}

// landlock_setup is setup() for this tier, in the same order minus what needs a
// namespace: subreaper → dumpable off → close-on-exec fds ≥ 3 → capabilities →
// no_new_privs → Landlock → seccomp last.
static void landlock_setup(const struct config *cfg) {
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		fail("landlock: subreaper", "prctl");
	// Not dumpable: the program (same uid) cannot open /proc/<init>/mem or fd.
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fail("prctl dumpable", "prctl");
	if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		fail("close fds", "close_range");
	// What an unprivileged process can drop: a root server's spawner already emptied
	// the bounding set; under an unprivileged one no_new_privs keeps exec from using it.
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		fail("drop capabilities", "clear ambient");
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		fail("drop capabilities", "capget");
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data) < 0)
		fail("drop capabilities", "clear every capability set");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail("no_new_privs", "no_new_privs");
	const char *what = "landlock";
	if (ll_restrict(&cfg->ll, &what) < 0)
		fail("landlock", what);
	load_seccomp(cfg);
}

static void __attribute__((noreturn)) sandbox_init(struct config *c, int sync);

static int write_file(const char *path, const char *s) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int r = write_all(fd, s, strlen(s));
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

static volatile pid_t init_pid;

// The zygote's pid, which its spawners check their parent against.
static pid_t zygote_pid;

// become_host_ids makes a root server's spawner the sandbox's own host uid and gid
// before it creates the user namespace, so the namespace belongs to that uid
// (uids_linux.go): what the kernel charges up the namespace chain to its creator
// (pending signals, message queues, locked memory, processes) is then charged to the
// sandbox's uid, not to root, and that uid can later find and kill every process the
// sandbox could have left (clear_host_uid).
static void become_host_ids(const struct config *c) {
	if (setresgid(c->host_gid, c->host_gid, c->host_gid) < 0)
		fail("become the sandbox's host ids", "setresgid");
	if (setresuid(c->host_uid, c->host_uid, c->host_uid) < 0)
		fail("become the sandbox's host ids", "setresuid");
	// The credential change cleared both. The id maps are written through
	// /proc/<init>, whose files belong to root unless the process is dumpable; and the
	// spawner must still die with the zygote (a zygote that died meanwhile left us to
	// another parent).
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		fail("become the sandbox's host ids", "dumpable");
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != zygote_pid)
		_exit(EXIT_SETUP_FAILED);
	// The lock file keeps this host's servers apart only where they share /run: a
	// server in a container without a user namespace of its own has another, and the
	// same ids. So the spawner proves, as clear_host_uid does at the end, that it is
	// the uid's one process before the uid becomes a sandbox's; of two spawners that
	// became the uid, the later one to check sees the earlier. Nothing is killed here:
	// the process found may be another server's live sandbox.
	struct rlimit old, two;
	if (getrlimit(RLIMIT_NPROC, &old) < 0)
		fail("become the sandbox's host ids", "getrlimit");
	two = (struct rlimit){2, old.rlim_max};
	if (setrlimit(RLIMIT_NPROC, &two) < 0)
		fail("become the sandbox's host ids", "setrlimit");
	pid_t p = fork();
	int e = errno;
	if (p == 0)
		_exit(0);
	if (p > 0)
		while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
			;
	if (setrlimit(RLIMIT_NPROC, &old) < 0)
		fail("become the sandbox's host ids", "setrlimit");
	if (p < 0 && e == EAGAIN)
		failf("become the sandbox's host ids", EBUSY,
		      "host uid %u already has a process: another airlock server's sandbox (one that does not share this server's /run/airlock), or a process left on the host",
		      c->host_uid);
	if (p < 0)
		failf("become the sandbox's host ids", e, "fork: %s", strerror(e));
}

// clear_host_uid proves that no process of the sandbox's host uid outlived the sandbox,
// killing any it finds: the next sandbox gets this uid. The pid namespace took the
// whole tree with the init, so normally there is none. The proof is the kernel's own
// count of the uid's processes (in every namespace it owns): with RLIMIT_NPROC at 2, a
// fork succeeds only if the spawner is the uid's one process. kill(-1) cannot be the
// test: it succeeds whenever any process exists, permitted or not.
static void clear_host_uid(void) {
	struct rlimit two = {2, 2};
	if (setrlimit(RLIMIT_NPROC, &two) == 0) {
		for (int i = 0; i < 100; i++) {
			pid_t p = fork();
			if (p == 0)
				_exit(0);
			if (p > 0) {
				while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
					;
				return;
			}
			if (errno != EAGAIN)
				break;
			kill(-1, SIGKILL);
			usleep(10000);
		}
	}
	report(REP_LEFTOVER, NULL);
}

// map_subids writes the init's id maps with newuidmap and newgidmap, which may map the
// server's subordinate ids (the kernel lets an unprivileged process map only its own).
// newgidmap decides about setgroups itself.
static void map_subids(const struct config *c, pid_t pid) {
	const char *tools[2] = {c->uidmap, c->gidmap};
	uint32_t ids[2] = {c->host_uid, c->host_gid};
	for (int i = 0; i < 2; i++) {
		char spid[16], sid[16];
		snprintf(spid, sizeof spid, "%d", pid);
		snprintf(sid, sizeof sid, "%u", ids[i]);
		char *const argv[] = {(char *)tools[i], spid, "1000", sid, "1", NULL};
		char *const envp[] = {NULL};
		pid_t h = fork();
		if (h < 0) {
			kill(pid, SIGKILL);
			fail("write the id maps", "fork");
		}
		if (h == 0) {
			// The helper's messages must not reach the program's output pipes.
			int null = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
				_exit(127);
			syscall(SYS_close_range, 3, ~0U, 0);
			execve(tools[i], argv, envp);
			_exit(127);
		}
		int ws;
		while (waitpid(h, &ws, 0) < 0) {
			if (errno != EINTR) {
				ws = -1;
				break;
			}
		}
		if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
			kill(pid, SIGKILL);
			failf("write the id maps", EPERM, "%s %s 1000 %s 1 failed (status %d); check /etc/subuid and /etc/subgid", tools[i], spid, sid, ws);
		}
	}
}

// The process name as ps and leak checks see it: argv[0], rewritten in place (its area
// is as long as INIT_NAME, the longest name used).
static char *name_area;
static size_t name_len;

static void set_name(const char *name) {
	size_t n = strlen(name);
	if (name_area && n <= name_len) {
		memset(name_area, 0, name_len);
		memcpy(name_area, name, n);
	}
}

static void kill_init(int sig) {
	(void)sig;
	if (init_pid > 0)
		kill(init_pid, SIGKILL);
}

// spawner is one sandbox's first process, forked by the zygote: small, so the clone
// with new namespaces copies almost nothing, unlike a clone of the server itself (whose
// page tables and copy-on-write faults cost ~18% of all CPU under load). It moves
// itself into the sandbox's v1 cgroup, clones the init into new user, pid, mount, ipc
// and uts namespaces, writes its uid and gid maps, and then only waits for it. The
// server ends the sandbox with SIGTERM to the spawner (kill_init); the init also dies
// with the spawner (Pdeathsig), and the whole pid namespace with the init.
static void __attribute__((noreturn)) spawner(void) {
	// The init inherits these: a pid 1 with default dispositions is immune to every
	// signal sent from inside its pid namespace, SIGKILL included, while signals from
	// outside still arrive.
	default_signals();
	struct config cfg;
	read_config(&cfg);
	// Into the v1 cgroup first, so the init is born in it. A thread that moves itself
	// ("0" to tasks) skips the global lock whose RCU synchronisation made moving
	// another process cost a grace period, up to 25 ms after an idle spell here.
	// The cgroup frame comes after the config: the server creates the cgroup while the
	// spawner starts.
	struct cur cg = read_frame("join cgroup");
	char **tasks = rd_strv(&cg);
	if (cg.bad || cg.n != 0)
		failf("join cgroup", EINVAL, "malformed cgroup frame");
	for (char **p = tasks; *p; p++) {
		if (write_file(*p, "0") < 0) {
			int e = errno;
			failf("join cgroup", e, "write %s: %s", *p, strerror(e));
		}
	}
	if (cfg.flags & CFG_LANDLOCK)
		landlock_spawner(&cfg);
	// A root server's supplementary groups (root's own among them) must not follow
	// into the sandbox, where they would still grant group access to host files.
	if (geteuid() == 0 && setgroups(0, NULL) < 0)
		fail("drop supplementary groups", "setgroups");
	if (cfg.flags & CFG_OWN_UID)
		become_host_ids(&cfg);
	int sync[2];
	if (pipe2(sync, O_CLOEXEC) < 0)
		fail("clone namespaces", "pipe");
	// The network namespace comes later, from a thread of the init (join_net).
	pid_t pid = (pid_t)syscall(SYS_clone, (unsigned long)(cfg.clone_flags & ~CLONE_NEWNET) | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid < 0)
		fail("clone namespaces", "clone");
	if (pid == 0) {
		close(sync[1]);
		sandbox_init(&cfg, sync[0]);
	}
	close(sync[0]);
	// The server ends a sandbox with SIGTERM to the spawner, which kills the init and
	// waits for it: its exit, and so the spawner's, comes only after every process of
	// the pid namespace is dead. (SIGKILL, from Pdeathsig when the server dies, ends the
	// init through its own Pdeathsig, without that wait.)
	init_pid = pid;
	struct sigaction sa = {.sa_handler = kill_init};
	sigaction(SIGTERM, &sa, NULL);
	set_name("airlock-spawner");
	if (cfg.uidmap[0])
		map_subids(&cfg, pid);
	char path[64], map[64];
	static const char *const files[] = {"setgroups", "uid_map", "gid_map"};
	for (int i = cfg.uidmap[0] || (cfg.flags & CFG_LANDLOCK) ? 3 : 0; i < 3; i++) {
		snprintf(path, sizeof path, "/proc/%d/%s", pid, files[i]);
		if (i == 0)
			snprintf(map, sizeof map, "deny");
		else
			snprintf(map, sizeof map, "1000 %u 1", i == 1 ? cfg.host_uid : cfg.host_gid);
		if (write_file(path, map) < 0) {
			int e = errno;
			kill(pid, SIGKILL);
			failf("write the id maps", e, "write %s: %s", path, strerror(e));
		}
	}
	if (write_all(sync[1], "m", 1) < 0) {
		kill(pid, SIGKILL);
		fail("clone namespaces", "sync");
	}
	// The sandbox's pipes are the init's alone: the server sees EOF when it is done;
	// only the report pipe is shared, so the spawner can report what it finds after
	// the init (its EOF then comes with the spawner's exit, right after the init's).
	// The sync pipe stays open while the spawner lives: the init checks it once it has
	// asked to die with the spawner.
	syscall(SYS_close_range, 0, REPORT_FD - 1, 0);
	syscall(SYS_close_range, REPORT_FD + 1, (unsigned)sync[1] - 1, 0);
	syscall(SYS_close_range, (unsigned)sync[1] + 1, ~0U, 0);
	int ws;
	while (waitpid(pid, &ws, 0) < 0) {
		if (errno != EINTR)
			_exit(EXIT_SETUP_FAILED);
	}
	// The Landlock tier's spawner is a subreaper: what the init left is reparented here.
	if (cfg.flags & CFG_LANDLOCK)
		ll_sweep();
	if (cfg.flags & CFG_OWN_UID)
		clear_host_uid();
	_exit(WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
}

// sandbox_init is pid 1 of the new namespaces: it waits for its id maps, builds the
// sandbox, runs the program and reports.
static void __attribute__((noreturn)) sandbox_init(struct config *parsed, int sync) {
	struct config cfg = *parsed;
	set_name(INIT_NAME);
	// Neither needs the id maps, only the capabilities the clone gave in the new user
	// namespace, so both overlap with the spawner writing the maps (~70 us, plus the
	// wake-up of this process that follows).
	struct net_thread net;
	if (cfg.clone_flags & CLONE_NEWNET)
		start_net(&net);
	if (!(cfg.flags & CFG_LANDLOCK))
		make_private();
	await(sync, 'm');
	if (cfg.flags & CFG_LANDLOCK)
		landlock_user(&cfg);
	else
		become_sandbox_user();
	// A spawner that died before the Pdeathsig request took has closed its end.
	struct pollfd gone = {sync, POLLIN, 0};
	if (poll(&gone, 1, 0) != 0)
		_exit(EXIT_SETUP_FAILED);
	close(sync);
	if (cfg.flags & CFG_LANDLOCK)
		landlock_setup(&cfg);
	else
		setup(&cfg, &net);
	if (cfg.flags & CFG_SETUP_ONLY) {
		report(REP_STARTED, NULL);
		struct wbuf b = {0};
		wb_u8(&b, 1);
		wb_u32(&b, 0);
		wb_u32(&b, 0);
		wb_i64(&b, 0);
		wb_i64(&b, 0);
		wb_u32(&b, 0);
		report(REP_EXIT, &b);
		_exit(0);
	}
	char **env = program_env(cfg.env);
	struct preloaded pre = {0, -1};
	if (cfg.preload[0])
		pre = preload(&cfg, env);
	// Ready: everything up to the call is done (a warm pool waits for this).
	report(REP_READY, NULL);
	struct handover h;
	read_handover(&h);
	pid_t pid;
	// CPU the program had used before the call: a preloaded interpreter's start and
	// imports (~11 ms for python) are the pool's, not the call's.
	int64_t cpu_before = 0;
	if (pre.pid) {
		// Any setup failure from here on kills the waiting interpreter with us: the
		// pid namespace ends when pid 1 exits.
		write_workspace(&cfg, &h);
		pid = pre.pid;
		lower_rlimits(pid, h.rl, h.nrl);
		cpu_before = cpu_usec_of(pid);
		struct wbuf a = {0};
		for (char **t = h.tail; *t; t++)
			wb_put(&a, *t, strlen(*t) + 1);
		if (write_all(pre.argv_w, a.p, a.n) < 0)
			fail("hand over to the preloaded interpreter", "write");
		close(pre.argv_w);
		free(a.p);
	} else {
		write_workspace(&cfg, &h);
		int fds[3] = {0, 1, 2};
		pid = start_program(h.argv, env, fds, 3, h.rl, h.nrl);
	}
	// The program owns stdin, stdout and stderr now: the parent sees EOF when it exits.
	close(0);
	close(1);
	close(2);
	report(REP_STARTED, NULL);
	struct exit_info x = reap(pid);
	x.cpu_usec = x.cpu_usec > cpu_before ? x.cpu_usec - cpu_before : 0;
	struct collector c = {.cfg = &cfg};
	if (cfg.out_dir[0])
		collect_artifacts(&c);
	struct wbuf b = {0};
	wb_u8(&b, (uint8_t)x.exited);
	wb_u32(&b, (uint32_t)x.code);
	wb_u32(&b, (uint32_t)x.signal);
	wb_i64(&b, x.cpu_usec);
	wb_i64(&b, x.max_rss);
	wb_u32(&b, c.listed);
	wb_put(&b, c.out.p, c.out.n);
	report(REP_EXIT, &b);
	// Every process of the sandbox is dead and the report is out. The init's own exit
	// (the namespaces' teardown, a network namespace's above all) waits for the server,
	// which ends it after delivering the result, so the teardown does not compete with
	// that delivery for the CPUs.
	for (;;)
		pause();
}

// ---- the zygote ---------------------------------------------------------------------

// The server starts one zygote (its own binary, argv INIT_NAME "zygote") and asks it
// for each sandbox's spawner over a SOCK_SEQPACKET socket on fd 3. A request carries
// the spawner's five descriptors (stdin, stdout, stderr, config, report) and, for cgroup
// v2, the cgroup to start it in; the answer is the spawner's pid and a pidfd for it.
// Forking a small process that is already running saves each sandbox an exec and the C
// library's start-up (~0.8 ms here, CPUID exits in a VM among it).

#define SPAWN_FDS 5
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

struct clone3_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size,
	    cgroup;
};

static void reap_spawners(int sig) {
	(void)sig;
	int e = errno;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	errno = e;
}

// answer sends the spawner's pid (0 with errno on failure) and its pidfd.
static void answer(int sock, int32_t pid, int32_t err, int pidfd) {
	int32_t msg[2] = {pid, err};
	struct iovec iov = {msg, sizeof msg};
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (pidfd >= 0) {
		memset(cbuf, 0, sizeof cbuf);
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof cbuf;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pidfd, sizeof(int));
	}
	while (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

static void __attribute__((noreturn)) zygote(void) {
	default_signals();
	set_name("airlock-zygote");
	struct sigaction sa = {.sa_handler = reap_spawners, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
	sigaction(SIGCHLD, &sa, NULL);
	const int sock = CONFIG_FD;
	for (;;) {
		int32_t want_cgroup = 0;
		struct iovec iov = {&want_cgroup, sizeof want_cgroup};
		char cbuf[CMSG_SPACE((SPAWN_FDS + 1) * sizeof(int))];
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0); // the server is gone, or closed us
		int fds[SPAWN_FDS + 1], nfds = 0;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
				int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
				for (int i = 0; i < k; i++) {
					int fd;
					memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
					if (nfds < SPAWN_FDS + 1)
						fds[nfds++] = fd;
					else
						close(fd);
				}
			}
		}
		if (n != sizeof want_cgroup || (mh.msg_flags & MSG_CTRUNC) || nfds != SPAWN_FDS + (want_cgroup ? 1 : 0)) {
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			answer(sock, 0, EINVAL, -1);
			continue;
		}
		int pidfd = -1;
		struct clone3_args ca = {.flags = CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)&pidfd, .exit_signal = SIGCHLD};
		if (want_cgroup) {
			ca.flags |= CLONE_INTO_CGROUP;
			ca.cgroup = (uint64_t)fds[SPAWN_FDS];
		}
		zygote_pid = getpid();
		long pid = syscall(SYS_clone3, &ca, sizeof ca);
		// Docker's default seccomp profile answers clone3 with ENOSYS: where no cgroup
		// needs it, clone gives the same pidfd (in its parent_tid argument, the third on
		// every architecture). The Landlock tier serves there.
		if (pid < 0 && errno == ENOSYS && !want_cgroup)
			pid = syscall(SYS_clone, (unsigned long)(CLONE_PIDFD | SIGCHLD), NULL, &pidfd, NULL, NULL);
		if (pid == 0) {
			// The spawner: its descriptors at 0-4 and nothing else, dying with the
			// zygote (and so with the server).
			if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != zygote_pid)
				_exit(EXIT_SETUP_FAILED);
			for (int i = 0; i < SPAWN_FDS; i++) {
				if (fds[i] < SPAWN_FDS) {
					int d = fcntl(fds[i], F_DUPFD_CLOEXEC, SPAWN_FDS);
					if (d < 0)
						_exit(EXIT_SETUP_FAILED);
					fds[i] = d;
				}
			}
			for (int i = 0; i < SPAWN_FDS; i++) {
				if (dup2(fds[i], i) < 0)
					_exit(EXIT_SETUP_FAILED);
			}
			syscall(SYS_close_range, SPAWN_FDS, ~0U, 0);
			spawner();
		}
		int err = pid < 0 ? errno : 0;
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		answer(sock, pid < 0 ? 0 : (int32_t)pid, err, pidfd);
		if (pidfd >= 0)
			close(pidfd);
	}
}

// airlock_sandbox_init runs before main and before the Go runtime, in every process of
// this binary; it does nothing unless this process is airlock's zygote.
__attribute__((constructor)) static void airlock_sandbox_init(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc != 2 || !argv[0] || strcmp(argv[1], "zygote") != 0)
		return;
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	if (strcmp(base, INIT_NAME) != 0)
		return;
	name_area = argv[0];
	name_len = strlen(argv[0]);
	memset(argv[1], 0, strlen(argv[1]));
	zygote();
}
