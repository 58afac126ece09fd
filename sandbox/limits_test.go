package sandbox

import (
	"errors"
	"strings"
	"testing"
)

// A zero limit is an invalid spec, never "unlimited" and never a backend's guess.
func TestLimitsValidate(t *testing.T) {
	if err := SelfTestLimits().Validate(); err != nil {
		t.Fatalf("self-test limits: %v", err)
	}
	l := SelfTestLimits()
	l.Pids, l.Output = 0, -1
	err := l.Validate()
	if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), "pids, output") {
		t.Fatalf("zero pids and negative output: %v, want ErrInvalidSpec naming both", err)
	}
	if err := (Limits{}).Validate(); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("zero Limits: %v, want ErrInvalidSpec", err)
	}
	l = SelfTestLimits()
	l.AddressSpace = 0 // means Memory
	if err := l.Validate(); err != nil {
		t.Fatalf("zero address space: %v", err)
	}
}
