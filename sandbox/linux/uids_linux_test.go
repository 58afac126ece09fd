package linux

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseUIDRange(t *testing.T) {
	for _, c := range []struct {
		in          string
		first, size uint32
		err         string
	}{
		{in: DefaultUIDRange, first: 1879048192, size: 65536},
		{in: "200000-200015", first: 200000, size: 16},
		{in: "200000-200014", err: "at least 16"},
		{in: "0-100", err: "0 < FIRST"},
		{in: "300-200", err: "0 < FIRST"},
		{in: "100-4294967295", err: "invalid id"},
		{in: "100", err: "FIRST-LAST"},
		{in: "a-b", err: "FIRST-LAST"},
	} {
		first, size, err := ParseUIDRange(c.in)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one saying %q", c.in, err, c.err)
		case c.err == "" && (err != nil || first != c.first || size != c.size):
			t.Errorf("%q: %d+%d %v, want %d+%d", c.in, first, size, err, c.first, c.size)
		}
	}
}

// A block that any account, group or subordinate range of the host uses is refused.
func TestRangeUnused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	files := idFiles{
		passwd: write("passwd", "root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\nbox:x:500010:100::/:/bin/false\n"),
		group:  write("group", "root:x:0:\nbig:x:600005:\n"),
		subuid: write("subuid", "alice:700000:65536\n"),
		subgid: filepath.Join(dir, "absent"),
	}
	for _, c := range []struct {
		first, size uint32
		err         string
	}{
		{first: 400000, size: 100},
		{first: 500000, size: 100, err: "user box has id 500010"},
		{first: 600000, size: 100, err: "group big has id 600005"},
		{first: 765000, size: 1000, err: "gives alice ids 700000-765535"},
		{first: 765536, size: 1000},
	} {
		err := rangeUnused(files, c.first, c.size)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%d+%d: error %v, want one saying %q", c.first, c.size, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%d+%d: %v", c.first, c.size, err)
		}
	}
}

// Ids are handed out unused ones first, then the longest-rested; a quarantined id never
// comes back; an id another server holds is skipped.
func TestHostIDsLeases(t *testing.T) {
	dir := t.TempDir()
	lockA, err := openLock(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer lockA.Close()
	lockB, err := os.OpenFile(lockA.Name(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lockB.Close()
	a := &hostIDs{scheme: schemeRange, uid: 5000, gid: 5000, size: 3, lock: lockA}
	b := &hostIDs{scheme: schemeRange, uid: 5000, gid: 5000, size: 3, lock: lockB}
	take := func(h *hostIDs) lease {
		t.Helper()
		l, err := h.acquire()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l0 := take(a)
	if l0.uid != 5000 {
		t.Fatalf("first lease %d, want 5000", l0.uid)
	}
	if got := take(b); got.uid != 5001 {
		t.Fatalf("the other server got %d, want 5001 (5000 is held)", got.uid)
	}
	l2 := take(a)
	if l2.uid != 5002 {
		t.Fatalf("third lease %d, want 5002 (5001 is the other server's)", l2.uid)
	}
	if _, err := a.acquire(); !errors.Is(err, errNoIDs) {
		t.Fatalf("exhausted block: %v, want errNoIDs", err)
	}
	a.release(l2, true)
	a.release(l0, false) // quarantined
	if got := take(a); got.uid != 5002 {
		t.Fatalf("after release: %d, want 5002", got.uid)
	}
	if _, err := a.acquire(); !errors.Is(err, errNoIDs) {
		t.Fatalf("the quarantined id came back: %v", err)
	}
}

// A block the server's own user namespace does not map (a container's) is refused.
func TestRangeMapped(t *testing.T) {
	dir := t.TempDir()
	files := idFiles{uidMap: filepath.Join(dir, "uid_map"), gidMap: filepath.Join(dir, "gid_map")}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(files.uidMap, "         0     100000      65536\n")
	write(files.gidMap, "         0          0 4294967295\n")
	if err := rangeMapped(files, 1879048192, 65536); err == nil || !strings.Contains(err.Error(), "does not map") {
		t.Errorf("a block outside a container's 65536 ids: %v", err)
	}
	if err := rangeMapped(files, 1000, 60000); err != nil {
		t.Errorf("a block inside it: %v", err)
	}
	write(files.uidMap, "         0          0 4294967295\n")
	if err := rangeMapped(files, 1879048192, 65536); err != nil {
		t.Errorf("the initial namespace maps everything: %v", err)
	}
}

// TestSingleIDNamespaceRefusal: a namespace that maps one uid is refused with its cause
// and the subordinate-id fix; one that maps a range is left to rangeMapped's message.
func TestSingleIDNamespaceRefusal(t *testing.T) {
	dir := t.TempDir()
	files := idFiles{uidMap: filepath.Join(dir, "uid_map"), setgroups: filepath.Join(dir, "setgroups")}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(files.uidMap, "         0      65534          1\n")
	write(files.setgroups, "deny\n")
	got := singleIDNamespace(files)
	for _, w := range []string{"single uid", "0 65534 1", "setgroups is denied", "/etc/subuid", "newuidmap"} {
		if !strings.Contains(got, w) {
			t.Errorf("the refusal lacks %q: %s", w, got)
		}
	}
	write(files.setgroups, "allow\n")
	if got := singleIDNamespace(files); strings.Contains(got, "setgroups") || !strings.Contains(got, "/etc/subuid") {
		t.Errorf("setgroups allowed: %s", got)
	}
	write(files.uidMap, "         0     100000      65536\n")
	if got := singleIDNamespace(files); got != "" {
		t.Errorf("a namespace of 65536 ids: %q", got)
	}
}
