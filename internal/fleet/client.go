package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxAttempts bounds the retries of one call; a call that still has no result after
// them is a failure of the test.
const maxAttempts = 30

// job is one call of the mix: unique code (a marker makes every call's code_sha256
// distinct, so the audit logs can account for each call) and what its result must say.
type job struct {
	n        int
	language string
	code     string
	stdin    string
	status   string // the run's expected status
	marker   string // must appear in stdout
}

func (j job) sha() string {
	s := sha256.Sum256([]byte(j.code))
	return hex.EncodeToString(s[:])
}

// mix returns call n of the load: python successes, python failures, python with stdin
// and computation, and node when it is enabled.
func mix(n int, node bool) job {
	m := fmt.Sprintf("fleet-call-%06d", n)
	kinds := 4
	if node {
		kinds = 5
	}
	switch n % kinds {
	case 0:
		return job{n, "python", fmt.Sprintf("print(%q)\n", m), "", "ok", m}
	case 1:
		return job{n, "python", fmt.Sprintf("import sys\nprint(%q)\nsys.exit(3)\n", m), "", "error", m}
	case 2:
		return job{n, "python", fmt.Sprintf("import sys\nprint(sys.stdin.read().strip(), sum(range(200000)))\n# %s\n", m), m, "ok", m}
	case 3:
		return job{n, "python", fmt.Sprintf("import json, hashlib\nprint(json.dumps({'m': %q, 'h': hashlib.sha256(b'x' * 100000).hexdigest()}))\n", m), "", "ok", m}
	}
	return job{n, "node", fmt.Sprintf("console.log(%q)\n", m), "", "ok", m}
}

// outcome is how one call went.
type outcome struct {
	job      job
	latency  time.Duration
	attempts int
	retries  map[string]int // why each retry happened
	err      error
}

// client is one MCP client in stateless mode: an initialize (which a stateless server
// answers without a session), then tools/call requests, each a POST any replica may take.
type client struct {
	url   string
	token string
	http  *http.Client
	id    int
}

// errRetry marks an answer that says nothing ran, or a lost answer; reason names it.
type errRetry struct{ reason string }

func (e errRetry) Error() string { return "retryable: " + e.reason }

func (c *client) post(ctx context.Context, body any) (int, []byte, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/mcp", bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, out, err
}

func (c *client) initialize(ctx context.Context) error {
	c.id++
	code, body, err := c.post(ctx, map[string]any{"jsonrpc": "2.0", "id": c.id, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "airlock-fleet", "version": "1"}}})
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("initialize: HTTP %d: %.300s", code, body)
	}
	_, _, _ = c.post(ctx, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return nil
}

// call runs j once: a result, or errRetry when the answer proves nothing ran (503 from
// a starting or draining replica, busy) or was lost in transit (a replica killed
// mid-call: 502 from HAProxy, or a broken connection). A lost answer is retried too;
// the audit logs then show whether the call had run.
func (c *client) call(ctx context.Context, j job) error {
	c.id++
	args := map[string]any{"code": j.code, "language": j.language}
	if j.stdin != "" {
		args["stdin"] = j.stdin
	}
	code, body, err := c.post(ctx, map[string]any{"jsonrpc": "2.0", "id": c.id, "method": "tools/call",
		"params": map[string]any{"name": "run_code", "arguments": args}})
	switch {
	case err != nil:
		return errRetry{"connection"}
	case code == http.StatusServiceUnavailable && bytes.Contains(body, []byte("nothing ran")):
		return errRetry{"503 draining or starting"}
	case code == http.StatusServiceUnavailable:
		return errRetry{"503 no replica up"}
	case code == http.StatusBadGateway || code == http.StatusGatewayTimeout:
		return errRetry{fmt.Sprintf("%d answer lost", code)}
	case code != http.StatusOK:
		return fmt.Errorf("HTTP %d: %.300s", code, body)
	}
	var msg struct {
		Result *struct {
			IsError           bool `json:"isError"`
			StructuredContent *struct {
				Status string `json:"status"`
				Stdout string `json:"stdout"`
			} `json:"structuredContent"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return fmt.Errorf("undecodable answer: %.300s", body)
	}
	switch {
	case msg.Error != nil:
		return fmt.Errorf("JSON-RPC error: %s", msg.Error.Message)
	case msg.Result == nil:
		return fmt.Errorf("no result: %.300s", body)
	case msg.Result.StructuredContent == nil:
		text := ""
		if len(msg.Result.Content) > 0 {
			text = msg.Result.Content[0].Text
		}
		if strings.HasPrefix(text, "server busy") {
			return errRetry{"busy"}
		}
		return fmt.Errorf("tool refused the call: %s", text)
	}
	sc := msg.Result.StructuredContent
	if sc.Status != j.status || !strings.Contains(sc.Stdout, j.marker) {
		return fmt.Errorf("call %d: status %s stdout %q, want %s with %s", j.n, sc.Status, sc.Stdout, j.status, j.marker)
	}
	return nil
}

// do runs j until it has a result, retrying with a growing pause.
func (c *client) do(ctx context.Context, j job) outcome {
	o := outcome{job: j, retries: map[string]int{}}
	t0 := time.Now()
	for o.attempts = 1; o.attempts <= maxAttempts; o.attempts++ {
		err := c.call(ctx, j)
		var r errRetry
		if !errors.As(err, &r) {
			o.err = err
			break
		}
		o.retries[r.reason]++
		if o.attempts == maxAttempts {
			o.err = fmt.Errorf("call %d: no result after %d attempts (last: %s)", j.n, maxAttempts, r.reason)
			break
		}
		select {
		case <-ctx.Done():
			o.err = ctx.Err()
			o.latency = time.Since(t0)
			return o
		case <-time.After(time.Duration(min(o.attempts, 10)) * 50 * time.Millisecond):
		}
	}
	o.latency = time.Since(t0)
	return o
}
