// Package procmem reads a process's memory from /proc.
package procmem

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Memory is a process's resident set and its peak, in bytes.
type Memory struct{ Resident, Peak int64 }

// Read returns process pid's resident set and peak (VmRSS and VmHWM; zeros if unknown). Unlike
// getrusage's maxrss, VmHWM starts again at exec, so a child does not count the memory of the
// parent it was forked from.
func Read(pid int) Memory {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}
	}
	var m Memory
	for line := range strings.SplitSeq(string(b), "\n") {
		key, v, _ := strings.Cut(line, ":")
		var dst *int64
		switch key {
		case "VmRSS":
			dst = &m.Resident
		case "VmHWM":
			dst = &m.Peak
		default:
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		*dst = kb << 10
	}
	return m
}

// Self returns this process's memory.
func Self() Memory { return Read(os.Getpid()) }
