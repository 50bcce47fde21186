package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// statusKB reads a "Name:   123 kB" field of /proc/PID/status.
func statusKB(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return n, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// rssMiB is VmRSS in MiB.
func rssMiB(pid int) (float64, error) {
	kb, err := statusKB(pid, "VmRSS")
	return kb / 1024, err
}

// statFields returns the fields of /proc/PID/stat after the command name.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: unreadable", pid)
	}
	// fields[0] is the state (field 3 in proc(5)).
	return strings.Fields(s[i+1:]), nil
}

// cpuTicks returns utime+stime and cutime+cstime (clock ticks).
func cpuTicks(pid int) (own, children int64, err error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, 0, err
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(f[i-3], 10, 64); return v }
	return n(14) + n(15), n(16) + n(17), nil
}

// ppid is the parent of pid.
func ppid(pid int) int {
	f, err := statFields(pid)
	if err != nil || len(f) < 2 {
		return -1
	}
	v, _ := strconv.Atoi(f[1])
	return v
}

// ctxSwitches sums voluntary and nonvoluntary context switches over every
// thread of pid: each is a wakeup (or a preemption) of the process.
func ctxSwitches(pid int) (int64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("/proc/%d/task: %v", pid, err)
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				sum += n
			} else if v, ok := strings.CutPrefix(line, "nonvoluntary_ctxt_switches:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				sum += n
			}
		}
	}
	return sum, nil
}

// processTree maps each live pid to its parent (one pass over /proc).
func processTree() map[int]int {
	ents, _ := os.ReadDir("/proc")
	tree := make(map[int]int, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		tree[pid] = ppid(pid)
	}
	return tree
}

// descendants returns root and every process below it in tree.
func descendants(tree map[int]int, root int) []int {
	out := []int{root}
	for changed := true; changed; {
		changed = false
		for pid, parent := range tree {
			if pid == root || parent <= 0 {
				continue
			}
			inOut, parentIn := false, false
			for _, p := range out {
				inOut = inOut || p == pid
				parentIn = parentIn || p == parent
			}
			if parentIn && !inOut {
				out = append(out, pid)
				changed = true
			}
		}
	}
	return out
}

// tcpPeers maps the socket inodes of established TCP connections to their
// remote port (from /proc/net/tcp and tcp6).
func tcpPeers() map[string]int {
	out := map[string]int{}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != "01" { // 01: ESTABLISHED
				continue
			}
			_, port, ok := strings.Cut(fs[2], ":")
			if !ok {
				continue
			}
			p, err := strconv.ParseInt(port, 16, 32)
			if err != nil {
				continue
			}
			out[fs[9]] = int(p)
		}
		f.Close()
	}
	return out
}

// connsTo counts the established TCP connections the given processes hold
// to port.
func connsTo(pids []int, peers map[string]int, port int) int {
	n := 0
	for _, pid := range pids {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err != nil {
				continue
			}
			inode, ok := strings.CutPrefix(target, "socket:[")
			if !ok {
				continue
			}
			if peers[strings.TrimSuffix(inode, "]")] == port {
				n++
			}
		}
	}
	return n
}

// cmdline is a process's argv joined by spaces.
func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}
