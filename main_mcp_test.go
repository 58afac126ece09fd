package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// initRaw makes p's session a 2025-06-18 one.
func initRaw(t *testing.T, p *rawStdio) {
	t.Helper()
	p.send(t, []byte(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	if m := p.answer(t); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	p.send(t, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
}

// aliveRaw checks that p still runs a call and answers it with its id.
func aliveRaw(t *testing.T, p *rawStdio, id int) {
	t.Helper()
	p.send(t, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print('alive', 6*7)"}}}`, id)))
	m := p.answer(t)
	r, _ := m["result"].(map[string]any)
	if m["id"] != float64(id) || r == nil || r["isError"] == true || !strings.Contains(fmt.Sprint(r["content"]), "alive 42") {
		t.Fatalf("a valid call: %.300v", m)
	}
}

// peakRSS is the largest resident size process pid has had, in bytes (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/pid/status")
	return 0
}

// A message just under the 16 MiB line limit that is all '[' (JSON deeper than any
// decoder reads) is refused as a parse error without the server growing: the duplicate-
// name scan kept a frame per level, and one such line took the server to 1.6 GB
// resident and 4 s of CPU, four of them to 2.3 GB.
func TestE2EDeepNestingBoundedMemory(t *testing.T) {
	p := startRawStdio(t, needSandbox(t))
	initRaw(t, p)
	head := []byte(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":`)
	line := append(head, bytes.Repeat([]byte("["), 16<<20-len(head)-64)...)
	for range 2 {
		p.send(t, line)
		if m := p.answer(t); m["error"] == nil {
			t.Fatalf("a line of 16 million '[': %.300v", m)
		}
	}
	aliveRaw(t, p, 3)
	// The line itself is 16 MiB, read into one buffer; the server idles at ≈ 20 MB.
	n := peakRSS(t, p.pid)
	t.Logf("peak resident size %d MB", n>>20)
	if n > 256<<20 {
		t.Errorf("the server's peak resident size was %d MB after two deep lines", n>>20)
	}
}

// Protocol misuse written straight to the real binary's stdio, with a real sandbox
// running a call meanwhile: each is answered at once, none runs code, and the server
// goes on serving.
func TestE2EProtocolMisuseRawStdio(t *testing.T) {
	p := startRawStdio(t, needSandbox(t))
	call := func(id, code string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"` + code + `"}}}`)
	}
	errorOf := func(m map[string]any) string {
		e, _ := m["error"].(map[string]any)
		return fmt.Sprint(e["message"])
	}
	// Before initialize: ran on main.
	p.send(t, call("1", "print('ran before initialize')"))
	if m := p.answer(t); !strings.Contains(errorOf(m), "not initialized") {
		t.Errorf("a call before initialize: %.300v", m)
	}
	initRaw(t, p)
	// A call that runs while the rest is sent.
	p.send(t, call(`"slow"`, "import time; time.sleep(3); print('slow done')"))
	for _, tc := range []struct {
		name string
		line []byte
		want string
	}{
		{"id null", call("null", "print('ran with id null')"), "the id must be a string or a number"},
		{"batch", append(append([]byte("["), call("2", "print('ran in a batch')")...), ']'), "batches are not supported"},
		{"lone surrogate", call("3", `print('\ud800')`), "surrogate"},
		{"id in flight", call(`"slow"`, "print('ran twice')"), "already in use"},
	} {
		p.send(t, tc.line)
		m := p.answer(t)
		if m["id"] == "slow" && tc.name != "id in flight" {
			t.Fatalf("%s: answered only after the call in flight: %.300v", tc.name, m)
		}
		if !strings.Contains(errorOf(m), tc.want) {
			t.Errorf("%s: %.300v", tc.name, m)
		}
	}
	if m := p.answer(t); m["id"] != "slow" || !strings.Contains(fmt.Sprint(m["result"]), "slow done") {
		t.Errorf("the call in flight: %.300v", m)
	}
	aliveRaw(t, p, 4)
}
