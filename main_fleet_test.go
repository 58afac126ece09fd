package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The binary as a fleet member: named tokens from a file, reloaded on SIGHUP, the
// token's name in the audit log, and SIGTERM draining: /readyz 503 at once, a new call
// refused retryably, the call in flight finishing with its result, exit 0.
func TestE2EHTTPServiceDrainAndTokens(t *testing.T) {
	bin := needSandbox(t)
	dir := t.TempDir()
	tokens, audit := filepath.Join(dir, "tokens"), filepath.Join(dir, "audit.jsonl")
	alice, bob := "Bearer aaaaaaaaaaaaaaaaaaaaaaaa", "bearer bbbbbbbbbbbbbbbbbbbbbbbb"
	if err := os.WriteFile(tokens, []byte("alice aaaaaaaaaaaaaaaaaaaaaaaa\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--http", "127.0.0.1:0", "--stateless", "--tokens-file", tokens, "--drain-grace", "20s")
	cmd.Env = append(os.Environ(), "AIRLOCK_AUDIT="+audit)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	url := strings.TrimSuffix(loggedEndpoint(t, stderr, nil), "/mcp")
	hc := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) int {
		resp, err := hc.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	call := func(auth, code string) (int, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code","arguments":{"code":` + code + `}}}`
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", auth)
		resp, err := hc.Do(req)
		if err != nil {
			return -1, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if get("/readyz") != 200 || get("/healthz") != 200 {
		t.Fatal("not ready after logging its endpoint")
	}
	if code, body := call(alice, `"print(1)"`); code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("alice: %d %s", code, body)
	}
	if err := os.WriteFile(tokens, []byte("bob bbbbbbbbbbbbbbbbbbbbbbbb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if code, _ := call(alice, `"print(1)"`); code == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("alice's token still works 5 s after SIGHUP removed it")
		}
		time.Sleep(50 * time.Millisecond)
	}
	slow := make(chan string, 1)
	go func() {
		_, body := call(bob, `"import time\ntime.sleep(1.5)\nprint('finished in the drain')"`)
		slow <- body
	}()
	time.Sleep(700 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	for deadline := time.Now().Add(2 * time.Second); get("/readyz") != 503; {
		if time.Now().After(deadline) {
			t.Fatal("/readyz not 503 after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, body := call(bob, `"print('too late')"`); code != 503 || !strings.Contains(body, "nothing ran") {
		t.Errorf("a new call while draining: %d %s", code, body)
	}
	if body := <-slow; !strings.Contains(body, "finished in the drain") {
		t.Errorf("the call in flight did not finish: %s", body)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after the drain: %v, want 0", err)
	}
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"principal":"alice"`) || !strings.Contains(string(b), `"principal":"bob"`) {
		t.Errorf("the audit log lacks the clients' names:\n%s", b)
	}
	late := sha256.Sum256([]byte("print('too late')"))
	if strings.Contains(string(b), hex.EncodeToString(late[:])) {
		t.Error("the call refused while draining ran")
	}
}
