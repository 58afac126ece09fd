// The zygote: the process the server starts once, which forks the spawners.
//
//	airlock_sandbox_init (the constructor, before the Go runtime) → zygote: for each
//	request on ZYGOTE_FD, clone3 (into the v2 cgroup if sent one) → the child places
//	its descriptors at 0-4 and becomes the spawner (init_linux.c); answer

#include "init_linux.h"

// The server starts one zygote (its own binary, argv INIT_NAME "zygote") and asks it
// for each sandbox's spawner over a SOCK_SEQPACKET socket on fd 3. A request carries
// the spawner's five descriptors (stdin, stdout, stderr, config, report) and, for cgroup
// v2, the cgroup to start it in; the answer is the spawner's pid and a pidfd for it.
// Forking a small process that is already running saves each sandbox an exec and the C
// library's start-up (~0.8 ms here, CPUID exits in a VM among it).

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
	// The one disposition the zygote changes: each spawner undoes just this one (spawner).
	struct sigaction sa = {.sa_handler = reap_spawners, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
	sigaction(SIGCHLD, &sa, NULL);
	const int sock = ZYGOTE_FD;
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
