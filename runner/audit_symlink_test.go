package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditDoesNotFollowASymlink: a symlink planted at the audit path would choose the
// file a root server appends its records to.
func TestAuditDoesNotFollowASymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "audit.jsonl")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	a, err := OpenAudit(path, 1<<20)
	if err == nil {
		_ = a.Write(AuditRecord{ID: "planted"})
		a.Close()
		t.Fatal("the audit log was opened through a symlink")
	}
	if !strings.Contains(err.Error(), "symlink") {
		t.Errorf("the refusal does not say why: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
}
