// The contract between the server (Go) and the sandbox's C processes (the zygote, the
// spawner, the init): every number both sides must agree on. The C includes this file;
// Go reads the same names through cgo (protocol_linux.go, mount_linux.go), so a value
// changed here changes on both sides at once. protocol_linux.go has the sequence diagram
// of the channels these numbers travel on.

#ifndef AIRLOCK_PROTOCOL_LINUX_H
#define AIRLOCK_PROTOCOL_LINUX_H

// argv[0] of the zygote (started with the one argument "zygote"), and the name the
// sandbox's init shows.
#define INIT_NAME "airlock-sandbox-init"

// Descriptors. The zygote's socket is its fd 3; a spawner gets stdin, stdout, stderr,
// the config and the report descriptor as 0-4 (SPAWN_FDS of them), and the init
// inherits them. A preloaded interpreter reads the program's argv on its fd 3 after it
// has written one byte to its fd 4.
#define ZYGOTE_FD 3
#define CONFIG_FD 3
#define REPORT_FD 4
#define SPAWN_FDS 5
#define PRELOAD_ARGV_FD 3
#define PRELOAD_LOADED_FD 4

// Zygote requests, the first uint32 of a message on ZYGOTE_FD. A spawn request carries
// the spawner's SPAWN_FDS descriptors (and, for ZYG_SPAWN_CGROUP, the v2 cgroup to start
// it in) and is answered with its pid and pidfd. ZYG_LEAVE, only to a one-shot zygote
// (argv "zygote" "oneshot"), is not answered: it lists what the zygote removes once
// the server has gone (its socket's EOF) and every spawner is reaped, as NUL-terminated
// paths each after a kind byte, and it may carry the host-id lock (SCM_RIGHTS), which
// the zygote then holds until its sandboxes are gone.
#define ZYG_SPAWN 0
#define ZYG_SPAWN_CGROUP 1
#define ZYG_LEAVE 2
#define LEAVE_TREE 't' // a cgroup dir: its child cgroups, then itself (waiting while busy)
#define LEAVE_BASE 'b' // a base cgroup dir this run made: removed once empty (zygote_linux.c)
#define LEAVE_MAX 4096 // the largest ZYG_LEAVE message, in bytes

// The exit code of a spawner or init whose setup failed (after a REP_ERROR report, or
// without a word when the server is gone).
#define EXIT_SETUP_FAILED 125

// The largest frame either side accepts, in bytes.
#define MAX_FRAME (1U << 30)

// The byte the spawner writes on the sync pipe once the init's id maps are written.
#define SYNC_MAPS 'm'

// Bounds the init applies to a config frame's counts.
#define MAX_OPS 4096
#define MAX_RLIMITS 64

// Report kinds, the first byte of a frame on REPORT_FD.
#define REP_READY 1    // everything up to the call is done
#define REP_STARTED 2  // the program runs
#define REP_EXIT 3     // the program ended; everything else in the sandbox is dead
#define REP_ERROR 4    // a setup stage failed; the init exits
#define REP_LEFTOVER 5 // from the spawner: a process of the sandbox's host uid outlived it
#define REP_LISTENER 6 // comes with the bridge's listening socket (SCM_RIGHTS)
#define REP_NETNS 7    // comes with the sandbox's network namespace (SCM_RIGHTS), once joined

// Config flags, the config frame's first field.
#define CFG_SETUP_ONLY 1 // build the sandbox, report, exit without a program
#define CFG_OWN_UID 2    // become the host uid first, prove none of its processes is left
#define CFG_LANDLOCK 4   // the Landlock tier: a landlock frame follows the cgroup frame

// The landlock frame's want bits (landlock_linux.go): the file system is always restricted.
#define LL_NET 1   // deny TCP bind and connect (Landlock ABI 4)
#define LL_SCOPE 2 // scope abstract unix sockets and signals to the sandbox (ABI 6)

// Kinds of mount plan steps (mountKind).
#define OP_DIR 0
#define OP_SYMLINK 1
#define OP_BIND_RO 2
#define OP_TMPFS 3
#define OP_PROC 4
#define OP_COPY 5
#define OP_BIND_DEV 6
#define OP_MASK 7
#define OP_SCRATCH 8

// Why the artifact walker did not return an entry (sandbox.Skip, whose values these
// are, says what each means). ART_UNLISTED marks the closing entry, whose size field
// counts the entries not listed; ART_CUT marks it when the walk also stopped at its
// budget of entries read (sandbox.CutArtifact).
#define ART_RETURNED 0
#define ART_HARD_LINK 1
#define ART_TOO_MANY_FILES 2
#define ART_FILE_TOO_LARGE 3
#define ART_TOTAL_CAP 4
#define ART_UNREADABLE 5
#define ART_CHANGED 6
#define ART_PATH_TOO_LONG 7
#define ART_SYMLINK 8
#define ART_NOT_REGULAR 9
#define ART_TOO_DEEP 10
#define ART_CUT 254
#define ART_UNLISTED 255

#endif
