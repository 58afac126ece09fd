package linux

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// The codec's tests run the init's own C decoder and encoder (wirecheck_linux.go)
// against the Go side, in this process: a field written in one order and read in
// another, or a report field the Go side misreads, fails here and not as "malformed
// config frame" in a real run.

// sameWire compares two wire values, an empty list and none being the same.
func sameWire(t *testing.T, what string, got, want any) {
	t.Helper()
	if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); g != w {
		t.Errorf("%s differs after the C decoder:\n got %s\nwant %s", what, g, w)
	}
}

func testConfigs() []*initConfig {
	limits := sandbox.Limits{Wall: 5 * time.Second, CPU: 3 * time.Second, Memory: 256 << 20, Pids: 32,
		FileSize: 16 << 20, OpenFiles: 64, Output: 1 << 16, Workspace: 8 << 20}
	return []*initConfig{
		{Limits: limits, Network: sandbox.NetworkNone},
		{
			Preload: []string{"/usr/bin/python3", "-c", "boot"}, Env: []string{"A=1", "PYTHONPATH=/x"},
			Limits: limits, Network: sandbox.NetworkAllowlist, Mounts: []string{"/opt/python", "/opt/tool.bin"},
			OutDir: "out", Artifacts: sandbox.ArtifactLimits{MaxFiles: 16, MaxFileBytes: 4 << 20, MaxTotal: 16 << 20},
			RlimitAS: true, Filter: bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 40), SetupOnly: true,
			NoProc: true, KeepHostname: true, ProxyPort: 40123,
			CloneFlags: 0x7e020000, HostUID: 200123, HostGID: 200124, OwnUID: true,
			UIDMap: "/usr/bin/newuidmap", GIDMap: "/usr/bin/newgidmap",
		},
	}
}

func TestConfigRoundTrip(t *testing.T) {
	for i, cfg := range testConfigs() {
		w, err := configWire(cfg, mergedUsr)
		if err != nil {
			t.Fatal(err)
		}
		frame := w.encode()
		got, err := cParseConfig(frame)
		if err != nil {
			t.Fatalf("config %d: the C decoder refused the Go encoder's frame: %v", i, err)
		}
		sameWire(t, fmt.Sprintf("config %d", i), got, w)
		if enc, _ := encodeConfig(cfg, mergedUsr); !bytes.Equal(enc, frame) {
			t.Errorf("config %d: encodeConfig and configWire(...).encode differ", i)
		}
	}
}

func TestHandoverRoundTrip(t *testing.T) {
	h := &handover{
		Argv: []string{"/usr/bin/python3", "-I", "main.py", "a b"}, Tail: []string{"main.py", "a b"},
		Code: []byte("print(1)\n\x00binary"), CodeFile: "main.py",
		Files:  []sandbox.File{{Path: "data/in.csv", Data: []byte("1,2\n"), Mode: 0o600}, {Path: "empty", Mode: 0}},
		Limits: sandbox.Limits{CPU: 2 * time.Second, Pids: 8, FileSize: 1 << 20, OpenFiles: 32, Memory: 64 << 20},
	}
	for _, applyAS := range []bool{false, true} {
		frame, err := encodeHandover(h, applyAS)
		if err != nil {
			t.Fatal(err)
		}
		got, err := cParseHandover(frame)
		if err != nil {
			t.Fatalf("the C decoder refused the Go encoder's handover: %v", err)
		}
		want := &wireHandover{Argv: h.Argv, Tail: h.Tail, Code: h.Code, CodeFile: h.CodeFile,
			Files:   []wireFile{{"data/in.csv", 0o600, []byte("1,2\n")}, {"empty", 0, nil}},
			Rlimits: wireRlimits(rlimits(h.Limits, applyAS))}
		sameWire(t, "handover", got, want)
	}
}

func TestReportRoundTrip(t *testing.T) {
	read := func(frame []byte) *message {
		t.Helper()
		m, err := readReport(bytes.NewReader(frame))
		if err != nil {
			t.Fatalf("the Go decoder refused the init's report: %v", err)
		}
		return m
	}
	for _, kind := range []byte{repReady, repStarted, repLeftover, repListener, repNetns} {
		if m := read(cReportFrame(kind)); m.Kind != kind {
			t.Errorf("kind %d read as %d", kind, m.Kind)
		}
	}
	if m := read(cErrorFrame("mount /usr", 13, "bind: Permission denied")); m.Kind != repError ||
		m.Stage != "mount /usr" || m.Errno != 13 || m.Err != "bind: Permission denied" {
		t.Errorf("error report read as %+v", m)
	}
	// The setup-only report: exited, code 0, nothing else.
	if m := read(cExitFrame(exitInfo{Exited: true}, nil)); m.Kind != repExit || *m.Exit != (exitInfo{Exited: true}) || m.Artifacts != nil {
		t.Errorf("setup-only exit report read as %+v %+v", m, m.Exit)
	}
	x := exitInfo{Exited: false, Code: -1, Signal: 9, CPUUsec: 1234567, MaxRSS: 40 << 20}
	arts := []sandbox.Artifact{
		{Path: "plot.png", Size: 3, Data: []byte("png")},
		{Path: "empty.txt", Size: 0, Data: []byte{}},
		{Path: "big.bin", Size: 1 << 30, Skipped: "file too large"},
		{Path: "...", Skipped: "7 more entries not listed (at most 256 are)"},
		sandbox.CutArtifact(3),
	}
	m := read(cExitFrame(x, arts))
	if m.Kind != repExit || *m.Exit != x || len(m.Artifacts) != len(arts) {
		t.Fatalf("exit report read as %+v %+v", m, m.Exit)
	}
	for i, a := range m.Artifacts {
		w := arts[i]
		if a.Path != w.Path || a.Size != w.Size || a.Skipped != w.Skipped || !bytes.Equal(a.Data, w.Data) || (a.Data == nil) != (w.Data == nil) {
			t.Errorf("artifact %d read as %+v, want %+v", i, a, w)
		}
		if (a.SHA256 != "") != (w.Data != nil) {
			t.Errorf("artifact %d: hash %q", i, a.SHA256)
		}
	}
}

// Every frame cut short, and every frame with a byte too many, is refused by the C
// decoder: a drift in either encoder cannot pass for a valid frame of another shape.
func TestMalformedFramesRefused(t *testing.T) {
	w, err := configWire(testConfigs()[1], mergedUsr)
	if err != nil {
		t.Fatal(err)
	}
	frame := w.encode()
	h, err := encodeHandover(&handover{Argv: []string{"/bin/true"}, Code: []byte("x"), CodeFile: "f",
		Files: []sandbox.File{{Path: "a", Data: []byte("b")}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	reframe := func(payload []byte) []byte {
		return (&encoder{b: payload}).frame()
	}
	for _, c := range []struct {
		name  string
		frame []byte
		parse func([]byte) error
	}{
		{"config", frame, func(f []byte) error { _, err := cParseConfig(f); return err }},
		{"handover", h, func(f []byte) error { _, err := cParseHandover(f); return err }},
	} {
		payload := c.frame[4:]
		for n := 0; n < len(payload); n++ {
			if err := c.parse(reframe(payload[:n])); err == nil {
				t.Fatalf("%s cut to %d of %d bytes accepted", c.name, n, len(payload))
			}
		}
		long := append(append([]byte{}, payload...), 0)
		if err := c.parse(reframe(long)); err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("%s with a trailing byte: %v", c.name, err)
		}
	}
	// Counts beyond the init's bounds.
	big := *w
	big.Plan = make([]mountOp, maxOps+1)
	if _, err := cParseConfig(big.encode()); err == nil || !strings.Contains(err.Error(), "malformed mount plan") {
		t.Errorf("%d mount steps: %v", maxOps+1, err)
	}
	odd := *w
	odd.Filter = []byte{1, 2, 3}
	if _, err := cParseConfig(odd.encode()); err == nil || !strings.HasPrefix(err.Error(), "seccomp: ") {
		t.Errorf("a 3-byte seccomp program: %v", err)
	}
	port := *w
	port.ProxyPort = 65536
	if _, err := cParseConfig(port.encode()); err == nil {
		t.Error("proxy port 65536 accepted")
	}
	// The Go report decoder: cut short, a byte too many, flags other than 0 and 1.
	exit := cExitFrame(exitInfo{Exited: true, Code: 3}, []sandbox.Artifact{{Path: "a", Size: 1, Data: []byte("a")}})
	for n := 5; n < len(exit)-4; n++ {
		if _, err := readReport(bytes.NewReader(reframe(exit[4:n]))); err == nil {
			t.Fatalf("exit report cut to %d bytes accepted", n)
		}
	}
	if _, err := readReport(bytes.NewReader(reframe(append(append([]byte{}, exit[4:]...), 0)))); err == nil {
		t.Error("exit report with a trailing byte accepted")
	}
	bad := append([]byte{}, exit[4:]...)
	bad[1] = 2 // exited
	if _, err := readReport(bytes.NewReader(reframe(bad))); err == nil {
		t.Error("exit report with exited=2 accepted")
	}
	if _, err := readReport(bytes.NewReader(reframe([]byte{99}))); err == nil {
		t.Error("unknown report kind accepted")
	}
	for _, a := range []sandbox.Artifact{
		{Path: "x", Size: 1, Skipped: "no such reason"}, // code 253
		{Path: "x", Size: 2, Data: []byte("x")},         // 1 byte of a 2-byte file
	} {
		if _, err := readReport(bytes.NewReader(cExitFrame(exitInfo{}, []sandbox.Artifact{a}))); err == nil {
			t.Errorf("artifact entry %+v accepted", a)
		}
	}
	// Data on a skipped entry, which the C encoder cannot even write.
	e := encoder{b: []byte{repExit, 0}}
	e.u32(0)
	e.u32(0)
	e.u64(0)
	e.u64(0)
	e.u32(1)
	e.str("x")
	e.u64(1)
	e.b = append(e.b, byte(sandbox.SkipSymlink))
	e.bytes([]byte("x"))
	if _, err := readReport(bytes.NewReader(e.frame())); err == nil {
		t.Error("a skipped entry with data accepted")
	}
}

// The walker's codes are sandbox.Skip's values, every reason has one, and none is the
// closing entry's.
func TestArtifactCodes(t *testing.T) {
	n := 0
	for s := sandbox.SkipNone; s.Valid(); s++ {
		n++
	}
	if len(artifactSkips) != n {
		t.Errorf("%d walker codes for %d reasons", len(artifactSkips), n)
	}
	for code, skip := range artifactSkips {
		if code != byte(skip) || code == artUnlisted || code == artCut {
			t.Errorf("code %d maps to skip %d (%q)", code, skip, skip.Reason())
		}
	}
}

// FuzzWireDecoders feeds arbitrary payloads to the init's config and handover decoders
// (C) and to the report decoder (Go). None may crash, and whatever one accepts must be
// exactly the encoding of what it decoded: no slack a drifted encoder could hide in.
func FuzzWireDecoders(f *testing.F) {
	for _, cfg := range testConfigs() {
		if w, err := configWire(cfg, mergedUsr); err == nil {
			f.Add(w.encode()[4:])
		}
	}
	if h, err := encodeHandover(&handover{Argv: []string{"/bin/sh", "-c", "x"}, Tail: []string{"x"}, Code: []byte("c"),
		CodeFile: "c.sh", Files: []sandbox.File{{Path: "d", Data: []byte("e"), Mode: 0o644}}}, true); err == nil {
		f.Add(h[4:])
	}
	f.Add(cExitFrame(exitInfo{Exited: true, Code: 1, CPUUsec: 5}, []sandbox.Artifact{{Path: "a", Size: 1, Data: []byte("a")},
		{Path: "b", Size: 9, Skipped: "symlink"}})[4:])
	f.Add(cErrorFrame("seccomp", 22, "seccomp: load: Invalid argument")[4:])
	f.Fuzz(func(t *testing.T, payload []byte) {
		frame := (&encoder{b: payload}).frame()
		if w, err := cParseConfig(frame); err == nil {
			if enc := w.encode(); !bytes.Equal(enc, frame) {
				t.Fatalf("config accepted, but it is not the encoding of what was read: %+v", w)
			}
		}
		if w, err := cParseHandover(frame); err == nil {
			if enc := w.encode(); !bytes.Equal(enc, frame) {
				t.Fatalf("handover accepted, but it is not the encoding of what was read: %+v", w)
			}
		}
		m, err := readReport(bytes.NewReader(frame))
		if err != nil {
			return
		}
		var again []byte
		switch m.Kind {
		case repExit:
			for _, a := range m.Artifacts {
				if strings.Contains(a.Path+a.Skipped, "\x00") {
					return // C strings, as below
				}
			}
			again = cExitFrame(*m.Exit, m.Artifacts)
		case repError:
			if strings.Contains(m.Stage+m.Err, "\x00") {
				return // C strings: the init never sends a NUL in them
			}
			again = cErrorFrame(m.Stage, m.Errno, m.Err)
		default:
			again = cReportFrame(m.Kind)
		}
		if !bytes.Equal(again, frame) {
			t.Fatalf("report accepted, but the init would encode what was read differently: %+v", m)
		}
	})
}
