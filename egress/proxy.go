package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-mcp/airlock/sandbox"
)

// Floors for a zero field of sandbox.Egress: a zero is never "unlimited".
const (
	DefaultMaxBytes       = 64 << 20
	DefaultMaxConnections = 32
)

const (
	// HeaderTimeout bounds the time a client has to send its request head (and, in a
	// tunnel, its ClientHello): a slowloris client holds a connection slot this long.
	HeaderTimeout = 10 * time.Second
	maxHeader     = 64 << 10
	// maxResponseHeader bounds a destination's response head, as net/http's client
	// does by default (Transport.MaxResponseHeaderBytes).
	maxResponseHeader = 1 << 20
	resolveTime       = 5 * time.Second
	dialTime          = 10 * time.Second
	// maxRecords bounds the connections a call's result lists; the counts go on.
	maxRecords = 256
	// maxRefusers bounds the connections over the cap being answered at once; the accept
	// loop waits for one to finish, and the kernel's backlog holds the rest.
	maxRefusers = 8
	// lingerTime bounds how long a refused connection is drained after its answer.
	lingerTime = time.Second
)

// Resolver is how the proxy looks names up (net.DefaultResolver; tests inject one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Proxy is one call's egress: an HTTP proxy (CONNECT and absolute-URI forwarding) over
// the connections of one listener. It is safe for concurrent use.
type Proxy struct {
	cfg     sandbox.Egress
	id      string
	resolve Resolver
	log     *slog.Logger
	// headerTimeout is HeaderTimeout; tests shorten it.
	headerTimeout time.Duration

	used   atomic.Int64 // bytes, both directions
	capped atomic.Bool
	slots  chan struct{} // one per open connection
	// refusers bounds the goroutines answering connections over the cap.
	refusers chan struct{}

	mu     sync.Mutex
	ln     net.Listener
	open   map[net.Conn]struct{}
	closed bool
	use    sandbox.NetworkUse
	wg     sync.WaitGroup
}

// New returns the proxy of call id under cfg. A nil resolver is net.DefaultResolver.
func New(cfg sandbox.Egress, id string, resolve Resolver, log *slog.Logger) *Proxy {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if resolve == nil {
		resolve = net.DefaultResolver
	}
	if log == nil {
		log = slog.Default().With("component", "egress")
	}
	return &Proxy{cfg: cfg, id: id, resolve: resolve, log: log.With("id", id), headerTimeout: HeaderTimeout,
		slots: make(chan struct{}, cfg.MaxConnections), refusers: make(chan struct{}, maxRefusers), open: map[net.Conn]struct{}{},
		use: sandbox.NetworkUse{Connections: []sandbox.Connection{}}}
}

// Serve accepts ln's connections until ln is closed (by Close). A connection over the
// cap is answered by one of a few refusers, so a flood of connections costs a bounded
// number of goroutines.
func (p *Proxy) Serve(ln net.Listener) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return
	}
	p.ln = ln
	p.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if p.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: back off instead of spinning.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		select {
		case p.slots <- struct{}{}:
		default:
			p.refusers <- struct{}{}
			if !p.track(c) {
				<-p.refusers
				c.Close()
				continue
			}
			go p.refuseNow(c)
			continue
		}
		if !p.track(c) {
			<-p.slots
			c.Close()
			continue
		}
		go p.handle(c)
	}
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// track registers an open connection; false once the proxy is closing.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.open[c] = struct{}{}
	p.wg.Add(1)
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
	<-p.slots
	p.wg.Done()
}

// Close stops the proxy: the listener and every connection are closed. It returns what
// the call did.
func (p *Proxy) Close() sandbox.NetworkUse {
	p.mu.Lock()
	p.closed = true
	if p.ln != nil {
		p.ln.Close()
	}
	for c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	use := p.use
	use.Connections = slices.Clone(use.Connections)
	use.Capped, use.MaxBytes = p.capped.Load(), p.cfg.MaxBytes
	if use.Allowed+use.Refused > 0 {
		p.log.Info("egress", "allowed", use.Allowed, "refused", use.Refused, "sent", use.Sent,
			"received", use.Received, "capped", use.Capped)
	}
	return use
}

// record adds one connection to the call's account and the log.
func (p *Proxy) record(c sandbox.Connection) {
	p.mu.Lock()
	if len(p.use.Connections) < maxRecords {
		p.use.Connections = append(p.use.Connections, c)
	} else {
		p.use.Omitted++
	}
	if c.Verdict == "refused" {
		p.use.Refused++
	} else {
		p.use.Allowed++
	}
	p.use.Sent += c.Sent
	p.use.Received += c.Received
	p.mu.Unlock()
	// Each connection at debug level: the call's audit line lists them, and one flood
	// must not write a thousand log lines. Close logs the call's summary.
	p.log.Debug("egress connection", "host", c.Host, "port", c.Port, "addr", c.Addr, "sent", c.Sent,
		"received", c.Received, "verdict", c.Verdict, "rule", c.Rule)
}

// Refusal is why a destination is refused: the rule's name and a sentence for the
// program (the body of the 403).
type Refusal struct {
	Rule, Why string
}

func (r *Refusal) Error() string { return r.Rule + ": " + r.Why }

// refuseNow answers a connection over the cap without reading its request.
func (p *Proxy) refuseNow(c net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.open, c)
		p.mu.Unlock()
		<-p.refusers
		p.wg.Done()
	}()
	r := &Refusal{"connection-cap", fmt.Sprintf("this call already has %d connections open", p.cfg.MaxConnections)}
	_ = c.SetWriteDeadline(time.Now().Add(lingerTime))
	writeStatus(c, http.StatusForbidden, r)
	closeGently(c)
	p.record(sandbox.Connection{Verdict: "refused", Rule: r.Rule})
}

// closeGently ends a connection whose request may be unread: closed with unread bytes,
// it would be reset, and the reset can destroy the answer before the client reads it.
// It sends FIN and drains what the client still sends, briefly.
func closeGently(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		_ = c.SetReadDeadline(time.Now().Add(lingerTime))
		_, _ = io.Copy(io.Discard, io.LimitReader(c, maxHeader))
	}
	c.Close()
}

// writeStatus writes a whole response whose body names the rule, so a program (or the
// model reading its output) can tell "not allowed" from "down".
func writeStatus(w io.Writer, code int, r *Refusal) {
	body := "airlock egress proxy: " + r.Rule + ": " + r.Why + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nX-Airlock-Egress-Rule: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), r.Rule, len(body), body)
}

// limitedReader stops the head of a message (the program's request, a destination's
// response) at n bytes; the body is unbounded (the byte cap counts it).
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("message head too large")
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	return n, err
}

// handle serves one connection from the sandbox: one request, then a tunnel or one
// forwarded exchange.
func (p *Proxy) handle(c net.Conn) {
	defer p.untrack(c)
	lim := &limitedReader{r: c, n: maxHeader}
	br := bufio.NewReaderSize(lim, 4096)
	_ = c.SetReadDeadline(time.Now().Add(p.headerTimeout))
	req, err := http.ReadRequest(br)
	if err != nil {
		writeStatus(c, http.StatusBadRequest, &Refusal{"malformed-request", "not an HTTP proxy request"})
		closeGently(c)
		p.record(sandbox.Connection{Verdict: "refused", Rule: "malformed-request"})
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	lim.n = 1<<63 - 1
	conn := sandbox.Connection{}
	host, port, rerr := target(req)
	conn.Host, conn.Port = host, port
	if rerr != nil {
		writeStatus(c, http.StatusBadRequest, rerr)
		closeGently(c)
		conn.Verdict, conn.Rule = "refused", rerr.Rule
		p.record(conn)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up, addr, refused, err := p.connect(ctx, host, port)
	if addr.IsValid() {
		conn.Addr = addr.String()
	}
	if refused != nil {
		writeStatus(c, http.StatusForbidden, refused)
		closeGently(c)
		conn.Verdict, conn.Rule = "refused", refused.Rule
		p.record(conn)
		return
	}
	if err != nil {
		writeStatus(c, http.StatusBadGateway, &Refusal{"unreachable", err.Error()})
		closeGently(c)
		conn.Verdict, conn.Rule = "failed", "unreachable"
		p.record(conn)
		return
	}
	defer up.Close()
	p.mu.Lock()
	p.open[up] = struct{}{}
	closing := p.closed
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.open, up)
		p.mu.Unlock()
	}()
	if closing {
		return
	}
	t := &tally{p: p}
	if req.Method == http.MethodConnect {
		p.tunnel(c, br, lim, up, host, port, t, &conn)
	} else {
		p.forward(c, req, up, t, &conn)
	}
	conn.Sent, conn.Received = t.sent.Load(), t.received.Load()
	if conn.Verdict == "" {
		conn.Verdict = "allowed"
		if t.cut.Load() {
			conn.Verdict, conn.Rule = "cut", "byte-cap"
		}
	}
	p.record(conn)
}

// target is the destination a request names: CONNECT's authority, or an absolute
// http:// URL's host. Any other request was meant for a server, not a proxy.
func target(req *http.Request) (string, int, *Refusal) {
	var hostport string
	defPort := 0
	switch {
	case req.Method == http.MethodConnect:
		hostport = req.Host
	case req.URL != nil && req.URL.IsAbs() && strings.EqualFold(req.URL.Scheme, "http"):
		hostport, defPort = req.URL.Host, 80
	default:
		return "", 0, &Refusal{"not-a-proxy-request", "send CONNECT host:port or an absolute http:// URL (the proxy variables are set for this)"}
	}
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil && defPort != 0 {
		host, portStr, err = hostport, strconv.Itoa(defPort), nil
	}
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || port <= 0 || port > 65535 || host == "" {
		return host, 0, &Refusal{"malformed-request", fmt.Sprintf("bad destination %q", hostport)}
	}
	return host, port, nil
}

// Decide is the allowlist's verdict on a destination before any lookup: nil, or the
// rule that refuses it. A name must match a pattern; an IP literal must be listed; the
// port must be listed (checked second, so a name not on the list is named as such).
func Decide(cfg sandbox.Egress, host string, port int) *Refusal {
	if r := decideHost(cfg, host); r != nil {
		return r
	}
	if !slices.Contains(cfg.Ports, port) {
		return &Refusal{"port", fmt.Sprintf("port %d is not allowed (allowed: %s)", port, joinInts(cfg.Ports))}
	}
	return nil
}

// decideHost is Decide's verdict on the host alone.
func decideHost(cfg sandbox.Egress, host string) *Refusal {
	if a, ok := ipLiteral(host); ok {
		if !slices.Contains(cfg.Domains, a.String()) {
			return &Refusal{"ip-literal", fmt.Sprintf("%s is an IP address; only listed names (and listed addresses) may be reached", a)}
		}
		if rule := DeniedAddr(a, cfg); rule != "" {
			return &Refusal{rule, fmt.Sprintf("%s is a %s address%s", a, rule, opener(rule))}
		}
		return nil
	}
	name, ok := normalizeHost(host)
	if !ok {
		return &Refusal{"domain", fmt.Sprintf("%q is not a host name", host)}
	}
	for _, pat := range cfg.Domains {
		if matchPattern(pat, name) {
			return nil
		}
	}
	return &Refusal{"domain", fmt.Sprintf("%s is not on the allowlist (%s)", name, strings.Join(cfg.Domains, ", "))}
}

// CheckAddrs is the verdict on a name's answers: every one must be allowed, so an
// answer that mixes a public address with a private one is refused as a whole.
func CheckAddrs(host string, addrs []netip.Addr, cfg sandbox.Egress) *Refusal {
	if len(addrs) == 0 {
		return &Refusal{"resolve", host + " has no addresses"}
	}
	for _, a := range addrs {
		if rule := DeniedAddr(a, cfg); rule != "" {
			return &Refusal{rule, fmt.Sprintf("%s resolves to %s, a %s address%s", host, a.Unmap(), rule, opener(rule))}
		}
	}
	return nil
}

// opener names the setting that opens a refused class, for the refusal's sentence: an
// operator who opened private ranges for an index on loopback learns the one that does.
func opener(rule string) string {
	for _, r := range addrRules {
		if r.rule == rule {
			switch r.class {
			case private:
				return " (egress.allow_private opens it)"
			case local:
				return " (egress.allow_loopback opens it)"
			}
			return ""
		}
	}
	return ""
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// connect decides, resolves once, checks every answer, and dials the checked addresses
// themselves. addr is the address connected to, or the one refused.
func (p *Proxy) connect(ctx context.Context, host string, port int) (net.Conn, netip.Addr, *Refusal, error) {
	if r := Decide(p.cfg, host, port); r != nil {
		a, _ := ipLiteral(host)
		return nil, a, r, nil
	}
	var addrs []netip.Addr
	if a, ok := ipLiteral(host); ok {
		addrs = []netip.Addr{a}
	} else {
		// The name looked up is the name Decide checked, not the spelling the program
		// sent: strings.ToLower maps some non-ASCII runes to ASCII (the Kelvin sign to
		// k), and a resolver may read a trailing dot or case otherwise. It is rooted, so
		// the resolver's search list never makes x.example.org, which does not exist,
		// into x.example.org.corp.internal, which the allowlist does not name. A
		// single-label name stays as listed: it means the search list (and Go's
		// /etc/hosts keys such a name unrooted).
		name, _ := normalizeHost(host)
		if strings.Contains(name, ".") {
			name += "."
		}
		rctx, cancel := context.WithTimeout(ctx, resolveTime)
		found, err := p.resolve.LookupNetIP(rctx, "ip", name)
		cancel()
		if err != nil {
			return nil, netip.Addr{}, nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		for _, a := range found {
			if a = a.Unmap().WithZone(""); !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		}
		if r := CheckAddrs(host, addrs, p.cfg); r != nil {
			var bad netip.Addr
			for _, a := range addrs {
				if DeniedAddr(a, p.cfg) != "" {
					bad = a
					break
				}
			}
			return nil, bad, r, nil
		}
	}
	// A host's own address is this host whatever its class (a private 10.x on eth0, a
	// bridge's, a public one): allow_private does not open it, allow_loopback does.
	if !p.cfg.AllowLoopback {
		if a, ok := hostAddr(addrs); ok {
			return nil, a, &Refusal{"host", fmt.Sprintf("%s is an address of this host, which reaches its services as loopback does (egress.allow_loopback opens it)", a)}, nil
		}
	}
	var d net.Dialer
	var last error
	for _, a := range addrs {
		dctx, cancel := context.WithTimeout(ctx, dialTime)
		c, err := d.DialContext(dctx, "tcp", net.JoinHostPort(a.String(), strconv.Itoa(port)))
		cancel()
		if err == nil {
			return c, a, nil, nil
		}
		last = err
	}
	return nil, addrs[0], nil, fmt.Errorf("connect to %s port %d: %w", host, port, last)
}

// tally counts one connection's bytes against the call's cap.
type tally struct {
	p              *Proxy
	sent, received atomic.Int64
	cut            atomic.Bool
}

// take reserves up to n bytes of the call's cap and returns how many it got.
func (t *tally) take(n int) int {
	for {
		used := t.p.used.Load()
		room := t.p.cfg.MaxBytes - used
		if room <= 0 {
			t.cut.Store(true)
			t.p.capped.Store(true)
			return 0
		}
		m := int64(n)
		if m > room {
			m = room
		}
		if t.p.used.CompareAndSwap(used, used+m) {
			if m < int64(n) {
				t.cut.Store(true)
				t.p.capped.Store(true)
			}
			return int(m)
		}
	}
}

var errCapped = errors.New("byte cap reached")

// copyCounted copies src to dst within the byte cap, adding to count.
func (t *tally) copyCounted(dst io.Writer, src io.Reader, count *atomic.Int64) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			m := t.take(n)
			if m > 0 {
				w, werr := dst.Write(buf[:m])
				count.Add(int64(w))
				if werr != nil {
					return werr
				}
			}
			if m < n {
				return errCapped
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// countedWriter writes through the tally (a forwarded request).
type countedWriter struct {
	t   *tally
	w   io.Writer
	cnt *atomic.Int64
}

func (c *countedWriter) Write(b []byte) (int, error) {
	m := c.t.take(len(b))
	n, err := c.w.Write(b[:m])
	c.cnt.Add(int64(n))
	if err == nil && m < len(b) {
		err = errCapped
	}
	return n, err
}

// tunnel answers CONNECT and relays bytes. A TLS ClientHello must name the host the
// CONNECT named (or none), in the clear: the address was chosen for that host, and an
// SNI for another one, or one encrypted (ECH), is domain fronting past the allowlist.
// When the destination answers with a HelloRetryRequest, the client's second
// ClientHello is held to the same rule: a front end may serve the name of the second.
func (p *Proxy) tunnel(c net.Conn, br *bufio.Reader, lim *limitedReader, up net.Conn, host string, port int, t *tally, conn *sandbox.Connection) {
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(p.headerTimeout))
	first, _ := br.Peek(2) // one byte and an end (or a timeout) is still a stream
	if len(first) == 0 {
		return
	}
	if otherRecordFirst(first) {
		conn.Verdict, conn.Rule = "refused", "malformed-tls"
		_, _ = c.Write(tlsAlert)
		return
	}
	switch firstLine(br) {
	case lineHTTP:
		p.tunnelHTTP(c, br, lim, up, net.JoinHostPort(host, strconv.Itoa(port)), t, conn)
		return
	case lineRefused:
		conn.Verdict, conn.Rule = "refused", "http-in-tunnel"
		writeStatus(c, http.StatusForbidden, &Refusal{"http-in-tunnel", "a tunnel that starts like an HTTP request must start with one whole HTTP/1 request line; send plain HTTP as an absolute http:// URL"})
		closeGently(c)
		return
	}
	var ur io.Reader = up
	if isTLS(first[0]) {
		if !p.passHello(c, br, up, host, t, conn) {
			return
		}
		// The destination's answer is read whole before the client's next bytes: only
		// after a HelloRetryRequest may the client send a hello again in the clear.
		bur := bufio.NewReader(up)
		ur = bur
		_ = up.SetReadDeadline(time.Now().Add(p.headerTimeout))
		raw, retry, ended, err := readServerHello(bur)
		if err != nil {
			conn.Verdict, conn.Rule = "failed", "bad-response"
			p.log.Debug("egress: the destination's answer to a ClientHello is not TLS", "host", host, "err", err)
			return
		}
		_ = up.SetReadDeadline(time.Time{})
		if _, err := (&countedWriter{t, c, &t.received}).Write(raw); err != nil {
			return
		}
		if retry && !ended && !p.passSecondHello(c, br, up, host, t, conn) {
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	relay(t, br, c, up, ur)
}

// The kinds of a tunnel's first line, for firstLine.
const (
	lineOther   = iota // not text, or text that is not an HTTP request: relayed as it is
	lineHTTP           // an HTTP/1 request line: the request is forwarded
	lineRefused        // could still become a request line a server reads, but not one the proxy can check
)

// firstLine classifies what a tunnel starts with. Plain HTTP through a CONNECT tunnel
// would reach the checked address with any Host, request after request: behind a shared
// front end, another site. So a tunnel whose first line is an HTTP/1 request line gets
// the forwarded exchange's rules (tunnelHTTP), and one that could still turn into a
// request line (leading blank lines, which servers skip; a line longer than the buffer;
// one not ended in time) is refused. A control byte that no server reads inside a
// request line (lineSpace: binary protocols) ends the question, as does a whole line
// that is not a request; a line with any other control that names HTTP/ is refused.
func firstLine(br *bufio.Reader) int {
	b, _ := br.Peek(1)
	if len(b) == 0 {
		return lineOther
	}
	if c := b[0]; c == '\r' || c == '\n' || c == ' ' || c == '\t' {
		return lineRefused
	}
	if !tokenByte(b[0]) {
		return lineOther
	}
	for i := 1; ; i++ {
		if i == br.Size() {
			return lineRefused
		}
		b, err := br.Peek(i + 1)
		if err != nil {
			return lineRefused // the client ended, or stalled past the head timeout, mid-line
		}
		switch c := b[i]; {
		case c == '\n':
			// Exactly "method SP target SP HTTP/x.y"; any other line naming HTTP (a bare
			// CR, which some servers end a line at; tabs or two spaces, which lenient
			// ones read as one) is refused.
			line := strings.TrimSuffix(string(b[:i]), "\r")
			if f := strings.Split(line, " "); len(f) == 3 && strings.HasPrefix(f[2], "HTTP/") && !strings.ContainsFunc(line, isControl) {
				return lineHTTP
			}
			if strings.Contains(strings.ToUpper(line), "HTTP/") {
				return lineRefused
			}
			return lineOther
		case isControl(rune(c)) && !lineSpace(c):
			return lineOther
		}
	}
}

// isControl reports whether c is an ASCII control (C0 or DEL).
func isControl(c rune) bool { return c < 0x20 || c == 0x7f }

// lineSpace reports whether a control byte may still be inside a request line some
// server reads: tab and CR (lenient parsers), \v and \f (Apache's "HttpProtocolOptions
// Unsafe"), 0x1c-0x1f too (Python's http.server splits the line with str.split, which
// reads them all as spaces), and NUL, where a C parser's string ends. "GET\v/\vHTTP/1.1"
// relayed unread would be a request for any Host to such a server.
func lineSpace(c byte) bool {
	return c == '\t' || c == '\r' || c == '\v' || c == '\f' || c >= 0x1c && c <= 0x1f || c == 0
}

// tokenByte reports whether c may start an HTTP method (a token, RFC 9110 §5.6.2).
func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// tunnelHTTP serves a tunnel that carries plain HTTP as a forwarded request to the
// CONNECT's destination: its Host is the CONNECT authority, and it is the one exchange
// of the connection, as forward makes it.
func (p *Proxy) tunnelHTTP(c net.Conn, br *bufio.Reader, lim *limitedReader, up net.Conn, authority string, t *tally, conn *sandbox.Connection) {
	lim.n = maxHeader
	req, err := http.ReadRequest(br)
	lim.n = 1<<63 - 1
	if err != nil || req.ProtoMajor != 1 {
		conn.Verdict, conn.Rule = "refused", "http-in-tunnel"
		writeStatus(c, http.StatusBadRequest, &Refusal{"http-in-tunnel", "not an HTTP/1 request"})
		closeGently(c)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	req.URL.Scheme, req.URL.Host, req.URL.User = "http", authority, nil
	p.forward(c, req, up, t, conn)
}

// passHello reads the client's ClientHello, checks the name it gives, and forwards it.
// false: it was refused (conn says why) or could not be forwarded.
func (p *Proxy) passHello(c net.Conn, br *bufio.Reader, up net.Conn, host string, t *tally, conn *sandbox.Connection) bool {
	raw, hello, err := readClientHello(br)
	var sni string
	if err == nil {
		sni, err = helloSNI(hello)
	}
	want, _ := normalizeHost(host)
	got, _ := normalizeHost(sni)
	switch {
	case errors.Is(err, errHiddenName):
		conn.Verdict, conn.Rule = "refused", "ech"
	case err != nil:
		conn.Verdict, conn.Rule = "refused", "malformed-tls"
	case sni != "" && got != want:
		conn.Verdict, conn.Rule = "refused", "sni-mismatch"
		p.log.Debug("egress: ClientHello names another host than CONNECT", "connect", host, "sni", sni)
	default:
		_, err := (&countedWriter{t, up, &t.sent}).Write(raw)
		return err == nil
	}
	_, _ = c.Write(tlsAlert)
	return false
}

// passSecondHello forwards what a client sends after a HelloRetryRequest up to its
// second ClientHello (a change_cipher_spec, early data the server skips), then that
// hello, checked as the first was.
func (p *Proxy) passSecondHello(c net.Conn, br *bufio.Reader, up net.Conn, host string, t *tally, conn *sandbox.Connection) bool {
	_ = c.SetReadDeadline(time.Now().Add(p.headerTimeout))
	for {
		b, err := br.Peek(1)
		if err != nil {
			return false
		}
		switch b[0] {
		case recordHandshake:
			return p.passHello(c, br, up, host, t, conn)
		case recordChangeCipher, recordAppData:
			hdr, frag, err := readRecord(br)
			if err != nil {
				conn.Verdict, conn.Rule = "refused", "malformed-tls"
				_, _ = c.Write(tlsAlert)
				return false
			}
			if _, err := (&countedWriter{t, up, &t.sent}).Write(append(hdr, frag...)); err != nil {
				return false
			}
		default:
			conn.Verdict, conn.Rule = "refused", "malformed-tls"
			_, _ = c.Write(tlsAlert)
			return false
		}
	}
}

// tlsAlert is a fatal access_denied alert (TLS 1.2 record framing, as every version
// accepts before the handshake).
var tlsAlert = []byte{21, 3, 3, 0, 2, 2, 49}

// relay copies both ways until the destination is done or the cap is reached. The
// sandbox's end of writing is passed on as a half-close; the destination's end, or any
// error, ends both. ur reads up (through what was buffered of it).
func relay(t *tally, br *bufio.Reader, c, up net.Conn, ur io.Reader) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := t.copyCounted(up, br, &t.sent)
		if tc, ok := up.(*net.TCPConn); ok && err == nil {
			_ = tc.CloseWrite()
			return
		}
		up.Close()
		c.Close()
	}()
	_ = t.copyCounted(c, ur, &t.received)
	c.Close()
	up.Close()
	<-done
}

// hopHeaders are a proxy's own, never forwarded (RFC 9110 §7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends one plain-HTTP request to the destination and relays its response. One
// connection is one exchange: the response goes back marked "Connection: close", so a
// second request (perhaps for another host) never follows on the checked connection,
// whether or not the destination honours the close asked of it.
func (p *Proxy) forward(c net.Conn, req *http.Request, up net.Conn, t *tally, conn *sandbox.Connection) {
	for _, h := range strings.Split(req.Header.Get("Connection"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			req.Header.Del(h)
		}
	}
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.RequestURI = ""
	req.Host = req.URL.Host
	req.Close = true
	capped := &Refusal{"byte-cap", fmt.Sprintf("the call's %d bytes of network traffic are used up", p.cfg.MaxBytes)}
	if err := req.Write(&countedWriter{t, up, &t.sent}); err != nil {
		if errors.Is(err, errCapped) {
			writeStatus(c, http.StatusForbidden, capped)
		}
		return
	}
	// The destination's head is bounded as the program's is: Go's parser keeps a
	// header line whole in memory, and the byte cap alone (an operator may set GiBs)
	// would let one answer that never ends its head hold that much of the server.
	head := &limitedReader{r: &countedReader{t, up, &t.received}}
	ur := bufio.NewReader(head)
	for {
		head.n = maxResponseHeader
		resp, err := http.ReadResponse(ur, req)
		head.n = 1<<63 - 1
		if err != nil {
			if errors.Is(err, errCapped) {
				writeStatus(c, http.StatusForbidden, capped)
			} else {
				writeStatus(c, http.StatusBadGateway, &Refusal{"bad-response", "the destination's answer was not HTTP: " + err.Error()})
			}
			return
		}
		// 1xx answers (100 Continue) come before the real one.
		interim := resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols
		if !interim {
			resp.Close = true
		}
		err = resp.Write(c)
		resp.Body.Close()
		if err != nil || !interim {
			return
		}
	}
}

// countedReader reads through the tally (a forwarded response).
type countedReader struct {
	t   *tally
	r   io.Reader
	cnt *atomic.Int64
}

func (c *countedReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	m := c.t.take(n)
	c.cnt.Add(int64(m))
	if m < n {
		return m, errCapped
	}
	return n, err
}

// hostAddr returns the first of addrs that is assigned to one of the host's own
// interfaces. Such an address reaches every service bound to all interfaces, like
// loopback, whatever class it is in (a public address, or a lab's documentation range).
// The interfaces are read at each connection: addresses come and go. Unreadable
// interfaces refuse the connection (fail closed).
func hostAddr(addrs []netip.Addr) (netip.Addr, bool) {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return addrs[0], true
	}
	for _, a := range addrs {
		// An IPv6 spelling of an own IPv4 address (NAT64, 6to4) is this host too
		// wherever the network carries it back there, as DeniedAddr reads it.
		forms := append([]netip.Addr{a.WithZone("").Unmap()}, embedded(a.WithZone(""))...)
		for _, ia := range ifs {
			if n, ok := ia.(*net.IPNet); ok {
				if own, ok := netip.AddrFromSlice(n.IP); ok && slices.Contains(forms, own.Unmap()) {
					return a, true
				}
			}
		}
	}
	return netip.Addr{}, false
}
