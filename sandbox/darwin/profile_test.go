package darwin

import (
	"debug/macho"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// fixed is an already-canonical parameter set, so the golden files do not depend on the
// machine the tests run on.
func fixed(network bool) Params {
	return Params{
		Workspace: "/private/var/folders/xy/T/airlock-123",
		Home:      "/Users/alice",
		Exec: []string{
			"/opt/homebrew/bin/python3",
			"/opt/homebrew/Cellar/python@3.12/3.12.1/Frameworks/Python.framework/Versions/3.12/bin/python3.12",
		},
		Read:    []string{"/opt/homebrew", "/opt/homebrew/Cellar/python@3.12/3.12.1/Frameworks/Python.framework/Versions/3.12"},
		Network: network,
	}
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name    string
		network bool
	}{{"profile_network_none", false}, {"profile_network_host", true}} {
		t.Run(tc.name, func(t *testing.T) {
			text, args, err := Render(fixed(tc.network))
			if err != nil {
				t.Fatal(err)
			}
			if args[len(args)-2] != "-p" || args[len(args)-1] != text {
				t.Fatalf("args must end with -p and the profile text, got %q", args[len(args)-2])
			}
			got := "; sandbox-exec " + strings.Join(args[:len(args)-2], " ") + " -p <profile below>\n" + text
			golden(t, filepath.Join("testdata", tc.name+".golden"), got)
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden file (run go test -update): %v", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the rendered profile; run go test ./sandbox/darwin/ -update and review the diff", path)
	}
}

// The text may depend only on how many paths there are and on the network mode; the
// paths themselves may appear only as -D values.
func TestRenderTextIndependentOfPaths(t *testing.T) {
	hostile := `/tmp/x") (allow default) ("` + "\n(allow file-read* (subpath \"/\"))"
	p := fixed(false)
	q := p
	q.Workspace = hostile + "/ws"
	q.Home = hostile + "/home"
	q.Exec = []string{hostile + "/python", hostile + "/real"}
	q.Read = []string{hostile + "/a", hostile + "/b"}
	want, _, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	got, args, err := Render(q)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatal("profile text changed with the path values: a path leaked into the text")
	}
	if !slices.Contains(args, "WORKSPACE="+q.Workspace) || !slices.Contains(args, "EXEC_0="+q.Exec[0]) {
		t.Fatalf("hostile paths must travel as -D values, got %q", args)
	}
}

// A hostile directory name on the real file system goes through Resolve unchanged and
// never reaches the text.
func TestProfileHostilePathOnlyInParams(t *testing.T) {
	for _, name := range []string{`quote"paren)`, "new\nline", `(allow default)`, `x")(allow file-read* (subpath "/"))(`} {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(filepath.Join(dir, "ws"), 0o755); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "interp")
		if err := os.WriteFile(bin, nil, 0o755); err != nil {
			t.Fatal(err)
		}
		text, args, err := Profile(Params{Workspace: filepath.Join(dir, "ws"), Home: dir, Exec: []string{bin}})
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if strings.Contains(text, name) {
			t.Errorf("%q appears in the profile text", name)
		}
		if strings.Contains(text, "(allow default)") {
			t.Errorf("%q: the profile text contains (allow default)", name)
		}
		found := false
		for _, a := range args[:len(args)-1] {
			found = found || strings.Contains(a, name)
		}
		if !found {
			t.Errorf("%q: not passed as a -D value: %q", name, args)
		}
	}
}

func TestResolveFollowsSymlinks(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	realWS := filepath.Join(root, "real-ws")
	realBin := filepath.Join(root, "cellar", "bin", "python3.12")
	for _, d := range []string{realWS, filepath.Dir(realBin)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(realBin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	linkWS := filepath.Join(root, "ws-link")
	linkBin := filepath.Join(root, "python3")
	linkPrefix := filepath.Join(root, "prefix-link")
	if err := os.Symlink(realWS, linkWS); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(realBin, linkBin); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "cellar"), linkPrefix); err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(Params{Workspace: linkWS, Home: filepath.Join(root, "no-home"), Exec: []string{linkBin}, Read: []string{linkPrefix}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Workspace != realWS {
		t.Errorf("workspace = %q, want the resolved %q", got.Workspace, realWS)
	}
	if !slices.Equal(got.Exec, []string{linkBin, realBin}) {
		t.Errorf("exec = %q, want the link and its target", got.Exec)
	}
	if !slices.Contains(got.Read, filepath.Join(root, "cellar")) {
		t.Errorf("read = %q, want the resolved prefix", got.Read)
	}
	_, args, err := Render(got)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(args, "WORKSPACE="+realWS) {
		t.Errorf("args carry the unresolved workspace: %q", args)
	}
}

func TestResolveRefusesBroadReadRoots(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	ws := filepath.Join(root, "tmp", "ws")
	bin := filepath.Join(root, "bin")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"/", root, home, filepath.Join(root, "tmp"), ws} {
		_, err := Resolve(Params{Workspace: ws, Home: home, Exec: []string{bin}, Read: []string{r}})
		if !errors.Is(err, ErrUnsafePath) {
			t.Errorf("read root %q: err = %v, want ErrUnsafePath", r, err)
		}
	}
	if _, err := Resolve(Params{Workspace: ws, Home: home, Exec: []string{bin}, Read: []string{filepath.Join(root, "tmp", "other")}}); err == nil {
		t.Error("a read root that does not exist must be refused")
	}
}

func TestRenderRejectsBadPaths(t *testing.T) {
	for _, bad := range []string{"", "relative/python", "/a/../b", "/a/b/", "/a\x00b"} {
		p := fixed(false)
		p.Exec = []string{bad}
		if _, _, err := Render(p); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("exec %q: err = %v, want ErrUnsafePath", bad, err)
		}
	}
	p := fixed(false)
	p.Exec = nil
	if _, _, err := Render(p); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("no executable: err = %v, want ErrUnsafePath", err)
	}
	p = fixed(false)
	p.Workspace = "/"
	if _, _, err := Render(p); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("workspace /: err = %v, want ErrUnsafePath", err)
	}
}

func TestNetworkRulesOnlyWhenEnabled(t *testing.T) {
	off, _, err := Render(fixed(false))
	if err != nil {
		t.Fatal(err)
	}
	on, _, err := Render(fixed(true))
	if err != nil {
		t.Fatal(err)
	}
	// Without the network, the only network rules are unix sockets inside the workspace
	// (multiprocessing's Manager and forkserver).
	for _, line := range strings.Split(rules(off), "\n") {
		if strings.Contains(line, "network") && !strings.Contains(line, `unix-socket (subpath (param "WORKSPACE"))`) {
			t.Errorf("network none: %q", line)
		}
	}
	for _, rule := range []string{"(remote ip", "(local udp", "(local tcp", "com.apple.dnssd.service", "/private/etc/ssl"} {
		if strings.Contains(rules(off), rule) {
			t.Errorf("network none: profile contains %q", rule)
		}
	}
	r := rules(on)
	if !strings.Contains(r, "(allow network-outbound (remote ip))") {
		t.Error("network host: outbound IP is not allowed")
	}
	if strings.Contains(r, "(allow network-outbound)") || strings.Contains(r, "(remote unix-socket)") {
		t.Error("network host: unfiltered outbound would reach unix sockets such as ssh-agent")
	}
	// Loopback reaches the host's own services (airlock's HTTP port among them): its deny
	// must come after the allow, since the last match wins.
	allow := strings.Index(r, "(allow network-outbound (remote ip))")
	deny := strings.Index(r, `(deny network-outbound (remote ip "localhost:*"))`)
	if deny < allow {
		t.Errorf("loopback deny (%d) must follow the remote ip allow (%d)", deny, allow)
	}
	if !strings.Contains(r, `(allow network-bind network-inbound (local udp "*:*"))`) {
		t.Error("network host: UDP replies (DNS through c-ares, QUIC) are not allowed in")
	}
}

// The review's over-permissive rules stay narrowed.
func TestProfileNarrowed(t *testing.T) {
	for _, network := range []bool{false, true} {
		r := rules(mustRender(t, fixed(network)))
		for _, broad := range []string{`(subpath "/usr")`, `(sysctl-name-prefix "kern.proc.pid.")`, `(sysctl-name-prefix "kern.proc.pgrp.")`, "(allow ipc-posix-shm)", "(allow ipc-posix-shm*)",
			"(allow ipc-posix-sem)", "(allow ipc-posix-sem*)"} {
			if strings.Contains(r, broad) {
				t.Errorf("network=%v: profile contains %s", network, broad)
			}
		}
		if !strings.Contains(r, `(sysctl-name-prefix "kern.proc.")`) {
			t.Error("kern.proc.* is not denied")
		}
		// Package-manager var/ and etc/ are denied after the read roots that include them.
		reads := strings.LastIndex(r, `(subpath (param "READ_`)
		for _, dir := range []string{`(subpath "/opt/homebrew/var")`, `(subpath "/usr/local/var")`, `(subpath "/opt/homebrew/etc")`} {
			if i := strings.Index(r, dir); i < reads {
				t.Errorf("%s must be denied after the read roots (at %d, read roots end at %d)", dir, i, reads)
			}
		}
	}
}

// Interpreters the review found denied: Rosetta's runtime and cache (when an executable
// needs it), the xcode-select link.
func TestProfileRuntimes(t *testing.T) {
	p := fixed(false)
	p.Rosetta = true
	r := rules(mustRender(t, p))
	for _, want := range []string{`(subpath "/Library/Apple/usr/libexec/oah")`, `(subpath "/private/var/db/oah")`, `(literal "/private/var/db/xcode_select_link")`, `(subpath "/usr/lib")`, `(ipc-posix-name-prefix "/psm_")`,
		`(allow ipc-posix-sem* (ipc-posix-name-prefix "/mp-")`, `(allow mach-lookup (global-name "com.apple.oahd"))`} {
		if !strings.Contains(r, want) {
			t.Errorf("profile lacks %s", want)
		}
	}
}

// A native interpreter never enters Rosetta: its runtime and oahd's service stay out of
// reach unless an executable is x86_64 only.
func TestProfileRosettaOnlyWhenNeeded(t *testing.T) {
	for _, network := range []bool{false, true} {
		r := rules(mustRender(t, fixed(network)))
		for _, rule := range []string{"com.apple.oahd", "/oah"} {
			if strings.Contains(r, rule) {
				t.Errorf("network=%v, native executables: profile contains %s", network, rule)
			}
		}
	}
}

// writeMachO writes a Mach-O file with one thin image per cpu (a universal file when
// there are several), with no load commands: enough for debug/macho to read its header.
func writeMachO(t *testing.T, path string, cpus ...macho.Cpu) {
	t.Helper()
	thin := func(cpu macho.Cpu) []byte {
		b := binary.LittleEndian.AppendUint32(nil, macho.Magic64)
		for _, v := range []uint32{uint32(cpu), 0, uint32(macho.TypeExec), 0, 0, 0, 0} {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		return b
	}
	var out []byte
	if len(cpus) == 1 {
		out = thin(cpus[0])
	} else {
		const align = 12
		out = binary.BigEndian.AppendUint32(nil, macho.MagicFat)
		out = binary.BigEndian.AppendUint32(out, uint32(len(cpus)))
		for i, cpu := range cpus {
			for _, v := range []uint32{uint32(cpu), 0, uint32((i + 1) << align), uint32(len(thin(cpu))), align} {
				out = binary.BigEndian.AppendUint32(out, v)
			}
		}
		for i, cpu := range cpus {
			out = append(out, make([]byte, (i+1)<<align-len(out))...)
			out = append(out, thin(cpu)...)
		}
	}
	if err := os.WriteFile(path, out, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestNeedsRosetta(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	writeMachO(t, path("arm64"), macho.CpuArm64)
	writeMachO(t, path("x86_64"), macho.CpuAmd64)
	writeMachO(t, path("universal"), macho.CpuAmd64, macho.CpuArm64)
	writeMachO(t, path("fat-x86"), macho.CpuAmd64, macho.Cpu386)
	fat64 := binary.BigEndian.AppendUint32(nil, fatMagic64)
	fat64 = binary.BigEndian.AppendUint32(fat64, 2)
	for _, cpu := range []macho.Cpu{macho.CpuAmd64, macho.CpuArm64} { // fat_arch_64: cpu, subtype, offset, size, align, reserved
		fat64 = binary.BigEndian.AppendUint32(fat64, uint32(cpu))
		fat64 = append(fat64, make([]byte, 28)...)
	}
	if err := os.WriteFile(path("fat64"), fat64, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path("script"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		goarch string
		exec   []string
		want   bool
	}{
		{"arm64", []string{path("arm64")}, false},
		{"arm64", []string{path("universal"), path("arm64")}, false},
		{"arm64", []string{path("x86_64")}, true},
		{"arm64", []string{path("arm64"), path("x86_64")}, true},
		{"arm64", []string{path("fat-x86")}, true},
		{"arm64", []string{path("fat64")}, false},
		{"arm64", []string{path("script")}, true},
		{"arm64", []string{path("missing")}, true},
		{"amd64", []string{path("arm64")}, true},
	} {
		if got := needsRosetta(tc.goarch, tc.exec); got != tc.want {
			t.Errorf("needsRosetta(%s, %q) = %v, want %v", tc.goarch, tc.exec, got, tc.want)
		}
	}
}

// The credential stores that peers deny stay denied, after every read root, whichever
// read root an operator adds inside the home directory (~/Library, ~/.local, a prefix
// under ~/.nvm).
func TestProfileSecretsDenied(t *testing.T) {
	for _, network := range []bool{false, true} {
		r := rules(mustRender(t, fixed(network)))
		reads := strings.LastIndex(r, `(subpath (param "READ_`)
		ws := strings.LastIndex(r, `(subpath (param "WORKSPACE")))`)
		for _, want := range []string{
			`(subpath (string-append (param "HOME") "/.ssh"))`,
			`(subpath (string-append (param "HOME") "/.aws"))`,
			`(subpath (string-append (param "HOME") "/.azure"))`,
			`(subpath (string-append (param "HOME") "/.config"))`,
			`(subpath (string-append (param "HOME") "/.kube"))`,
			`(subpath (string-append (param "HOME") "/.docker"))`,
			`(subpath (string-append (param "HOME") "/.gnupg"))`,
			`(subpath (string-append (param "HOME") "/.local/share/keyrings"))`,
			`(subpath (string-append (param "HOME") "/Library/Keychains"))`,
			`(subpath (string-append (param "HOME") "/Library/Cookies"))`,
			`(subpath (string-append (param "HOME") "/Library/Group Containers"))`,
			`(subpath (string-append (param "HOME") "/Library/Application Support/Google/Chrome"))`,
			`(subpath (string-append (param "HOME") "/Library/Application Support/pip"))`,
			`(literal (string-append (param "HOME") "/.netrc"))`,
			`(literal (string-append (param "HOME") "/.git-credentials"))`,
			`(literal (string-append (param "HOME") "/.npmrc"))`,
			`(literal (string-append (param "HOME") "/.pypirc"))`,
			`(literal (string-append (param "HOME") "/.cargo/credentials.toml"))`,
			`(literal (string-append (param "READ_0") "/etc/npmrc"))`,
			`(literal (string-append (param "READ_1") "/pip.conf"))`,
			`(literal (string-append (param "READ_1") "/.condarc"))`,
		} {
			i := strings.Index(r, want)
			if i < 0 {
				t.Errorf("network=%v: %s is not denied", network, want)
				continue
			}
			if i < reads || i > ws {
				t.Errorf("network=%v: %s must be denied between the read roots (%d) and the workspace (%d), at %d", network, want, reads, ws, i)
			}
			if form := r[strings.LastIndex(r[:i], "(deny ")+1 : i]; !strings.HasPrefix(form, "deny file-read* file-write*") || strings.Contains(form, "(allow") {
				t.Errorf("network=%v: %s is not in a file-read* deny", network, want)
			}
		}
	}
	// No read roots: no prefix denies, and never an unfiltered one (it would deny every read).
	p := fixed(false)
	p.Read = nil
	r := rules(mustRender(t, p))
	if strings.Contains(r, `"/etc/npmrc"`) || strings.Contains(r, "(deny file-read* file-write*)") {
		t.Error("without read roots the profile must not render prefix denies")
	}
}

// net.* (interfaces and their MACs, routes, the ARP cache, every socket of the host) is
// not readable without the network; with it, only the socket tables stay denied.
func TestProfileNetSysctls(t *testing.T) {
	const deny = `(deny sysctl-read (sysctl-name-prefix "net."))`
	const allow = `(allow sysctl-read (sysctl-name-prefix "net."))`
	off := rules(mustRender(t, fixed(false)))
	if i := strings.Index(off, deny); i < 0 || i < strings.Index(off, "(allow sysctl-read)") {
		t.Error("network none: net.* sysctls are not denied after the general sysctl allow")
	}
	if strings.Contains(off, allow) {
		t.Error("network none: net.* sysctls are allowed again")
	}
	on := rules(mustRender(t, fixed(true)))
	a := strings.Index(on, allow)
	if a < strings.Index(on, deny) {
		t.Error("network host: net.* sysctls are not allowed after the base profile's deny")
	}
	for _, table := range []string{"net.inet.tcp.pcblist", "net.inet.udp.pcblist", "net.local.stream.pcblist"} {
		if i := strings.Index(on, `(sysctl-name-prefix "`+table+`")`); i < a {
			t.Errorf("network host: %s is not denied after the net.* allow", table)
		}
	}
}

func mustRender(t *testing.T, p Params) string {
	t.Helper()
	text, _, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// The ordering guarantees: deny default first, the workspace allow last (last match
// wins), secret denies after every read root.
func TestRuleOrder(t *testing.T) {
	for _, network := range []bool{false, true} {
		text, _, err := Render(fixed(network))
		if err != nil {
			t.Fatal(err)
		}
		r := rules(text)
		deny := strings.Index(r, `(deny default (with message "airlock"))`)
		reads := strings.LastIndex(r, `(subpath (param "READ_`)
		secrets := strings.Index(r, `"/.ssh"`)
		ws := strings.LastIndex(r, `(allow file-read* file-write* file-test-existence (subpath (param "WORKSPACE")))`)
		if deny < 0 || deny > strings.Index(r, "(allow") {
			t.Error("deny default must come before every allow")
		}
		if !(reads < secrets && secrets < ws) || reads < 0 {
			t.Errorf("order read roots (%d) < secret denies (%d) < workspace (%d) broken", reads, secrets, ws)
		}
		if strings.Contains(r[ws+1:], "(allow") || strings.Contains(r[ws+1:], "(deny") {
			t.Error("the workspace allow must be the last rule")
		}
		if strings.Contains(r, "(allow default") || strings.Contains(r, "(allow file-read*)") || strings.Contains(r, "(allow process-exec)") {
			t.Error("profile contains an unfiltered allow")
		}
	}
}

// Without a Mac to compile SBPL, at least check that every form is closed and no string
// runs across a line.
func TestProfileBalanced(t *testing.T) {
	text, _, err := Render(fixed(true))
	if err != nil {
		t.Fatal(err)
	}
	depth := 0
	for i, line := range strings.Split(rules(text), "\n") {
		inString := false
		for _, c := range line {
			switch {
			case c == '"':
				inString = !inString
			case inString:
			case c == '(':
				depth++
			case c == ')':
				depth--
			}
			if depth < 0 {
				t.Fatalf("line %d closes more than it opens", i+1)
			}
		}
		if inString {
			t.Fatalf("line %d leaves a string open: %q", i+1, line)
		}
	}
	if depth != 0 {
		t.Fatalf("profile ends at depth %d", depth)
	}
}

// rules strips ; comments so assertions look at rules only.
func rules(text string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, ";"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}
