package serve

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// HTTPOptions configure the HTTP transports.
type HTTPOptions struct {
	AuthToken      string
	AllowedOrigins []string
	MaxBodyBytes   int64
	// SSE selects the legacy HTTP+SSE transport (/sse and /message) instead of
	// Streamable HTTP (/mcp).
	SSE bool
	Log *slog.Logger
}

// CheckBind refuses to expose the server beyond loopback without authentication:
// anyone who can reach it could run code.
func CheckBind(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("http address %q: %w", addr, err)
	}
	if isLoopback(host) || token != "" {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without an auth token: set http.auth_token (or AIRLOCK_AUTH_TOKEN), or bind 127.0.0.1", addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Handler returns the transport wrapped in the Origin, size and token checks. base is
// the server's own URL (the SSE transport tells clients where to post).
func Handler(s *server.MCPServer, base string, opt HTTPOptions) http.Handler {
	var h http.Handler
	var sse *server.SSEServer
	if opt.SSE {
		sse = server.NewSSEServer(s, server.WithBaseURL(base))
		h = sse
	} else {
		h = eraCompat(server.NewStreamableHTTPServer(s, server.WithEndpointPath("/mcp")))
	}
	return guard(h, opt, sse)
}

// ServeHTTP serves h on ln until ctx ends, then cancels in-flight calls (their request
// contexts derive from ctx) and shuts down within a bounded time.
func ServeHTTP(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Streams (SSE, long polls) never go idle on their own; close them.
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// guard enforces, in order: a browser Origin we trust (403), the bearer token (401) and
// the body size (413). mcp-go checks Host but not Origin, which leaves DNS rebinding
// and cross-site requests from a browser open.
// sse, when set, is where an oversized request's error is delivered (see tooLarge).
func guard(next http.Handler, opt HTTPOptions, sse *server.SSEServer) http.Handler {
	log := opt.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "http")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !originAllowed(o, r.Host, opt.AllowedOrigins) {
			log.Warn("origin refused", "origin", o, "remote", r.RemoteAddr)
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		if opt.AuthToken != "" && !tokenOK(r.Header.Get("Authorization"), opt.AuthToken) {
			log.Warn("unauthorized", "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
			http.Error(w, "missing or invalid bearer token", http.StatusUnauthorized)
			return
		}
		if opt.MaxBodyBytes > 0 && r.Body != nil && r.Method == http.MethodPost {
			if r.ContentLength > opt.MaxBodyBytes {
				tooLarge(w, r, opt.MaxBodyBytes, sse, nil)
				return
			}
			// Read here so a chunked body without Content-Length gets a 413 too, not
			// whatever the transport makes of a short read.
			body, err := io.ReadAll(io.LimitReader(r.Body, opt.MaxBodyBytes+1))
			if err != nil {
				http.Error(w, "reading request body failed", http.StatusBadRequest)
				return
			}
			if int64(len(body)) > opt.MaxBodyBytes {
				tooLarge(w, r, opt.MaxBodyBytes, sse, body)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// tokenOK matches the auth scheme case-insensitively, as RFC 7235 §2.1 says schemes are:
// clients send "bearer" as well as "Bearer".
func tokenOK(header, token string) bool {
	scheme, got, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimLeft(got, " ")), []byte(token)) == 1
}

// originAllowed accepts the configured origins and loopback pages served from the same
// port as the server itself (which is what a local client's own UI looks like).
func originAllowed(origin, host string, allowed []string) bool {
	o := strings.TrimSuffix(origin, "/")
	for _, a := range allowed {
		if strings.EqualFold(o, strings.TrimSuffix(a, "/")) {
			return true
		}
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	reqHost, reqPort, err := net.SplitHostPort(host)
	if err != nil {
		return false
	}
	return isLoopback(u.Hostname()) && isLoopback(reqHost) && u.Port() == reqPort
}
