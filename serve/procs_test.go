package serve

import (
	"runtime"
	"testing"
)

func TestProcsFor(t *testing.T) {
	for _, c := range []struct{ cpus, want int }{
		{1, 1}, {2, 1}, {4, 1}, {5, 2}, {8, 2}, {16, 4}, {64, 16},
	} {
		if got := procsFor(c.cpus); got != c.want {
			t.Errorf("procsFor(%d) = %d, want %d", c.cpus, got, c.want)
		}
	}
}

// An operator's GOMAXPROCS is theirs: LimitProcs leaves it.
func TestLimitProcsKeepsTheEnvironment(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	t.Setenv("GOMAXPROCS", "3")
	runtime.GOMAXPROCS(3)
	if got := LimitProcs(); got != 3 || runtime.GOMAXPROCS(0) != 3 {
		t.Fatalf("LimitProcs with GOMAXPROCS=3 set %d (now %d), want 3 left alone", got, runtime.GOMAXPROCS(0))
	}
}

// A quarter of the default, however often it is called.
func TestLimitProcsSetsAQuarter(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	t.Setenv("GOMAXPROCS", "")
	runtime.SetDefaultGOMAXPROCS()
	want := procsFor(runtime.GOMAXPROCS(0))
	for i := 0; i < 2; i++ {
		if got := LimitProcs(); got != want || runtime.GOMAXPROCS(0) != want {
			t.Fatalf("LimitProcs (call %d) set %d (now %d), want %d", i+1, got, runtime.GOMAXPROCS(0), want)
		}
	}
}
