//go:build unix

package stamp

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type value struct {
	Rules int `json:"rules"`
}

func testStore(t *testing.T) (*Store, *time.Time) {
	t.Helper()
	st, err := Open(filepath.Join(t.TempDir(), "state"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	st.now = func() time.Time { return now }
	return st, &now
}

func testKey(t *testing.T, bin string) *Key {
	t.Helper()
	k := &Key{}
	k.AddFile("exe", bin)
	k.Add("kernel", "6.18")
	k.Add("options", `{"cgroups":"auto"}`)
	return k
}

func fakeBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "airlock")
	if err := os.WriteFile(p, []byte("binary one"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// stampFile is the one stamp in the store's directory.
func stampFile(t *testing.T, st *Store) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(st.dir, "check-*.json"))
	if len(m) != 1 {
		t.Fatalf("want one stamp, have %v", m)
	}
	return m[0]
}

func mustMiss(t *testing.T, st *Store, k *Key, why string) {
	t.Helper()
	var v value
	err := st.Load("check", k, &v)
	if err == nil {
		t.Fatalf("%s: the stamp was trusted (value %+v)", why, v)
	}
	if !errors.Is(err, ErrMiss) {
		t.Fatalf("%s: %v does not wrap ErrMiss", why, err)
	}
}

func TestStampRoundTrip(t *testing.T) {
	st, _ := testStore(t)
	bin := fakeBinary(t)
	if err := st.Save("check", testKey(t, bin), value{Rules: 7}); err != nil {
		t.Fatal(err)
	}
	var v value
	if err := st.Load("check", testKey(t, bin), &v); err != nil || v.Rules != 7 {
		t.Fatalf("Load = %+v, %v; want rules 7", v, err)
	}
	if fi, _ := os.Stat(stampFile(t, st)); fi.Mode().Perm() != 0o600 {
		t.Errorf("stamp mode %v, want 0600", fi.Mode().Perm())
	}
}

// Each input of the key, changed alone, makes the stamp a miss.
func TestStampEachInputInvalidates(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, bin string) *Key
	}{
		{"binary rewritten, same size", func(t *testing.T, bin string) *Key {
			fi, _ := os.Stat(bin)
			if err := os.WriteFile(bin, []byte("binary two"), 0o755); err != nil {
				t.Fatal(err)
			}
			// Even with its mtime put back, the change time and content moved.
			_ = os.Chtimes(bin, fi.ModTime(), fi.ModTime())
			return testKey(t, bin)
		}},
		{"binary replaced", func(t *testing.T, bin string) *Key {
			tmp := bin + ".new"
			if err := os.WriteFile(tmp, []byte("binary one"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, bin); err != nil {
				t.Fatal(err)
			}
			return testKey(t, bin)
		}},
		{"binary gone", func(t *testing.T, bin string) *Key {
			_ = os.Remove(bin)
			return testKey(t, bin)
		}},
		{"kernel", func(t *testing.T, bin string) *Key {
			k := &Key{}
			k.AddFile("exe", bin)
			k.Add("kernel", "6.19")
			k.Add("options", `{"cgroups":"auto"}`)
			return k
		}},
		{"setting", func(t *testing.T, bin string) *Key {
			k := &Key{}
			k.AddFile("exe", bin)
			k.Add("kernel", "6.18")
			k.Add("options", `{"cgroups":"off"}`)
			return k
		}},
		{"an input more", func(t *testing.T, bin string) *Key {
			k := testKey(t, bin)
			k.Add("sysctl", "1")
			return k
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, _ := testStore(t)
			bin := fakeBinary(t)
			if err := st.Save("check", testKey(t, bin), value{Rules: 7}); err != nil {
				t.Fatal(err)
			}
			mustMiss(t, st, c.change(t, bin), c.name)
		})
	}
}

func TestStampAge(t *testing.T) {
	st, now := testStore(t)
	bin := fakeBinary(t)
	if err := st.Save("check", testKey(t, bin), value{Rules: 7}); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(59 * time.Second)
	var v value
	if err := st.Load("check", testKey(t, bin), &v); err != nil {
		t.Fatalf("a stamp within its age: %v", err)
	}
	*now = now.Add(2 * time.Second)
	mustMiss(t, st, testKey(t, bin), "older than the maximum age")
	*now = now.Add(-10 * time.Minute)
	mustMiss(t, st, testKey(t, bin), "passed in the future")
}

func TestStampCorruptOrForeignIsAMiss(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, p string)
	}{
		{"truncated", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, b[:len(b)/2], 0o600)
		}},
		{"garbage", func(t *testing.T, p string) { _ = os.WriteFile(p, []byte("\x00\xff{"), 0o600) }},
		{"unknown field", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, []byte(strings.Replace(string(b), `{"format"`, `{"extra":1,"format"`, 1)), 0o600)
		}},
		{"other key inside", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, []byte(strings.Replace(string(b), `"key":"`, `"key":"0`, 1)), 0o600)
		}},
		{"no value", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, []byte(strings.Replace(string(b), `,"value":{"rules":7}`, ``, 1)), 0o600)
		}},
		{"no time", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			i, j := strings.Index(string(b), `,"passed":`), strings.Index(string(b), `,"value":`)
			_ = os.WriteFile(p, append(b[:i:i], b[j:]...), 0o600)
		}},
		{"a field twice", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, []byte(strings.Replace(string(b), `,"value":`, `,"kind":"check","value":`, 1)), 0o600)
		}},
		{"unknown field in the value", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, []byte(strings.Replace(string(b), `"rules":7`, `"rules":7,"extra":1`, 1)), 0o600)
		}},
		{"a trailing field after the value", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, []byte(strings.Replace(string(b), `"rules":7}`, `"rules":7},"extra":1`, 1)), 0o600)
		}},
		{"corrupt value", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, []byte(strings.Replace(string(b), `"rules":7`, `"rules":"7"`, 1)), 0o600)
		}},
		{"writable by others", func(t *testing.T, p string) { _ = os.Chmod(p, 0o622) }},
		{"writable by the group", func(t *testing.T, p string) { _ = os.Chmod(p, 0o620) }},
		{"a symlink to a good stamp", func(t *testing.T, p string) {
			good := p + ".good"
			_ = os.Rename(p, good)
			_ = os.Symlink(good, p)
		}},
		{"another user's", func(t *testing.T, p string) {
			if os.Geteuid() != 0 {
				t.Skip("only root can give a file away (chown); the owner check is the same code")
			}
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, _ := testStore(t)
			bin := fakeBinary(t)
			if err := st.Save("check", testKey(t, bin), value{Rules: 7}); err != nil {
				t.Fatal(err)
			}
			c.tamper(t, stampFile(t, st))
			mustMiss(t, st, testKey(t, bin), c.name)
		})
	}
}

// A directory someone else could write is refused outright: no stamp from it is used.
func TestStampDirMustBePrivate(t *testing.T) {
	d := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(d, time.Minute); err == nil {
		t.Fatal("a 0755 directory was accepted")
	}
	link := filepath.Join(t.TempDir(), "link")
	private := filepath.Join(t.TempDir(), "private")
	_ = os.Mkdir(private, 0o700)
	_ = os.Symlink(private, link)
	if _, err := Open(link, time.Minute); err == nil {
		t.Fatal("a symlinked directory was accepted")
	}
	if os.Geteuid() == 0 {
		foreign := filepath.Join(t.TempDir(), "foreign")
		_ = os.Mkdir(foreign, 0o700)
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(foreign, time.Minute); err == nil {
			t.Fatal("another user's directory was accepted")
		}
	}
}

func TestStampRecheckIgnoresButRecords(t *testing.T) {
	st, _ := testStore(t)
	bin := fakeBinary(t)
	if err := st.Save("check", testKey(t, bin), value{Rules: 7}); err != nil {
		t.Fatal(err)
	}
	re := st.Recheck()
	mustMiss(t, re, testKey(t, bin), "recheck")
	if err := re.Save("check", testKey(t, bin), value{Rules: 8}); err != nil {
		t.Fatal(err)
	}
	var v value
	if err := st.Load("check", testKey(t, bin), &v); err != nil || v.Rules != 8 {
		t.Fatalf("after a recheck Load = %+v, %v; want rules 8", v, err)
	}
}

func TestStampPrunesStaleOnes(t *testing.T) {
	st, now := testStore(t)
	bin := fakeBinary(t)
	old := &Key{}
	old.Add("binary", "an older build")
	if err := st.Save("check", old, value{Rules: 1}); err != nil {
		t.Fatal(err)
	}
	stale := stampFile(t, st)
	past := now.Add(-2 * time.Minute)
	_ = os.Chtimes(stale, past, past)
	if err := st.Save("check", testKey(t, bin), value{Rules: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale stamp %s is still there (%v)", stale, err)
	}
	stampFile(t, st)
}

func TestStampUnreadableInputNeverStamps(t *testing.T) {
	st, _ := testStore(t)
	k := &Key{}
	k.AddFile("exe", filepath.Join(t.TempDir(), "missing"))
	if err := st.Save("check", k, value{Rules: 7}); err == nil {
		t.Fatal("a key with an unreadable input was stamped")
	}
	mustMiss(t, st, k, "unreadable input")
}

// attached is a value with an attachment (a self-check's programs, in sandbox/linux).
type attached struct {
	Rules int    `json:"rules"`
	Blob  []byte `json:"-"`
}

func (a attached) Attachment() []byte { return a.Blob }

func (a *attached) Attach(b []byte) error {
	if len(b) == 0 {
		return errors.New("no attachment")
	}
	a.Blob = b
	return nil
}

// An attachment comes back byte for byte, newlines and all, and stays out of the JSON;
// one whose length is not the record's, one a value does not take, or one the value
// refuses makes the stamp a miss.
func TestStampAttachment(t *testing.T) {
	blob := []byte("\n{\"rules\":8}\n\x00\xff prog")
	save := func(t *testing.T) (*Store, *Key, string) {
		st, _ := testStore(t)
		k := testKey(t, fakeBinary(t))
		if err := st.Save("check", k, &attached{Rules: 7, Blob: blob}); err != nil {
			t.Fatal(err)
		}
		return st, k, stampFile(t, st)
	}
	st, k, p := save(t)
	var v attached
	if err := st.Load("check", k, &v); err != nil || v.Rules != 7 || !bytes.Equal(v.Blob, blob) {
		t.Fatalf("Load = %d %q, %v; want 7 %q", v.Rules, v.Blob, err, blob)
	}
	if b, _ := os.ReadFile(p); !bytes.HasSuffix(b, append([]byte("}\n"), blob...)) || bytes.Count(b, blob) != 1 {
		t.Fatalf("the attachment is not the file's tail, once: %q", b)
	}
	for _, c := range []struct {
		name   string
		tamper func(b []byte) []byte
	}{
		{"longer", func(b []byte) []byte { return append(b, 'x') }},
		{"shorter", func(b []byte) []byte { return b[:len(b)-1] }},
		{"no line end", func(b []byte) []byte { return b[:bytes.IndexByte(b, '\n')] }},
		{"length said larger", func(b []byte) []byte {
			return bytes.Replace(b, fmt.Appendf(nil, `"attached":%d`, len(blob)), fmt.Appendf(nil, `"attached":%d`, len(blob)+1), 1)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, k, p := save(t)
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, c.tamper(b), 0o600); err != nil {
				t.Fatal(err)
			}
			var v attached
			if err := st.Load("check", k, &v); !errors.Is(err, ErrMiss) {
				t.Fatalf("a tampered attachment (%s) was trusted: %v", c.name, err)
			}
		})
	}
	t.Run("a value that takes none", func(t *testing.T) {
		st, k, _ := save(t)
		mustMiss(t, st, k, "an attachment for a plain value")
	})
	t.Run("refused by the value", func(t *testing.T) {
		st, _ := testStore(t)
		k := testKey(t, fakeBinary(t))
		if err := st.Save("check", k, &attached{Rules: 7}); err != nil {
			t.Fatal(err)
		}
		var v attached
		if err := st.Load("check", k, &v); !errors.Is(err, ErrMiss) {
			t.Fatalf("an attachment the value refuses was trusted: %v", err)
		}
	})
}
