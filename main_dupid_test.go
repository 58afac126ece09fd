package main

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The real server, a stateful Streamable HTTP session and real sandboxes: a second call
// with the id of one in flight (7.0 while 7 runs) is refused and runs nothing, and a
// notifications/cancelled ends exactly the call it names: 7 the call 7, "7" the call "7".
// Before, the second call 7 ran and took the first's cancellation slot in mcp-go, and
// "7" and 7 were one slot: cancelling 7 ended the call "7" and left 7 running.
func TestE2ESessionDuplicateIDAndCancel(t *testing.T) {
	bin := needSandbox(t)
	cmd := exec.Command(bin, "serve", "--http", "127.0.0.1:0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	url := loggedEndpoint(t, stderr, nil)
	type answer struct {
		code int
		body string
	}
	post := func(body, sid string, timeout time.Duration) answer {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err != nil {
			return answer{-1, err.Error()}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if sid == "" {
			return answer{resp.StatusCode, resp.Header.Get("Mcp-Session-Id")}
		}
		return answer{resp.StatusCode, string(b)}
	}
	hs := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "", 10*time.Second)
	if hs.code != 200 || hs.body == "" {
		t.Fatalf("initialize: %d, session %q", hs.code, hs.body)
	}
	sid := hs.body
	sleeper := func(id, name string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"import time\nprint('` + name + `')\ntime.sleep(30)","timeout_seconds":40}}}`
	}
	start := func(id, name string) <-chan answer {
		ch := make(chan answer, 1)
		go func() { ch <- post(sleeper(id, name), sid, 60*time.Second) }()
		time.Sleep(time.Second) // the POST is in (the id is held from its arrival)
		return ch
	}
	cancel := func(id string) {
		if a := post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`}}`, sid, 10*time.Second); a.code != http.StatusAccepted {
			t.Errorf("cancellation of %s: %d %s", id, a.code, a.body)
		}
	}
	within := func(ch <-chan answer, d time.Duration) (answer, bool) {
		select {
		case a := <-ch:
			return a, true
		case <-time.After(d):
			return answer{}, false
		}
	}

	num := start("7", "number")
	if a := post(sleeper("7.0", "duplicate"), sid, 5*time.Second); a.code != http.StatusConflict || !strings.Contains(a.body, "already in use") {
		t.Errorf("a second call 7.0 while 7 runs: %d %s; want 409, already in use", a.code, a.body)
	}
	str := start(`"7"`, "string")
	cancel("7")
	if _, ok := within(num, 15*time.Second); !ok {
		t.Error("the cancellation of 7 did not end the call 7")
	}
	if a, ok := within(str, 2*time.Second); ok {
		t.Errorf(`the cancellation of 7 ended the call "7": %s`, a.body)
	}
	cancel(`"7"`)
	if _, ok := within(str, 15*time.Second); !ok {
		t.Error(`the cancellation of "7" did not end the call "7"`)
	}
}
