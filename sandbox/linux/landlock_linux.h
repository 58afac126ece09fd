// The Landlock tier's C pieces (landlock_linux.c), called from the spawner and the init
// in init_linux.c where this tier differs from the namespace tier: no namespaces and no
// new root, but a Landlock domain over the host's own tree, and a subreaper that sweeps
// the program's descendants instead of a pid namespace that dies with its pid 1.
#ifndef AIRLOCK_LANDLOCK_LINUX_H
#define AIRLOCK_LANDLOCK_LINUX_H

#include <linux/filter.h>
#include <stdint.h>

#include "protocol_linux.h" // CFG_LANDLOCK, LL_NET, LL_SCOPE

// ll_plan is the landlock frame: the run's directories and the paths it may use.
struct ll_plan {
	uint32_t want;   // LL_NET | LL_SCOPE
	char *workspace; // read-write; the program's cwd and HOME
	char *tmp;       // read-write; the program's TMPDIR
	char **ro;       // read and execute: the namespace tier's read-only binds
	char **rw_files; // device nodes: read and write
	// The program's own seccomp program, loaded on top of the tier's by ll_nest
	// (compileProgramFilter in seccomp_linux.go).
	struct sock_filter *filter;
	uint32_t filter_len; // instructions
};

// ll_abi is the kernel's Landlock ABI version, or -1 with errno.
int ll_abi(void);

// ll_restrict puts the calling process (and all it starts) in a Landlock domain that
// allows exactly the plan. no_new_privs must be set. On failure it returns -1 with
// errno and *what says which step failed.
int ll_restrict(const struct ll_plan *p, const char **what);

// ll_nest puts the calling process in a Landlock domain nested in its current one that
// only scopes signals and abstract unix sockets (ABI 6; none below): the program,
// started in it, cannot signal or trace the init, which stays in the outer domain. It
// then loads the program's seccomp program (ll_plan.filter), so the program cannot aim
// the syscalls that change another process's limits or scheduling at a process of its
// uid. It returns 0 or an errno.
int ll_nest(void);

// ll_sweep kills and reaps every descendant of the calling process, which must be a
// child subreaper: each round stops the whole tree top down (a process before its
// children are listed, so a fork bomb cannot outrun the walk) and kills it, to a fixed
// point, so a double fork, setsid, a fork chain or a process ignoring SIGTERM is found
// once it is reparented here. It returns when the process has no child left.
void ll_sweep(void);

#endif
