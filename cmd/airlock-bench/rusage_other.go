//go:build !unix

package main

import "time"

// The bench measures airlock's Linux sandbox; elsewhere it only has to build.
func selfCPU() time.Duration     { return 0 }
func childrenCPU() time.Duration { return 0 }
