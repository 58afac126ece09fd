package host

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlock-mcp/airlock/sandbox"
)

// Windows fails closed and names the way out.
func TestWindowsRefusesAndNamesWSL2(t *testing.T) {
	sb, err := New(sandbox.Options{})
	if sb != nil || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("New = %v, %v; want nil and ErrUnavailable", sb, err)
	}
	for _, want := range []string{"WSL2", "wsl.exe", "docs/windows.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %s: %v", want, err)
		}
	}
}
