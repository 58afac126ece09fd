// Starting programs, the workspace's files, reaping. In the order the init uses them:
//
//	program_env → preload (start_program with the argv and loaded pipes)
//	→ write_workspace → lower_rlimits + cpu_usec_of (preloaded) or start_program
//	→ reap

#include "init_linux.h"

static const char *const base_env[] = {
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/workspace",
	"TMPDIR=/tmp",
	"LANG=C.UTF-8",
	"USER=sandbox",
	"LOGNAME=sandbox",
};

// program_env is the whole environment of a program: nothing of the server's.
char **program_env(char **extra) {
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

const char *workspace_dir = "/workspace";
int landlock_tier;
volatile sig_atomic_t spawner_gone;

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
pid_t start_program(char **argv, char **env, int *fds, int nfds, const struct rlim *rl, uint32_t nrl) {
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
		fail(sp.what == 1 ? "rlimits" : sp.what == 3 ? "landlock"
							     : stage,
		     sp.what == 1 ? "setrlimit" : (sp.what == 2 ? "execve" : sp.what == 3 ? "nested domain"
											  : "descriptors"));
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
void lower_rlimits(pid_t pid, const struct rlim *rl, uint32_t n) {
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

// preload starts the interpreter ahead of the call and waits until it has loaded: it
// writes a byte to its fd 4, then blocks reading the program's argv from its fd 3.
struct preloaded preload(const struct config *cfg, char **env) {
	int argvp[2], loaded[2];
	if (pipe2(argvp, O_CLOEXEC) < 0 || pipe2(loaded, O_CLOEXEC) < 0)
		fail("preload pipe", "pipe");
	int fds[PRELOAD_LOADED_FD + 1] = {0, 1, 2};
	fds[PRELOAD_ARGV_FD] = argvp[0];
	fds[PRELOAD_LOADED_FD] = loaded[1];
	pid_t pid = start_program(cfg->preload, env, fds, PRELOAD_LOADED_FD + 1, cfg->rl, cfg->nrl);
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

void write_workspace(const struct config *cfg, const struct handover *h) {
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

// has_children reports whether the init has a child left, running or not yet reaped.
// Every other process of the pid namespace descends from the init (the program's
// orphans are reparented to it before the program's exit is reported; only a process
// outside the namespace, with CAP_SYS_ADMIN over its user namespace, could enter it), so
// none left means the namespace holds only the init, and kill(-1) has nothing to do. It
// is skipped then because it walks every process of the host (~25 µs here, more on a
// busy host) between the program's exit and its report.
static int has_children(void) {
	siginfo_t si = {0};
	return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT | __WALL) == 0 || errno != ECHILD;
}

// reap waits for the program, then kills and reaps everything else in the pid namespace
// (background processes, setsid'd grandchildren).
struct exit_info reap(pid_t pid) {
	struct exit_info x = {0};
	for (;;) {
		if (spawner_gone) {
			// The spawner was killed (the OOM killer picks sandbox processes first): no
			// one else sweeps what this init leaves, and no pid namespace ends it. Its
			// SIGTERM interrupts the wait below and comes back here.
			ll_sweep();
			_exit(EXIT_SETUP_FAILED);
		}
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
			else if (has_children())
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
int64_t cpu_usec_of(pid_t pid) {
	clockid_t clk;
	struct timespec ts;
	if (clock_getcpuclockid(pid, &clk) != 0 || clock_gettime(clk, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
