// What the C files of the sandbox's init share: the constants of the wire, the parsed
// frames, and the functions one job calls in another. init_linux.c says how the pieces
// fit together. Every function declared here is global in the binary, which links
// libc and libseccomp statically: a name here must not be one of theirs.

#ifndef AIRLOCK_INIT_LINUX_H
#define AIRLOCK_INIT_LINUX_H

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
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#include "protocol_linux.h"
#include "landlock_linux.h"

// The root is built in a tmpfs over /tmp of the private mount namespace.
#define NEW_ROOT "/tmp"

// Per-mount flags the kernel locks on mounts from a more privileged user namespace: a
// remount that drops one fails with EPERM, so they are carried over from the source.
#define LOCKED_FLAGS (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME)

struct wbuf {
	uint8_t *p;
	size_t n, cap;
};

// fail reports errno at stage, with what was being done.
#define fail(stage, what) \
	do { \
		int e_ = errno; \
		failf((stage), e_, "%s: %s", (what), strerror(e_)); \
	} while (0)

// A cursor over a frame's payload; bad once a read went past its end.
struct cur {
	const uint8_t *p;
	size_t n;
	int bad;
};

struct rlim {
	uint32_t res;
	uint64_t value;
};

struct op {
	uint32_t kind, is_file;
	uint64_t flags;
	char *source, *target, *link, *data;
	const uint8_t *content;
	uint32_t content_len;
};

struct config {
	uint32_t flags;
	uint32_t clone_flags;        // the namespaces
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
	uint32_t max_entries, max_depth, max_walk;
	uint32_t nrl;
	struct rlim *rl;
	uint32_t proxy_port; // network "allowlist": the bridge's port on 127.0.0.1, else 0
	struct ll_plan ll;   // CFG_LANDLOCK: the landlock frame (parse_landlock)
};

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

// A network namespace costs ~0.8 ms to create, most of a whole clone's, so a thread of
// the init creates it while the main thread builds the root, then the init joins it
// (start_net, join_net). A thread, not a process: forking the init cost more than it
// saved. The thread's namespace is reached through its descriptor, opened before the
// thread exits.
struct net_thread {
	pthread_t thread;
	int fd;  // the new namespace, or -1
	int err; // why there is none
	// started: the thread runs (it sets it); pinned: it was started on the other CPUs
	// (start_net and join_net say why).
	int started;
	int pinned;
};

struct preloaded {
	pid_t pid;
	int argv_w; // write end of its fd 3
};

struct exit_info {
	int exited, code, signal;
	int64_t cpu_usec, max_rss;
};

struct collector {
	const struct config *cfg;
	struct wbuf out;
	uint32_t listed, count, unlisted;
	int64_t total;
	uint32_t left; // entries the walk may still read (max_walk)
	int cut;       // a directory held more entries than the walk read
};

// Why parse_config or parse_handover refused a frame.
struct wire_error {
	const char *stage;
	char msg[96];
};

// wire_linux.c: the frames on fd 3 and 4.
void wb_put(struct wbuf *b, const void *src, size_t n);
void wb_u8(struct wbuf *b, uint8_t v);
void wb_u32(struct wbuf *b, uint32_t v);
void wb_i64(struct wbuf *b, int64_t v);
void wb_bytes(struct wbuf *b, const void *p, size_t n);
void wb_str(struct wbuf *b, const char *s);
int write_all(int fd, const void *p, size_t n);
void report_frame(struct wbuf *f, uint8_t kind, const struct wbuf *payload);
void report(uint8_t kind, struct wbuf *payload);
void error_payload(struct wbuf *b, const char *stage, int err, const char *msg);
void __attribute__((noreturn)) failf(const char *stage, int err, const char *fmt, ...);
void exit_payload(struct wbuf *b, const struct exit_info *x, const struct collector *c);
void report_exit(const struct exit_info *x, const struct collector *c);
void wb_artifact(struct wbuf *b, const char *path, int64_t size, uint8_t why, const uint8_t *data, uint32_t len);
struct cur read_frame(const char *stage);
char **rd_strv(struct cur *c);
int parse_config(struct cur *c, struct config *cfg, struct wire_error *e);
void read_config(struct config *cfg);
int parse_landlock(struct cur *c, struct ll_plan *p);
int parse_handover(struct cur *c, struct handover *h, struct wire_error *e);
void read_handover(struct handover *h);

// root_linux.c: the root and the rest of the setup.
int mkdir_p(const char *path, mode_t mode);
int mkdir_parent(const char *path);
void make_private(void);
void start_net(struct net_thread *n);
void setup(const struct config *cfg, struct net_thread *net);
void drop_caps(void);
void load_seccomp(const struct config *cfg);

// program_linux.c: starting programs, the workspace, reaping.
char **program_env(char **extra);
pid_t start_program(char **argv, char **env, int *fds, int nfds, const struct rlim *rl, uint32_t nrl);
void lower_rlimits(pid_t pid, const struct rlim *rl, uint32_t n);
struct preloaded preload(const struct config *cfg, char **env);
void write_workspace(const struct config *cfg, const struct handover *h);
// The program's working directory: /workspace of the new root, or in the Landlock tier
// the run's own directory on the host (landlock_spawner).
extern const char *workspace_dir;
// The Landlock tier: no pid namespace ends the program's descendants (reap, ll_sweep).
extern int landlock_tier;
// spawner_gone is set by the Landlock tier's init when its spawner dies (landlock_user).
extern volatile sig_atomic_t spawner_gone;
struct exit_info reap(pid_t pid);
int64_t cpu_usec_of(pid_t pid);

// artifacts_linux.c: the output directory.
void collect_artifacts(struct collector *c);

// zygote_linux.c: `airlock run`'s one-shot zygote, forked before the Go runtime (-1: none).
extern int prefork_sock;
extern int prefork_pid;

// init_linux.c: the spawner and pid 1.
void default_signals(void);
void set_name(const char *name);
void __attribute__((noreturn)) spawner(void);
extern pid_t zygote_pid;
extern char *name_area;
extern size_t name_len;

#endif
