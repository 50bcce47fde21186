package lock

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/clusterrebootd/clusterrebootd/lib/etcd/etcdtest"
)

// embedded is the etcd server the unit tests share (each test uses its own key).
var embedded *etcdtest.Server

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "crd-lock-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	embedded, err = etcdtest.Start(etcdtest.Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	embedded.Stop()
	os.RemoveAll(dir)
	if code == 0 {
		if leaked := leakedGoroutines(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left running after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines waits up to limit for every goroutine started by this
// package or by the etcd client to end, and returns the stacks of those that
// did not.
func leakedGoroutines(limit time.Duration) string {
	deadline := time.Now().Add(limit)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "lib/lock.TestMain") || strings.Contains(g, "lib/lock.leakedGoroutines") {
				continue
			}
			if strings.Contains(g, "clusterrebootd/lib/lock.") || strings.Contains(g, "go.etcd.io/etcd/client/v3.") {
				leaked = append(leaked, g)
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

// newClient connects to endpoint and closes the client when the test ends.
func newClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// opts are test defaults: a short TTL and fast backoff.
func opts(key, node string) Options {
	return Options{
		Key: key, TTL: 3 * time.Second, Node: node, PID: os.Getpid(), Purpose: "test",
		Backoff:    Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		RPCTimeout: 2 * time.Second,
	}
}

func release(t testing.TB, h *Held) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Release(ctx); err != nil {
		t.Errorf("release: %v", err)
	}
}

// interval is when one contender held the lock.
type interval struct {
	who        string
	start, end time.Time
}

// maxOverlap is the largest number of intervals that were open at once.
func maxOverlap(iv []interval) (int, string) {
	type ev struct {
		at    time.Time
		delta int
		who   string
	}
	var evs []ev
	for _, i := range iv {
		evs = append(evs, ev{i.start, +1, i.who}, ev{i.end, -1, i.who})
	}
	// Ends sort before starts at the same instant: touching is not overlapping.
	sort.Slice(evs, func(i, j int) bool {
		if !evs[i].at.Equal(evs[j].at) {
			return evs[i].at.Before(evs[j].at)
		}
		return evs[i].delta < evs[j].delta
	})
	open, most, who := 0, 0, ""
	for _, e := range evs {
		open += e.delta
		if open > most {
			most, who = open, e.who
		}
	}
	return most, who
}
