package linux

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/internal/stamp"
	"github.com/airlock-mcp/airlock/sandbox"
)

// A one-shot command (`airlock run`) gives New a stamp store (Options.Stamps): a full
// self-check that passed recently for the same binary, kernel, namespaces, cgroups and
// settings is then not built again (it is most of such a command's start-up: a whole
// sandbox, ~10 ms on top of a ~15 ms run). Reusing it weakens nothing: every call builds
// its sandbox in full and fails closed at any stage that does not hold, exactly as after
// a fresh self-check; what the pass adds is the choice of container substitutes
// (adaptations) and the report's facts, which are what the stamp keeps. A server (no
// store) and `airlock probe` always check in full.

// checkKind names the self-check's stamps.
const checkKind = "selfcheck"

// checkStamp is what a passing self-check leaves for the next process.
type checkStamp struct {
	Rules        int  `json:"rules"`
	NoProc       bool `json:"no_proc"`
	KeepHostname bool `json:"keep_hostname"`
	// Filters are the seccomp programs the check ran with (stampedFilters).
	Filters map[sandbox.Network]stampedFilter `json:"filters,omitempty"`
}

// stampedFilter is one compiled seccomp program (bpf) as a stamp keeps it: its length
// here, its bytes in the stamp's attachment (Attachment).
type stampedFilter struct {
	Prog    []byte `json:"-"`
	Len     int    `json:"len"`
	Rules   int    `json:"rules"`
	BadArch string `json:"bad_arch"`
}

// Attachment is the stamp's programs back to back, in the order of their modes' names
// (stamp.Attacher): decoding them from base64 in the JSON was 15 % of New's CPU at each
// `airlock run`.
func (st checkStamp) Attachment() []byte {
	var b []byte
	for _, n := range slices.Sorted(maps.Keys(st.Filters)) {
		b = append(b, st.Filters[n].Prog...)
	}
	return b
}

// Attach cuts the loaded attachment into the programs, each as long as its Len says; a
// length that does not add up is a corrupt stamp (a miss: the check runs in full).
func (st *checkStamp) Attach(b []byte) error {
	for _, n := range slices.Sorted(maps.Keys(st.Filters)) {
		f := st.Filters[n]
		if f.Len < 0 || f.Len > len(b) {
			return fmt.Errorf("the %s filter's %d bytes are not in the attachment", n, f.Len)
		}
		f.Prog, b = b[:f.Len:f.Len], b[f.Len:]
		st.Filters[n] = f
	}
	if len(b) != 0 {
		return fmt.Errorf("%d bytes of the attachment are no filter's", len(b))
	}
	return nil
}

// checkSysctls are the host settings that decide whether sandboxes can be built.
var checkSysctls = []string{
	"/proc/sys/user/max_user_namespaces",
	"/proc/sys/kernel/unprivileged_userns_clone",
	"/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
	"/proc/sys/kernel/seccomp/actions_avail",
	"/proc/sys/kernel/random/boot_id", // a reboot invalidates every stamp
}

// checkKey is everything the self-check's outcome depends on.
func (s *Sandbox) checkKey() *stamp.Key {
	k := &stamp.Key{}
	k.AddFile("exe", s.self)
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		k.Add("kernel", unix.ByteSliceToString(u.Release[:])+" "+unix.ByteSliceToString(u.Version[:]))
	} else {
		k.Add("kernel", "\x00unreadable")
	}
	for _, p := range checkSysctls {
		k.AddRead(p)
	}
	// The namespaces and cgroups this process runs in: another container, user
	// namespace or cgroup is another host as far as the check goes.
	for _, ns := range []string{"user", "mnt", "pid", "net", "cgroup", "uts", "ipc"} {
		k.AddLink("/proc/self/ns/" + ns)
	}
	k.AddRead("/proc/self/cgroup")
	k.AddRead("/proc/self/uid_map")
	k.Add("ids", fmt.Sprintf("euid %d egid %d root %t", os.Geteuid(), os.Getegid(), s.root))
	k.Add("host-ids", s.ids.scheme+" "+s.ids.describe())
	// The shared base dirs, not this Sandbox's own dirs in them (named per process).
	ctrls := make([]string, 0, len(s.cg.v1))
	for c, d := range s.cg.v1 {
		ctrls = append(ctrls, c+":"+filepath.Dir(d))
	}
	sort.Strings(ctrls)
	v2 := s.cg.v2
	if v2 != "" {
		v2 = filepath.Dir(v2)
	}
	k.Add("cgroups", fmt.Sprintf("v%d %q %q %q %q", s.cg.version, v2, ctrls, s.cg.ctrls, s.cg.reason))
	opts := s.opts
	opts.Stamps = nil
	b, err := json.Marshal(opts)
	if err != nil {
		k.Add("options", "\x00unreadable")
	} else {
		k.Add("options", string(b))
	}
	return k
}

// reuseCheck takes a recent passing self-check from the store; false: check in full.
func (s *Sandbox) reuseCheck(k *stamp.Key) bool {
	if s.opts.Stamps == nil {
		return false
	}
	var st checkStamp
	if err := s.opts.Stamps.Load(checkKind, k, &st); err != nil {
		s.log.Debug("self-check runs in full", "why", err)
		return false
	}
	s.adapt = adaptations{noProc: st.NoProc, keepHostname: st.KeepHostname}
	s.checked = &st
	return true
}

// stampCheck records the self-check that just passed.
func (s *Sandbox) stampCheck(k *stamp.Key, rules int) {
	st := checkStamp{Rules: rules, NoProc: s.adapt.noProc, KeepHostname: s.adapt.keepHostname,
		Filters: map[sandbox.Network]stampedFilter{}}
	for n, f := range s.filters {
		st.Filters[n] = stampedFilter{Prog: f.prog, Len: len(f.prog), Rules: f.rules, BadArch: f.badArch}
	}
	s.checked = &st
	if s.opts.Stamps == nil {
		return
	}
	if err := s.opts.Stamps.Save(checkKind, k, &st); err != nil {
		s.log.Debug("self-check not stamped", "err", err)
	}
}

// stampedFilters returns the seccomp programs the reused self-check ran with, when it
// kept a well-formed one for every mode New prepares; otherwise it compiles them (for a
// one-shot run, ~3 ms of CPU: as much as the rest of its start-up).
//
// Reusing them is as safe as compiling. A program is a function of what the check's key
// holds: this binary's identity (its rule lists, and the libseccomp linked into it), the
// kernel's release and version and seccomp's available actions (what libseccomp asks
// the kernel before it generates code), the namespaces, and the options (network modes,
// tier); another binary, kernel or setting is another key, and compiles afresh. The
// stamp is trusted only as a pass is (internal/stamp: a regular file of this euid,
// writable by no one else, in a 0700 directory of this euid — root's under /run — and
// out of every sandbox's root: TestSandboxCannotWriteStamps), so another local user
// cannot plant a weaker program. A program that is not well formed is never loaded.
func (s *Sandbox) stampedFilters(reused, landlock bool) func() (map[sandbox.Network]*bpf, error) {
	if reused {
		m := map[sandbox.Network]*bpf{}
		for _, n := range filterNetworks(s.opts.Networks) {
			f, ok := s.checked.Filters[n]
			if !ok || !wellFormed(f.Prog) {
				m = nil
				break
			}
			m[n] = &bpf{prog: f.Prog, rules: f.Rules, badArch: f.BadArch}
		}
		if m != nil {
			s.filtersStamped = true
			return func() (map[sandbox.Network]*bpf, error) { return m, nil }
		}
		s.log.Debug("seccomp filters compile: the reused self-check kept none for every network mode")
	}
	return compileFilters(s.opts.Networks, landlock)
}

// wellFormed reports whether prog can be a classic BPF program the kernel runs: whole
// instructions (struct sock_filter, 8 bytes), at least one and at most BPF_MAXINSNS, the
// last a return. The kernel checks the rest when the program is loaded.
func wellFormed(prog []byte) bool {
	const insn = 8
	n := len(prog) / insn
	if n == 0 || len(prog)%insn != 0 || n > unix.BPF_MAXINSNS {
		return false
	}
	code := binary.NativeEndian.Uint16(prog[len(prog)-insn:])
	return code&0x07 == unix.BPF_RET
}
