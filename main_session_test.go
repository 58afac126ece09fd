package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A session does not outlive its server: a daemon started in one, detached into a new
// session of its own, is gone once the server has exited, whether its stdio client
// went away (EOF), it was told to stop (SIGTERM) or it was killed (SIGKILL, when none
// of its own cleanup runs).
func TestE2ESessionsEndWithTheServer(t *testing.T) {
	bin := needSandbox(t)
	for _, end := range []string{"eof", "sigterm", "sigkill"} {
		t.Run(end, func(t *testing.T) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			marker := "airlock-e2e-session-" + hex.EncodeToString(b[:])
			cmd := exec.Command(bin, "serve")
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill() }()
			code := "import subprocess\nsubprocess.Popen(['/usr/bin/python3', '-c', 'import time; time.sleep(300)', '" + marker + "'], start_new_session=True)\nprint('started')"
			call, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
				"params": map[string]any{"name": "run_code", "arguments": map[string]any{"code": code, "session": "new"}}})
			_, _ = io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
			_, _ = io.WriteString(stdin, string(call)+"\n")
			sc := bufio.NewScanner(stdout)
			sc.Buffer(nil, 16<<20)
			var answer string
			for sc.Scan() {
				if strings.Contains(sc.Text(), `"id":2`) {
					answer = sc.Text()
					break
				}
			}
			if !strings.Contains(answer, `"session_id"`) || !strings.Contains(answer, "started") {
				t.Fatalf("session new: %.500s\nstderr:\n%s", answer, stderr.String())
			}
			if len(procsWith(marker)) == 0 {
				t.Fatal("the daemon is not running")
			}
			switch end {
			case "eof":
				stdin.Close()
			case "sigterm":
				_ = cmd.Process.Signal(syscall.SIGTERM)
			case "sigkill":
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
			for sc.Scan() {
			}
			if err := cmd.Wait(); err != nil && end != "sigkill" {
				t.Fatalf("exit: %v\nstderr:\n%s", err, stderr.String())
			}
			// The server waits for its sandboxes' cleanup before it exits; a short grace
			// covers the kernel's reaping of the killed pid namespace.
			deadline := time.Now().Add(5 * time.Second)
			for len(procsWith(marker)) > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the session's daemon outlived the server (%s): pids %v", end, procsWith(marker))
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// procsWith are the host pids whose command line contains marker.
func procsWith(marker string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(marker)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
