package soak

import "testing"

// Only the soak's own servers' Landlock run mounts count as its leftovers: another
// server's (a test package running beside the soak) come and go on their own.
func TestOtherLandlockServer(t *testing.T) {
	servers := []int{100, 200}
	for _, c := range []struct {
		mount string
		other bool
	}{
		{"/run/airlock-runs/landlock-100-123/run-1/workspace", false},
		{"/run/airlock-runs/landlock-200-9/run-1/tmp", false},
		{"/run/airlock-runs/landlock-300-9/run-1/tmp", true},
		{"/run/airlock-runs/landlock-300-9", true},
		{"/run/airlock-runs/landlock-100.4026531836.4026531834.5123-77/run-1/tmp", false},
		{"/run/airlock-runs/landlock-300.4026531836.4026531834.5123-77/run-1/tmp", true},
		{"/tmp/soak/airlock/landlock-x-1/run", false},
		{"/run/airlock-runs/run-1", false},
		{"/mnt/airlock", false},
	} {
		if got := otherLandlockServer(c.mount, servers); got != c.other {
			t.Errorf("otherLandlockServer(%q) = %t, want %t", c.mount, got, c.other)
		}
	}
}
