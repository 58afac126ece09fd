package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// replica is one `airlock serve --http 127.0.0.1:PORT --stateless` process. Restarts
// keep its port and its audit log, as a rolling restart of a pod keeps its Service.
type replica struct {
	name  string
	port  int
	bin   string
	dir   string
	env   []string
	cmd   *exec.Cmd
	done  chan struct{} // closed when the process has been reaped; then exit is set
	exit  error
	start int // how many times it was started
}

func (r *replica) audit() string { return filepath.Join(r.dir, r.name+".audit.jsonl") }
func (r *replica) url() string   { return "http://127.0.0.1:" + strconv.Itoa(r.port) }

// launch starts the process and waits until /readyz says 200.
func (r *replica) launch(ctx context.Context) error {
	r.start++
	logf, err := os.OpenFile(filepath.Join(r.dir, fmt.Sprintf("%s.%d.log", r.name, r.start)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.bin, "serve", "--http", "127.0.0.1:"+strconv.Itoa(r.port), "--stateless")
	cmd.Env = append(append(os.Environ(), r.env...), "AIRLOCK_AUDIT="+r.audit())
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("%s: %w", r.name, err)
	}
	done := make(chan struct{})
	r.cmd, r.done = cmd, done
	go func() { r.exit = cmd.Wait(); logf.Close(); close(done) }()
	return r.waitReady(ctx, 60*time.Second)
}

func (r *replica) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	c := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-r.done:
			return fmt.Errorf("%s exited while starting (see %s): %w", r.name, r.dir, r.exit)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := c.Get(r.url() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("%s not ready after %s", r.name, limit)
}

// drain sends SIGTERM and waits for the exit, which must be 0 within limit.
func (r *replica) drain(limit time.Duration) (time.Duration, error) {
	t0 := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case <-r.done:
		if r.exit != nil {
			return time.Since(t0), fmt.Errorf("%s exited after SIGTERM, want 0: %w", r.name, r.exit)
		}
		return time.Since(t0), nil
	case <-time.After(limit):
		_ = r.cmd.Process.Kill()
		return time.Since(t0), fmt.Errorf("%s still running %s after SIGTERM", r.name, limit)
	}
}

// kill sends SIGKILL and reaps the process.
func (r *replica) kill() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// stop ends a replica at the end of the test (SIGTERM, then SIGKILL after 15 s).
func (r *replica) stop() {
	if r.cmd == nil || r.cmd.ProcessState != nil {
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		r.kill()
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// haproxy runs HAProxy in the foreground in front of the replicas on 127.0.0.1.
type haproxy struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when reaped; then exit is set
	exit error
	port int
}

// startHAProxy checks /readyz every 500 ms and takes a replica out after two failed
// checks: like a Kubernetes Service's endpoints, it keeps sending a draining replica
// calls for a second or so, which that replica must refuse retryably. HAProxy retries
// only a connection that could not be made (nothing was sent, so nothing can run
// twice), on another replica.
func startHAProxy(ctx context.Context, dir string, replicas []*replica) (*haproxy, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`global
  maxconn 512
defaults
  mode http
  timeout connect 1s
  timeout client 90s
  timeout server 90s
  retries 3
  option redispatch
  retry-on conn-failure
frontend mcp
  bind 127.0.0.1:%d
  default_backend airlock
backend airlock
  balance leastconn
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter 500ms fall 2 rise 1
`, port)
	for _, r := range replicas {
		cfg += fmt.Sprintf("  server %s 127.0.0.1:%d check\n", r.name, r.port)
	}
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		return nil, errors.New("haproxy is not installed (apt-get install haproxy)")
	}
	logf, err := os.Create(filepath.Join(dir, "haproxy.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	h := &haproxy{cmd: cmd, done: make(chan struct{}), port: port}
	go func() { h.exit = cmd.Wait(); logf.Close(); close(h.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(h.url() + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return h, nil
			}
		}
		select {
		case <-h.done:
			return nil, fmt.Errorf("haproxy exited (see %s): %w", dir, h.exit)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	h.stop()
	return nil, errors.New("haproxy did not answer /readyz")
}

func (h *haproxy) url() string { return "http://127.0.0.1:" + strconv.Itoa(h.port) }

func (h *haproxy) stop() {
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.done
	}
}
