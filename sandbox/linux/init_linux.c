// The sandbox's init (pid 1 of its namespaces) and its spawner, in C.
//
// The server starts its own binary once as argv "airlock-sandbox-init zygote". An ELF
// constructor (zygote_linux.c) runs before the Go runtime starts and sees that: the
// process is the zygote, which forks one spawner per sandbox; the spawner clones the
// init into new namespaces; the init builds the sandbox, runs the program, reaps
// everything, reports, and exits. None of them ever starts the Go runtime. A Go init
// cost ~2.3 ms of runtime and package start-up per sandbox, its threads, and a signal
// handler for every signal (which pid 1 must then ignore by hand). A C pid 1 with
// default dispositions is immune to every signal sent from inside its pid namespace,
// SIGKILL included, by the kernel's own rule.
//
// The parent (launch_linux.go) plans everything: the mount plan, the rlimits, the
// seccomp program, the files. This code executes that plan, in a fixed order, and
// trusts its input, which comes from the server binary itself over fd 3. It trusts
// nothing the program leaves behind (the output directory it reads after the program is
// dead). The channels and their order are drawn at the top of protocol_linux.go; both
// ends are this one binary.
//
// One file per job; init_linux.h declares what they share:
//
//	protocol_linux.h   every number shared with Go (descriptors, frame kinds, flags)
//	wire_linux.c       the frame codec: frames read from fd 3, reports written on fd 4
//	root_linux.c       the root builder and the rest of setup(), up to seccomp
//	program_linux.c    program start and preload, the workspace's files, reaping
//	artifacts_linux.c  the artifact walker
//	init_linux.c       the spawner and pid 1 (this file)
//	zygote_linux.c     the zygote and the constructor
//
// The stages. From the config frame on, a failed stage reports {stage, errno, message}
// (REP_ERROR) and exits EXIT_SETUP_FAILED.
//
//	spawner        SIGCHLD default → read_config → cgroup frame: join the v1 cgroup →
//	               setgroups(0) → become_host_ids (a root server) → clone(namespaces) →
//	               id maps (map_subids, or /proc/<init>/*_map) → SYNC_MAPS on the sync
//	               pipe → wait for the init → clear_host_uid (a root server) → exit
//	sandbox_init
//	   1 net thread   start_net: a thread creates the network namespace meanwhile
//	   2 private      make_private: no mount propagates in or out
//	   3 maps         await SYNC_MAPS: the spawner has written the id maps
//	   4 setuid       become_sandbox_user: uid and gid 1000 inside, then Pdeathsig
//	   5 pdeathsig    the sync pipe still open: the spawner did not die before it took
//	   6 setup        setup (root_linux.c; its own order is written there)
//	                  setup-only (the self-check): REP_STARTED, an empty REP_EXIT, exit 0
//	   7 preload      preload: the interpreter starts and loads, if the config names one
//	   8 READY        REP_READY: a warm pool's sandbox waits here for a call
//	   9 handover     read_handover → write_workspace
//	  10 start        lower_rlimits and the argv to the preloaded interpreter, or
//	                  start_program
//	  11 STARTED      REP_STARTED; stdin, stdout, stderr closed: the program's alone
//	  12 reap         reap: the program, then kill(-1) and every other process
//	  13 artifacts    collect_artifacts (artifacts_linux.c), the program being dead
//	  14 EXIT         report_exit; then wait for the server's SIGKILL

#include "init_linux.h"

// default_signals resets every signal to its default action and unblocks it. An
// ignored signal stays ignored across fork and exec: whatever the server's own parent
// ignored must not reach the program. The raw syscall reaches the two real-time signals
// glibc keeps for itself, too. The struct is the kernel's sigaction, not glibc's: the
// same layout on x86_64 and arm64, which both define SA_RESTORER.
void default_signals(void) {
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
	if (parse_landlock(&c, &cfg->ll) < 0)
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

static void on_spawner_gone(int sig) {
	(void)sig;
	spawner_gone = 1;
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
	// Not SIGKILL: with no pid namespace, an init killed with its spawner (the OOM
	// killer's choice: every sandbox process has oom_score_adj 1000) left the program's
	// processes running, reparented to the host's pid 1, past the run. SIGTERM, without
	// SA_RESTART, interrupts reap's wait, which then sweeps them (the program cannot
	// send it: Landlock scopes its signals to its own domain).
	struct sigaction sa = {.sa_handler = on_spawner_gone};
	if (sigaction(SIGTERM, &sa, NULL) < 0 || prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0)
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
pid_t zygote_pid;

// another_process creates a child that exits at once and reaps it: 0, or the errno of
// the clone (EAGAIN where RLIMIT_NPROC refuses it). The kernel counts every new task
// against RLIMIT_NPROC, so a vfork child, which shares this process's memory until its
// _exit, answers as a fork would without copying the page tables (~0.1 ms each time
// here, on a sandbox's way to its start).
static int another_process(void) {
	pid_t p = vfork();
	if (p == 0)
		_exit(0);
	if (p < 0)
		return errno;
	while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
		;
	return 0;
}

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
	int e = another_process();
	if (setrlimit(RLIMIT_NPROC, &old) < 0)
		fail("become the sandbox's host ids", "setrlimit");
	if (e == EAGAIN)
		failf("become the sandbox's host ids", EBUSY,
		      "host uid %u already has a process: another airlock server's sandbox (one that does not share this server's /run/airlock), or a process left on the host",
		      c->host_uid);
	if (e != 0)
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
			int e = another_process();
			if (e == 0)
				return;
			if (e != EAGAIN)
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
char *name_area;
size_t name_len;

void set_name(const char *name) {
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
void __attribute__((noreturn)) spawner(void) {
	// The init inherits these: a pid 1 with default dispositions is immune to every
	// signal sent from inside its pid namespace, SIGKILL included, while signals from
	// outside still arrive. The zygote reset every signal when it started
	// (default_signals) and has changed only SIGCHLD since, so that is all there is to
	// undo here, with the mask: two system calls instead of 64.
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	if (sigaction(SIGCHLD, &dfl, NULL) < 0)
		_exit(EXIT_SETUP_FAILED);
	uint64_t none = 0;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
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
	// Every process of the sandbox goes before the server when the memory of what
	// holds them both runs out (a pod's or a container's limit, with no cgroup of the
	// sandbox's own): pages a program holds outside its RSS (memfds, shared memory, pipe
	// and socket buffers) count for no process, and the OOM killer chose the server by
	// its 19 MiB (seen in podman: one run's memfds killed the server). Raising a score
	// needs no privilege; the init and the program inherit it.
	if (write_file("/proc/self/oom_score_adj", "1000") < 0)
		fail("oom score", "write /proc/self/oom_score_adj");
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
	// No pid namespace dies with the init in the Landlock tier: its orphans would
	// outlive a server killed with SIGKILL. So there the zygote's death (the server's)
	// ends the sandbox as the server would, with SIGTERM: kill_init, then the sweep
	// below. A zygote already gone has left us to another parent.
	if ((cfg.flags & CFG_LANDLOCK) && (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0 || getppid() != zygote_pid))
		kill_init(SIGTERM);
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
	const char maps = SYNC_MAPS;
	if (write_all(sync[1], &maps, 1) < 0) {
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
	await(sync, SYNC_MAPS);
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
		report_exit(&(struct exit_info){.exited = 1}, NULL);
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
	report_exit(&x, &c);
	// Every process of the sandbox is dead and the report is out. The init's own exit
	// (the namespaces' teardown, a network namespace's above all) waits for the server,
	// which ends it after delivering the result, so the teardown does not compete with
	// that delivery for the CPUs.
	for (;;)
		pause();
}
