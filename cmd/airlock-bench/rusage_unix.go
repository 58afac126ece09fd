//go:build unix

package main

import (
	"syscall"
	"time"
)

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// selfCPU is the bench's own CPU time; childrenCPU its reaped children's.
func selfCPU() time.Duration     { return rusage(syscall.RUSAGE_SELF) }
func childrenCPU() time.Duration { return rusage(syscall.RUSAGE_CHILDREN) }
