package egress

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
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
