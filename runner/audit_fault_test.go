//go:build unix

package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-mcp/airlock/runner/runnertest"
	"github.com/airlock-mcp/airlock/sandbox"
)

// fakeFile records what the audit log does to its file, in order, and can fail.
type fakeFile struct {
	mu       sync.Mutex
	ops      []string
	buf      bytes.Buffer
	writeErr error
	partial  int // with writeErr: bytes written before failing
	syncErr  error
}

func (f *fakeFile) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, "write")
	if f.writeErr != nil {
		n := min(f.partial, len(b))
		f.buf.Write(b[:n])
		return n, f.writeErr
	}
	return f.buf.Write(b)
}

func (f *fakeFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, "sync")
	return f.syncErr
}

func (f *fakeFile) Close() error               { return nil }
func (f *fakeFile) Stat() (os.FileInfo, error) { return os.Stat(os.DevNull) }

func (f *fakeFile) snapshot() ([]string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ops...), f.buf.String()
}

func fakeAudit(t *testing.T, f *fakeFile) *Audit {
	t.Helper()
	a, err := openAudit(filepath.Join(t.TempDir(), "audit.jsonl"), 0, func(string) (auditFile, error) { return f, nil })
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The line is written and synced by the time Run returns, i.e. before any caller can
// send the response; and it holds every promised field but never the code, stdin or
// output.
func TestAuditSyncedBeforeRunReturns(t *testing.T) {
	f := &fakeFile{}
	var logs bytes.Buffer
	r, _ := newRunner(func(ctx context.Context, s sandbox.Spec) (sandbox.Result, error) {
		// Nothing may be written before the program has run.
		if ops, _ := f.snapshot(); len(ops) != 0 {
			t.Errorf("audit touched before the run ended: %v", ops)
		}
		return runnertest.Echo(ctx, s)
	}, &logs)
	r.Audit = fakeAudit(t, f)
	out, err := r.Run(context.Background(), Call{Language: "python", Code: []byte("print('top-secret-code')"),
		Stdin: []byte("secret-stdin"), Transport: "stdio", Client: "claude-code/2.1"})
	if err != nil || out.Result.Status != sandbox.StatusOK {
		t.Fatalf("run: %v %+v", err, out.Result)
	}
	ops, line := f.snapshot()
	if strings.Join(ops, ",") != "write,sync" {
		t.Fatalf("file operations %v, want write then sync before Run returns", ops)
	}
	if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
		t.Fatalf("want exactly one line, got %q", line)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"time", "id", "transport", "client", "language", "code_sha256", "code_bytes", "status",
		"exit_code", "wall_ms", "cpu_ms", "peak_memory_bytes", "duration_ms", "limits"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("audit line lacks %q: %s", k, line)
		}
	}
	if rec["id"] != out.ID || rec["cpu_ms"] != float64(5) || rec["peak_memory_bytes"] != float64(1<<20) || rec["client"] != "claude-code/2.1" {
		t.Errorf("wrong values: %s", line)
	}
	for _, secret := range []string{"top-secret-code", "secret-stdin", "print("} {
		if strings.Contains(line, secret) {
			t.Errorf("audit line leaks %q: %s", secret, line)
		}
	}
}

// Policy for a log that cannot be written (disk full, I/O error): the call fails with a
// sandbox_error result that withholds the program's output, because an execution the
// log does not show must not be reported as a success. The server keeps serving, and
// the first line after the disk recovers starts on a fresh line.
func TestAuditFailureWithholdsResult(t *testing.T) {
	for _, tc := range []struct {
		name string
		file *fakeFile
	}{
		{"disk full mid-line", &fakeFile{writeErr: syscall.ENOSPC, partial: 17}},
		{"disk full", &fakeFile{writeErr: syscall.ENOSPC}},
		{"sync fails", &fakeFile{syncErr: syscall.EIO}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			r, _ := newRunner(runnertest.Echo, &logs)
			r.Audit = fakeAudit(t, tc.file)
			out, err := r.Run(context.Background(), Call{Language: "python", Code: []byte("print('visible-output')")})
			if err != nil {
				t.Fatalf("want a result, got error %v", err)
			}
			res := out.Result
			if res.Status != sandbox.StatusSandboxError || !strings.Contains(res.Detail, "audit") {
				t.Fatalf("status %s detail %q, want sandbox_error naming the audit log", res.Status, res.Detail)
			}
			if bytes.Contains(res.Stdout.Head, []byte("visible-output")) || res.Stdout.Total != 0 {
				t.Errorf("output of an unaudited run was returned: %q", res.Stdout.Head)
			}
			if !strings.Contains(logs.String(), "audit line not written") {
				t.Errorf("no loud log line: %s", logs.String())
			}
			// The disk recovers: the next call succeeds and its line stands alone.
			tc.file.mu.Lock()
			tc.file.writeErr, tc.file.syncErr = nil, nil
			tc.file.mu.Unlock()
			out, err = r.Run(context.Background(), Call{Language: "python", Code: []byte("print(2)")})
			if err != nil || out.Result.Status != sandbox.StatusOK {
				t.Fatalf("after recovery: %v %+v", err, out.Result)
			}
			_, all := tc.file.snapshot()
			lines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
			var rec struct{ ID string }
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil || rec.ID != out.ID {
				t.Errorf("line after recovery is not a whole record (%v): %q", err, all)
			}
		})
	}
}

func TestAuditOpenIsAppendOnlyAndPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "airlock", "audit.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{\"id\":\"earlier\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := OpenAudit(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	fl, err := unix.FcntlInt(a.f.(*os.File).Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fl&unix.O_APPEND == 0 || fl&unix.O_ACCMODE != unix.O_WRONLY {
		t.Errorf("flags %#o, want O_WRONLY|O_APPEND", fl)
	}
	if err := a.Write(AuditRecord{ID: "later"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), "{\"id\":\"earlier\"}\n") || !strings.Contains(string(b), `"id":"later"`) {
		t.Errorf("existing lines not kept: %s", b)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
}

func TestAuditDefaultPath(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_STATE_HOME": "/var/state", "HOME": "/home/u"}, "/var/state/airlock/audit.jsonl"},
		{map[string]string{"XDG_STATE_HOME": "rel/state", "HOME": "/home/u"}, "/home/u/.local/state/airlock/audit.jsonl"},
		{map[string]string{"HOME": "/home/u"}, "/home/u/.local/state/airlock/audit.jsonl"},
		{map[string]string{}, ""},
	} {
		got, err := DefaultAuditPath(env(tc.env))
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("%v: %q %v, want %q", tc.env, got, err, tc.want)
		}
	}
}

// An audit log that cannot be opened is a startup error (root bypasses permission bits,
// so the paths are ones no one can create).
func TestAuditUnwritableAtStartup(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/proc/airlock-audit/audit.jsonl", filepath.Join(file, "audit.jsonl"), dir} {
		if a, err := OpenAudit(p, 0); err == nil || !errors.Is(err, ErrAudit) {
			t.Errorf("OpenAudit(%q) = %v, %v; want an ErrAudit error", p, a, err)
		}
	}
}

// TestAuditDefaultFallback: with no audit.path, an unwritable default (a read-only root,
// a home that does not exist, as containers run) falls back to a private directory in
// TMPDIR, and, where that cannot be had either, to the log stream; each says so once.
func TestAuditDefaultFallback(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(home string) func(string) string {
		return func(k string) string {
			if k == "HOME" {
				return home
			}
			return ""
		}
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	a, err := OpenDefaultAudit(env(blocker), 1<<20, log)
	if err != nil {
		t.Fatalf("OpenDefaultAudit: %v", err)
	}
	want := filepath.Join(tmp, fmt.Sprintf("airlock-%d", os.Geteuid()), "audit.jsonl")
	if a.Path() != want || !strings.Contains(logs.String(), want) {
		t.Fatalf("path %q, log %q; want %s", a.Path(), logs.String(), want)
	}
	if err := a.Write(AuditRecord{ID: "fallback-file"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(want); !bytes.Contains(b, []byte("fallback-file")) {
		t.Fatalf("fallback file holds %q", b)
	}
	a.Close()

	// A fallback directory someone else could enter is not used.
	os.Chmod(filepath.Dir(want), 0o755)
	logs.Reset()
	a, err = OpenDefaultAudit(env(blocker), 1<<20, log)
	if err != nil {
		t.Fatalf("OpenDefaultAudit: %v", err)
	}
	if a.Path() != "" || !strings.Contains(logs.String(), "log stream") {
		t.Fatalf("a shared fallback dir was used: path %q, log %q", a.Path(), logs.String())
	}
	if err := a.Write(AuditRecord{ID: "to-the-log"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "to-the-log") {
		t.Fatalf("the record is not in the log stream: %q", logs.String())
	}

	// The default itself, when writable, is used without a word.
	logs.Reset()
	home := t.TempDir()
	a, err = OpenDefaultAudit(env(home), 1<<20, log)
	if err != nil || a.Path() != filepath.Join(home, ".local", "state", "airlock", "audit.jsonl") || logs.Len() != 0 {
		t.Fatalf("default: %v %q %q", err, a.Path(), logs.String())
	}
	a.Close()
}

// slowSyncFile is a log file whose fsync takes a while and makes durable exactly what
// was written when it began.
type slowSyncFile struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	durable int // bytes on "disk"
	// lostFrom, lost: the bytes a failed fsync dropped (past what was durable); no later
	// fsync brings them back.
	lostFrom, lost int
	syncs          int
	failAt         int // the failAt-th sync fails (0: none)
}

func (f *slowSyncFile) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.Write(b)
}

func (f *slowSyncFile) Sync() error {
	f.mu.Lock()
	upTo := f.buf.Len()
	f.syncs++
	fail := f.syncs == f.failAt
	f.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	if fail {
		f.mu.Lock()
		f.lostFrom, f.lost = f.durable, upTo
		f.mu.Unlock()
		return syscall.EIO
	}
	f.mu.Lock()
	f.durable = max(f.durable, upTo)
	f.mu.Unlock()
	return nil
}

func (f *slowSyncFile) Close() error               { return nil }
func (f *slowSyncFile) Stat() (os.FileInfo, error) { return os.Stat(os.DevNull) }

// end is the offset just past the line holding id, or -1.
func (f *slowSyncFile) end(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.buf.Bytes()
	i := bytes.Index(b, []byte(`"id":"`+id+`"`))
	if i < 0 {
		return -1
	}
	return i + bytes.IndexByte(b[i:], '\n') + 1
}

// Calls that end together share fsyncs, and still each line is on disk before its
// Write returns: an fsync covers only what was written when it began.
func TestAuditGroupCommit(t *testing.T) {
	f := &slowSyncFile{}
	a, err := openAudit(filepath.Join(t.TempDir(), "audit.jsonl"), 0, func(string) (auditFile, error) { return f, nil })
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan string, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				if err := a.Write(AuditRecord{ID: id}); err != nil {
					errs <- id + ": " + err.Error()
					continue
				}
				f.mu.Lock()
				durable := f.durable
				f.mu.Unlock()
				if end := f.end(id); end < 0 || end > durable {
					errs <- fmt.Sprintf("%s: Write returned with its line (ending at %d) not synced (durable %d)", id, end, durable)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	t.Logf("%d lines, %d fsyncs", writers*each, f.syncs)
	if f.syncs >= writers*each*3/4 {
		t.Errorf("%d fsyncs for %d lines written 8 at a time: not grouped", f.syncs, writers*each)
	}
}

// A failed fsync fails every Write whose line it was to cover, not just the one that
// ran it: a second fsync on the same file would not report the lost writeback again.
func TestAuditGroupCommitFailure(t *testing.T) {
	f := &slowSyncFile{failAt: 2}
	a, err := openAudit(filepath.Join(t.TempDir(), "audit.jsonl"), 0, func(string) (auditFile, error) { return f, nil })
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var failed, ok []string
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("w%d", w)
			err := a.Write(AuditRecord{ID: id})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if !errors.Is(err, ErrAudit) || !errors.Is(err, syscall.EIO) {
					t.Errorf("%s: %v, want an audit error wrapping EIO", id, err)
				}
				failed = append(failed, id)
			} else {
				ok = append(ok, id)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d fsyncs; failed %v, ok %v", f.syncs, failed, ok)
	if len(failed) == 0 {
		t.Fatal("the failed fsync failed no Write")
	}
	f.mu.Lock()
	durable, lostFrom, lost := f.durable, f.lostFrom, f.lost
	f.mu.Unlock()
	for _, id := range ok {
		if end := f.end(id); end > durable || (end > lostFrom && end <= lost) {
			t.Errorf("%s succeeded with its line (ending at %d) not synced (durable %d) or lost (up to %d)", id, end, durable, lost)
		}
	}
	if err := a.Write(AuditRecord{ID: "after"}); err != nil {
		t.Errorf("a line written after the failure: %v", err)
	}
}
