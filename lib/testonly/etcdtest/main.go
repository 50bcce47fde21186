package etcdtest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// TestingM is what RunMain needs of *testing.M (an interface, so that this
// package, which the benchmarks link too, does not import testing).
type TestingM interface{ Run() int }

// LeakLimit is how long RunMain waits for goroutines to end after the tests.
const LeakLimit = 5 * time.Second

// RunMain is the body of a TestMain whose tests share one embedded etcd
// server: it starts the server, hands it to set, runs the tests, stops it and
// returns the exit code for os.Exit — the tests' own, or 1 when they passed
// but a goroutine of one of pkgs (import paths, e.g. ".../lib/lock") or of
// the etcd client outlived them by more than LeakLimit.
func RunMain(m TestingM, set func(*Server), pkgs ...string) int {
	dir, err := os.MkdirTemp("", "crd-etcdtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := Start(Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	set(srv)
	code := m.Run()
	srv.Stop()
	if code == 0 {
		if leaked := LeakedGoroutines(LeakLimit, pkgs...); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left running after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	return code
}

// LeakedGoroutines waits up to limit for every goroutine with a frame in one
// of pkgs or in the etcd client to end, and returns the stacks of those that
// did not ("" when none is left). The goroutine running the tests' main
// (RunMain, TestMain) does not count.
func LeakedGoroutines(limit time.Duration, pkgs ...string) string {
	deadline := time.Now().Add(limit)
	watched := append([]string{"go.etcd.io/etcd/client/v3."}, pkgs...)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "etcdtest.RunMain") || strings.Contains(g, "etcdtest.LeakedGoroutines") || strings.Contains(g, ".TestMain(") {
				continue
			}
			for _, p := range watched {
				if !strings.HasSuffix(p, ".") {
					p += "."
				}
				if strings.Contains(g, p) {
					leaked = append(leaked, g)
					break
				}
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
