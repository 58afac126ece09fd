package egress

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// TestForwardOneExchange: a plain-HTTP connection carries one checked request to its
// destination. A second request pipelined behind it (for a name not listed), one
// smuggled in a body (Content-Length against chunked), and a Host header naming another
// name than the URL never reach the destination as requests of their own.
func TestForwardOneExchange(t *testing.T) {
	var mu sync.Mutex
	var hosts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host+" "+r.URL.Path)
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	p := port(t, srv.URL)
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"ok.test": {{loopback}}, "evil.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"ok.test"}, Ports: []int{p}, AllowPrivate: true, AllowLoopback: true}, dns)
	ok := fmt.Sprintf("ok.test:%d", p)
	for _, raw := range []string{
		"GET http://" + ok + "/a HTTP/1.1\r\nHost: " + ok + "\r\n\r\nGET http://evil.test:" + fmt.Sprint(p) + "/evil HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		"GET http://" + ok + "/b HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		"POST http://" + ok + "/c HTTP/1.1\r\nHost: " + ok + "\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /evil HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		"POST http://" + ok + "/d HTTP/1.1\r\nHost: " + ok + "\r\nContent-Length: 44\r\n\r\nGET /evil HTTP/1.1\r\nHost: evil.test\r\n\r\n",
	} {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, raw)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.ReadAll(c)
		c.Close()
	}
	h.proxy.Close()
	mu.Lock()
	defer mu.Unlock()
	want := []string{ok + " /a", ok + " /b", ok + " /c", ok + " /d"}
	if fmt.Sprint(hosts) != fmt.Sprint(want) {
		t.Errorf("the destination saw %q, want %q", hosts, want)
	}
}

// TestTunnelPlainHTTP: plain HTTP sent through a CONNECT tunnel reaches the checked
// address, and a front end there reads its Host: the request is forwarded as a
// plain-HTTP one is, Host rewritten to the CONNECT authority and one exchange per
// connection, whatever Host, absolute URL or pipelined request it carries. A start
// that could still become a request line the proxy did not see whole is refused.
func TestTunnelPlainHTTP(t *testing.T) {
	var mu sync.Mutex
	var hosts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host+" "+r.URL.Path[:min(len(r.URL.Path), 16)])
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	p := port(t, srv.URL)
	dns := &fakeDNS{answers: map[string][][]netip.Addr{"ok.test": {{loopback}}}, lookups: map[string]int{}}
	h := newHarness(t, sandbox.Egress{Domains: []string{"ok.test"}, Ports: []int{p}, AllowLoopback: true}, dns)
	ok := fmt.Sprintf("ok.test:%d", p)
	answers := map[string]string{}
	for _, tc := range []struct{ name, raw string }{
		{"host", "GET /a HTTP/1.1\r\nHost: evil.test\r\n\r\nGET /evil HTTP/1.1\r\nHost: evil.test\r\n\r\n"},
		{"absolute", "GET http://evil.test/b HTTP/1.1\r\nHost: evil.test\r\n\r\n"},
		{"lower method", "get /c HTTP/1.1\r\nHost: evil.test\r\n\r\n"},
		{"blank line first", "\r\nGET /evil HTTP/1.1\r\nHost: evil.test\r\n\r\n"},
		{"long line", "GET /" + strings.Repeat("e", 8<<10) + " HTTP/1.1\r\nHost: evil.test\r\n\r\n"},
		{"http2", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
		{"bare cr", "GET /evil HTTP/1.1\rHost: evil.test\r\n\r\n"},
		{"tab", "GET\t/evil HTTP/1.1\r\nHost: evil.test\r\n\r\n"},
		{"two spaces", "GET  /evil HTTP/1.1\r\nHost: evil.test\r\n\r\n"},
		// Controls that Python's http.server (str.split) reads as spaces, Apache's
		// "HttpProtocolOptions Unsafe" too (\v, \f), or a C parser as the line's end (NUL).
		{"vertical tab", "GET\v/evil\vHTTP/1.1\r\nHost: evil.test\r\n\r\n"},
		{"form feed", "GET\f/evil\fHTTP/1.1\r\nHost: evil.test\r\n\r\n"},
		{"unit separator", "GET\x1f/evil\x1fHTTP/1.1\r\nHost: evil.test\r\n\r\n"},
		{"nul after version", "GET /evil HTTP/1.1\x00\r\nHost: evil.test\r\n\r\n"},
	} {
		c, br := h.connect(t, ok)
		_, _ = io.WriteString(c, tc.raw)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, _ := io.ReadAll(br)
		c.Close()
		answers[tc.name], _, _ = strings.Cut(string(got), "\r\n")
	}
	// Not HTTP: relayed as it is (the test server answers it 400 itself).
	c, br := h.connect(t, ok)
	_, _ = c.Write([]byte("\x00\x01binary\r\n"))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.ReadAll(br)
	c.Close()
	h.proxy.Close()
	mu.Lock()
	defer mu.Unlock()
	if want := []string{ok + " /a", ok + " /b", ok + " /c"}; fmt.Sprint(hosts) != fmt.Sprint(want) {
		t.Errorf("the destination saw %q, want %q", hosts, want)
	}
	for name, want := range map[string]string{"host": "HTTP/1.1 200 OK", "absolute": "HTTP/1.1 200 OK", "lower method": "HTTP/1.1 200 OK",
		"blank line first": "HTTP/1.1 403 Forbidden", "long line": "HTTP/1.1 403 Forbidden", "http2": "HTTP/1.1 400 Bad Request",
		"bare cr": "HTTP/1.1 403 Forbidden", "tab": "HTTP/1.1 403 Forbidden", "two spaces": "HTTP/1.1 403 Forbidden",
		"vertical tab": "HTTP/1.1 403 Forbidden", "form feed": "HTTP/1.1 403 Forbidden", "unit separator": "HTTP/1.1 403 Forbidden",
		"nul after version": "HTTP/1.1 403 Forbidden"} {
		if answers[name] != want {
			t.Errorf("%s: answered %q, want %q", name, answers[name], want)
		}
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 400") {
		t.Errorf("binary bytes were not relayed to the destination: %q", got)
	}
}
