// Package testsupport holds the helpers that the tests of several packages
// share: a buffer a test can read while a goroutine writes it, an etcd client
// that closes with the test, a poll for a condition, a check that a process
// is gone and a fake filesystem root.
//
// Only _test.go files import it (lib/testonly/buildtest checks): it imports testing
// and the etcd client, which the product's binaries must not link for it.
// The embedded etcd server that such tests share is started by
// etcdtest.RunMain (lib/testonly/etcdtest), which the benchmarks use too.
package testsupport

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// SyncBuffer is a bytes.Buffer safe for a writer and a concurrent reader
// (a daemon's log that the test watches while the daemon runs).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// NewClient connects to the etcd at endpoint and closes the client when the
// test ends.
func NewClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// pollEvery is how often Eventually asks again.
const pollEvery = 10 * time.Millisecond

// Eventually polls cond until it holds, and fails the test with what when it
// does not within limit.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", limit, what)
		}
		time.Sleep(pollEvery)
	}
}

// Running reports whether process pid exists and is not a zombie. A process
// killed with its group is re-parented to init, which reaps it a moment
// later: until then it is a zombie, and gone for a test's purposes.
func Running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The command name, in parentheses, may hold spaces: the state follows
	// the last ") ".
	i := strings.LastIndex(string(b), ") ")
	return i < 0 || !strings.HasPrefix(string(b[i+2:]), "Z")
}

// WaitGone fails the test when process pid still runs after limit (the
// processes of a group that was sent SIGKILL, which the kernel ends a moment
// later).
func WaitGone(t testing.TB, pid int, limit time.Duration, what string) {
	t.Helper()
	Eventually(t, limit, what+" (pid "+strconv.Itoa(pid)+") ended", func() bool { return !Running(pid) })
}

// ReadPID reads the process id a test's script wrote to path (`echo $! >
// path`), failing the test when there is none.
func ReadPID(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// SizingClient is a client of endpoint (closed with the test) whose reads
// add up the size of etcd's answers (transactions and single reads), for
// tests that a read does not grow with the data.
func SizingClient(t testing.TB, endpoint string) (*clientv3.Client, *SizingKV) {
	c := NewClient(t, endpoint)
	kv := &SizingKV{KV: c.KV}
	c.KV = kv
	return c, kv
}

// SizingKV adds up the size of the answers to Get and Txn.
type SizingKV struct {
	clientv3.KV
	mu    sync.Mutex
	bytes int
}

// Reset sets the sum to 0; Bytes is the sum.
func (k *SizingKV) Reset() { k.mu.Lock(); k.bytes = 0; k.mu.Unlock() }

// Bytes is the size of the answers since the last Reset.
func (k *SizingKV) Bytes() int { k.mu.Lock(); defer k.mu.Unlock(); return k.bytes }

func (k *SizingKV) add(n int) { k.mu.Lock(); k.bytes += n; k.mu.Unlock() }

// Get implements clientv3.KV.
func (k *SizingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := k.KV.Get(ctx, key, opts...)
	if err == nil {
		k.add(proto.Size((*etcdserverpb.RangeResponse)(resp)))
	}
	return resp, err
}

// Txn implements clientv3.KV.
func (k *SizingKV) Txn(ctx context.Context) clientv3.Txn { return &sizingTxn{Txn: k.KV.Txn(ctx), k: k} }

type sizingTxn struct {
	clientv3.Txn
	k *SizingKV
}

func (t *sizingTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *sizingTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *sizingTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *sizingTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	if err == nil {
		t.k.add(proto.Size((*etcdserverpb.TxnResponse)(resp)))
	}
	return resp, err
}

// Tree makes a fake filesystem root in a temporary directory of t: path
// (relative to the root) -> content; content "->X" makes a symlink to X, a
// path ending in "/" a directory.
func Tree(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
