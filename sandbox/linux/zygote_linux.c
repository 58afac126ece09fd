// The zygote: the process the server starts once, which forks the spawners.
//
//	airlock_sandbox_init (the constructor, before the Go runtime) → zygote: for each
//	request on ZYGOTE_FD, clone3 (into the v2 cgroup if sent one) → the child places
//	its descriptors at 0-4 and becomes the spawner (init_linux.c); answer
//	one-shot only: ZYG_LEAVE → kept; the socket's EOF → finish: end and reap every
//	spawner, remove the cgroups ZYG_LEAVE listed, exit

#include "init_linux.h"

#include <sys/auxv.h>
#include <sys/inotify.h>

// The server starts one zygote (its own binary, argv INIT_NAME "zygote") and asks it
// for each sandbox's spawner over a SOCK_SEQPACKET socket on fd 3. A request carries
// the spawner's five descriptors (stdin, stdout, stderr, config, report) and, for cgroup
// v2, the cgroup to start it in; the answer is the spawner's pid and a pidfd for it.
// Forking a small process that is already running saves each sandbox an exec and the C
// library's start-up (~0.8 ms here, CPUID exits in a VM among it).
//
// A one-shot zygote (`airlock run`: argv "zygote" "oneshot") does not die with the
// server: the CLI exits as soon as its answer is written, and this zygote finishes the
// teardown the CLI would otherwise wait out (~1 ms: the namespaces' kernel teardown,
// the cgroups' removal). Its socket's EOF, which comes with the CLI's exit however it
// exits (SIGKILL too), starts finish: SIGTERM to every spawner (as the server ends a
// sandbox), reap them all, remove the cgroups ZYG_LEAVE listed, exit. It is in a process
// group of its own (the server's Setpgid), so a terminal's ^C does not cut that short.

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

// A one-shot zygote's state: whether it is one, the pidfds of its spawners (a one-shot
// run has a few: the self-check's, the call's, and retries of a busy host uid), and
// what ZYG_LEAVE listed, with the host-id lock it came with.
static int oneshot;
#define MAX_KEPT 64
static int kept[MAX_KEPT], nkept;
static char leave[LEAVE_MAX];
static size_t leave_len;
static int leave_lock = -1;

// keep holds a one-shot zygote's pidfd for spawner, dropping the pidfds of spawners
// already gone so the list stays short.
static void keep(int pidfd) {
	int j = 0;
	for (int i = 0; i < nkept; i++) {
		if (syscall(SYS_pidfd_send_signal, kept[i], 0, NULL, 0) < 0 && errno == ESRCH)
			close(kept[i]);
		else
			kept[j++] = kept[i];
	}
	nkept = j;
	if (nkept < MAX_KEPT)
		kept[nkept++] = pidfd;
	else
		close(pidfd); // more than 64 live sandboxes: not a one-shot run's
}

static void signal_kept(int sig) {
	for (int i = 0; i < nkept; i++)
		syscall(SYS_pidfd_send_signal, kept[i], sig, NULL, 0);
}

static void on_alarm(int sig) { (void)sig; }

// How long finish waits for its spawners before it kills them, and again after: the
// server's reapTimeout.
#define REAP_SECONDS 10

// How long finish waits for another run's dirs to leave the base this run made.
#define BASE_WAIT_SECONDS 60

// kill_cgroup kills what is left in the cgroup dir: cgroup.kill on v2, each pid of its
// cgroup.procs on v1 (as killCgroup does for a stale cgroup).
static void kill_cgroup(const char *dir) {
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/cgroup.kill", dir) >= (int)sizeof path)
		return;
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t w = write(fd, "1", 1);
		close(fd);
		if (w == 1)
			return;
	}
	if (snprintf(path, sizeof path, "%s/cgroup.procs", dir) >= (int)sizeof path)
		return;
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	long pid;
	while (fscanf(f, "%ld", &pid) == 1)
		if (pid > 0)
			kill((pid_t)pid, SIGKILL);
	fclose(f);
}

// remove_cgroup removes the cgroup dir path, trying again while its last processes are
// still being freed, for up to REAP_SECONDS (a busy host can take long; nothing waits
// for this zygote). A sandbox's dir (sandbox: 1) that stays busy has what is left in it
// killed first.
static void remove_cgroup(const char *path, int sandbox) {
	struct timespec pause = {0, 1000000};
	for (long waited = 0; waited < REAP_SECONDS * 1000L;) {
		if (rmdir(path) == 0 || errno != EBUSY)
			return;
		if (sandbox && waited == 0)
			kill_cgroup(path);
		nanosleep(&pause, NULL);
		waited += pause.tv_nsec / 1000000;
		if (pause.tv_nsec < 16000000)
			pause.tv_nsec *= 2;
	}
}

// remove_tree removes a cgroup dir's child cgroups (a sandbox's), then the dir.
static void remove_tree(const char *dir) {
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		char path[PATH_MAX];
		while ((e = readdir(d))) {
			if (e->d_type != DT_DIR || e->d_name[0] == '.')
				continue;
			if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
				remove_cgroup(path, 1);
		}
		closedir(d);
	}
	remove_cgroup(dir, 0);
}

// remove_base removes a base cgroup dir this run made, once it is empty: another run
// that found it in place (two at once) leaves it to its maker, so while the other's dirs
// are in it this waits, up to BASE_WAIT_SECONDS, woken by each rmdir in it. After that
// it is left to whoever is still in it (a server started in between).
static void remove_base(const char *dir) {
	int in = inotify_init1(IN_CLOEXEC);
	if (in >= 0 && inotify_add_watch(in, dir, IN_DELETE | IN_DELETE_SELF | IN_ONLYDIR) < 0) {
		close(in);
		in = -1;
	}
	struct timespec now, end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += BASE_WAIT_SECONDS;
	while (rmdir(dir) < 0 && errno == EBUSY && in >= 0) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		long left = (end.tv_sec - now.tv_sec) * 1000 + (end.tv_nsec - now.tv_nsec) / 1000000;
		if (left <= 0)
			break;
		struct pollfd pf = {.fd = in, .events = POLLIN};
		if (poll(&pf, 1, (int)left) <= 0)
			break;
		char ev[4096];
		if (read(in, ev, sizeof ev) < 0 && errno != EINTR)
			break;
	}
	if (in >= 0)
		close(in);
}

// finish is a one-shot zygote's end, once its server has gone: every spawner is ended
// as the server ends one (SIGTERM: it kills its init and waits for the pid namespace
// to die) and reaped, SIGKILL after REAP_SECONDS for any that did not go; then the
// listed cgroups are removed, and the host-id lock is dropped with the exit.
static void __attribute__((noreturn)) finish(void) {
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigaction(SIGCHLD, &dfl, NULL); // the waits below reap
	// Nothing from the terminal or the session may cut this short now.
	struct sigaction ign = {.sa_handler = SIG_IGN};
	sigaction(SIGINT, &ign, NULL);
	sigaction(SIGQUIT, &ign, NULL);
	sigaction(SIGHUP, &ign, NULL);
	sigaction(SIGTERM, &ign, NULL);
	sigaction(SIGPIPE, &ign, NULL);
	struct sigaction al = {.sa_handler = on_alarm}; // no SA_RESTART: it interrupts the wait
	sigaction(SIGALRM, &al, NULL);
	signal_kept(SIGTERM);
	int killed = 0;
	alarm(REAP_SECONDS);
	for (;;) {
		if (waitpid(-1, NULL, __WALL) > 0)
			continue;
		if (errno != EINTR || killed)
			break; // ECHILD: every spawner is reaped
		signal_kept(SIGKILL);
		killed = 1;
		alarm(REAP_SECONDS);
	}
	alarm(0);
	for (int kind = 0; kind < 2; kind++) {
		// The trees first: a base is empty only once the dirs in it are gone.
		const char want = kind == 0 ? LEAVE_TREE : LEAVE_BASE;
		for (size_t i = 0; i < leave_len;) {
			const char *p = leave + i;
			size_t n = strnlen(p, leave_len - i);
			if (n >= 2 && p[0] == want && want == LEAVE_TREE)
				remove_tree(p + 1);
			else if (n >= 2 && p[0] == want)
				remove_base(p + 1);
			i += n + 1;
		}
	}
	_exit(0);
}

// take_leave keeps a ZYG_LEAVE message (req, n bytes) and the lock it came with.
static void take_leave(const char *req, size_t n, int *fds, int nfds) {
	if (leave_lock >= 0)
		close(leave_lock);
	leave_lock = -1;
	leave_len = 0;
	const int ok = oneshot && n > sizeof(uint32_t) && n - sizeof(uint32_t) <= sizeof leave && req[n - 1] == 0 && nfds <= 1;
	if (ok) {
		leave_len = n - sizeof(uint32_t);
		memcpy(leave, req + sizeof(uint32_t), leave_len);
		if (nfds == 1)
			leave_lock = fds[0];
	} else {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
	}
}

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
	// Go raises its process's soft RLIMIT_NOFILE to the hard limit and gives the programs
	// it execs the original back; prefork runs before Go does it. Under a low soft limit
	// (ulimit -Sn 8, hard 4096) the zygote could not take a spawn's descriptors (recvmsg
	// cut them off: MSG_CTRUNC) and every call was refused with a user-namespace hint.
	// Only airlock's own helpers get the raised limit: the program's is set apart, soft
	// and hard, from limits.open_files (rlimits).
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	// The one disposition the zygote changes: each spawner undoes just this one (spawner).
	struct sigaction sa = {.sa_handler = reap_spawners, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
	sigaction(SIGCHLD, &sa, NULL);
	const int sock = ZYGOTE_FD;
	for (;;) {
		static char req[sizeof(uint32_t) + LEAVE_MAX];
		struct iovec iov = {req, sizeof req};
		char cbuf[CMSG_SPACE((SPAWN_FDS + 1) * sizeof(int))];
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			// The server is gone, or closed us.
			if (oneshot)
				finish();
			_exit(0);
		}
		uint32_t op = 0;
		if ((size_t)n >= sizeof op)
			memcpy(&op, req, sizeof op);
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
		if (op == ZYG_LEAVE && !(mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) {
			take_leave(req, (size_t)n, fds, nfds);
			continue;
		}
		const int want_cgroup = op == ZYG_SPAWN_CGROUP;
		if (n != sizeof op || (mh.msg_flags & MSG_CTRUNC) || (op != ZYG_SPAWN && !want_cgroup) ||
		    nfds != SPAWN_FDS + (want_cgroup ? 1 : 0)) {
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			// Descriptors cut off are the zygote's descriptor limit, not a bad request.
			answer(sock, 0, (mh.msg_flags & MSG_CTRUNC) ? EMFILE : EINVAL, -1);
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
		if (pidfd >= 0 && oneshot)
			keep(pidfd);
		else if (pidfd >= 0)
			close(pidfd);
	}
}

// The one-shot zygote of `airlock run`, forked by prefork: the socket's other end and its
// pid, which the run's backend takes (zygote.start); -1: none.
int prefork_sock = -1;
int prefork_pid = -1;

// scrub zeroes what the process was started with (its arguments, its environment, the
// name it was executed by) and makes the whole area its name: a prefork zygote's
// memory is every spawner's and init's, and the init's /proc/1/cmdline and environ
// show it to the sandbox.
static void scrub(int argc, char **argv, char **envp) {
	char *start = argv[0], *end = argv[0];
	for (int i = 0; i < argc; i++)
		if (argv[i] + strlen(argv[i]) + 1 > end)
			end = argv[i] + strlen(argv[i]) + 1;
	for (char **e = envp; *e; e++)
		if (*e > start && *e + strlen(*e) + 1 > end)
			end = *e + strlen(*e) + 1;
	memset(start, 0, (size_t)(end - start));
	clearenv();
	char *fn = (char *)getauxval(AT_EXECFN);
	if (fn)
		memset(fn, 0, strlen(fn));
	name_area = start;
	name_len = (size_t)(end - start) - 1;
}

// prefork starts `airlock run`'s one-shot zygote by a fork, here, before the Go runtime
// and while this process is one thread: no exec and no second C library start-up
// (≈ 1 ms of CPU: the exec, page faults, glibc's CPUID probes), and it is ready before
// the run's main starts. The child is what an exec'd one-shot zygote is: descriptors 0-2
// on /dev/null and the socket at ZYGOTE_FD, nothing else; its own process group; every
// signal at its default (zygote()); no environment, arguments or name of the run's.
static void prefork(int argc, char **argv, char **envp) {
	// A caller that closed a standard descriptor gets the exec'd zygote: the socket must
	// not become the run's stdin, stdout or stderr.
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			return;
	int pair[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
		return;
	pid_t pid = fork();
	if (pid < 0) {
		close(pair[0]);
		close(pair[1]);
		return;
	}
	if (pid > 0) {
		close(pair[1]);
		prefork_sock = pair[0];
		prefork_pid = pid;
		return;
	}
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || setpgid(0, 0) < 0)
		_exit(EXIT_SETUP_FAILED);
	for (int fd = 0; fd < 3; fd++)
		if (dup2(null, fd) < 0)
			_exit(EXIT_SETUP_FAILED);
	// Last: null may be ZYGOTE_FD itself.
	if (pair[1] != ZYGOTE_FD && dup2(pair[1], ZYGOTE_FD) < 0)
		_exit(EXIT_SETUP_FAILED);
	syscall(SYS_close_range, ZYGOTE_FD + 1, ~0U, 0);
	scrub(argc, argv, envp);
	oneshot = 1;
	zygote();
}

// airlock_sandbox_init runs before main and before the Go runtime, in every process of
// this binary; it does nothing unless this process is airlock's zygote, or `airlock run`
// (exactly that: argv[1] "run"; after global flags the run execs its zygote instead).
__attribute__((constructor)) static void airlock_sandbox_init(int argc, char **argv, char **envp) {
	if (argc >= 2 && argv[0] && strcmp(argv[1], "run") == 0) {
		prefork(argc, argv, envp);
		return;
	}
	if (argc < 2 || argc > 3 || !argv[0] || strcmp(argv[1], "zygote") != 0 ||
	    (argc == 3 && strcmp(argv[2], "oneshot") != 0))
		return;
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	if (strcmp(base, INIT_NAME) != 0)
		return;
	oneshot = argc == 3;
	name_area = argv[0];
	name_len = strlen(argv[0]);
	for (int i = 1; i < argc; i++)
		memset(argv[i], 0, strlen(argv[i]));
	zygote();
}
