package linux

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The network namespaces of finished sandboxes, dropped together.
//
// A network namespace whose last reference goes is queued for the kernel's cleanup_net
// work, which takes every namespace queued by the time it runs as one batch. Much of
// that work is per batch, not per namespace: tcp_sk_exit_batch walks the host's whole
// TCP established hash once (262144 buckets here), and the device teardown and the
// batch's end wait for RCU grace periods (synchronize_net, expedited under RTNL, and
// synchronize_rcu). Namespaces that die one at a time pay all of it each: a loop
// holding 240 namespaces by a descriptor each, 30 a second, took 586 and 821 µs of
// kernel threads' CPU per namespace closing each at once, 394 and 344 µs closing them
// eight at a time (perf record -a, 2 CPUs, load 8; tcp_sk_exit_batch 117–225 → 46 µs,
// the expedited-RCU kthreads 46–96 → 29–31 µs, rcu_preempt 42–54 → 25 µs). Airlock's
// cold calls at 8 in flight died about 1.8 to a batch, bwrap's 3.4 (its calls came
// faster).
//
// So the init passes its namespace to the server (REP_NETNS), and the launch hands it
// here once every process of the sandbox is dead (finish). By then the namespace has no
// process, no socket and no interface but its own loopback: holding it keeps memory
// (about a namespace's sysctl tables and loopback device, and the user namespace that
// owns it), nothing any sandbox can reach. The descriptor is close-on-exec
// (MSG_CMSG_CLOEXEC) and only this file closes it.
type deadNets struct {
	mu    sync.Mutex
	fds   []int
	timer *time.Timer
	after time.Duration // netnsHold when zero (tests set it)
}

// netnsBatch is how many dead namespaces are dropped together; netnsHold is the longest
// the first of them is held, so a server that runs calls slowly drops them anyway (at a
// call every netnsHold or slower, one at a time, as before).
const (
	netnsBatch = 8
	netnsHold  = 250 * time.Millisecond
)

// hold keeps fd, a dead sandbox's network namespace, and drops the batch once it is
// full. A negative fd is none.
func (d *deadNets) hold(fd int) {
	if fd < 0 {
		return
	}
	d.mu.Lock()
	d.fds = append(d.fds, fd)
	var drop []int
	if len(d.fds) >= netnsBatch {
		drop = d.take()
	} else if d.timer == nil {
		after := d.after
		if after == 0 {
			after = netnsHold
		}
		d.timer = time.AfterFunc(after, d.flush)
	}
	d.mu.Unlock()
	closeFDs(drop...) // back to back: the batch reaches the cleanup work's queue whole
}

// flush drops every namespace held (the timer, Wait, Close).
func (d *deadNets) flush() {
	d.mu.Lock()
	drop := d.take()
	d.mu.Unlock()
	closeFDs(drop...)
}

// take empties the batch and stops its timer. Called with d.mu held.
func (d *deadNets) take() []int {
	drop := d.fds
	d.fds = nil
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	return drop
}

// held counts the namespaces held (tests).
func (d *deadNets) held() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.fds)
}

// takeNetns keeps a REP_NETNS's descriptor for finish. Called with l.mu held.
func (l *launch) takeNetns(r *reportConn) {
	fd, ok := r.takeFD()
	if !ok {
		l.sb.log.Warn("a sandbox init reported its network namespace without passing it", "id", l.spec.ID)
		return
	}
	if l.netns >= 0 {
		unix.Close(fd) // a second one: the init passes exactly one
		return
	}
	l.netns = fd
}

// dropNetns hands the sandbox's network namespace to the server's batch. Called once
// every process of the sandbox is dead (finish).
func (l *launch) dropNetns() {
	l.mu.Lock()
	fd := l.netns
	l.netns = -1
	l.mu.Unlock()
	l.sb.deadNets.hold(fd)
}
