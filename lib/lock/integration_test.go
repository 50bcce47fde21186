package lock

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// The scenarios below run against a real etcd server process: the binary
// named by CRD_TEST_ETCD (make test-lock-integration runs them against the
// pinned build and Debian's etcd-server 3.4). Without it they skip.

func realServer(t *testing.T) *etcdtest.Server {
	t.Helper()
	bin := os.Getenv("CRD_TEST_ETCD")
	if bin == "" {
		t.Skip("CRD_TEST_ETCD is not set: it names the etcd server binary for the integration scenarios (make test-lock-integration)")
	}
	s, err := etcdtest.Start(etcdtest.Options{Binary: bin, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Ten contenders, 200 rounds, each records when it held the lock: never two
// at once. With max_holders 3 the same run never has more than three, and
// three do hold it at once (heldAtOnce).
func TestIntegrationNoOverlap(t *testing.T) {
	s := realServer(t)
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	for _, tc := range []struct {
		name       string
		maxHolders int
		rounds     int
	}{
		{"mutex", 1, rounds},
		{"semaphore of 3", 3, rounds / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			begin := time.Now()
			iv := contend(t, s.Endpoint, "/it/overlap/"+strconv.Itoa(tc.maxHolders), tc.maxHolders, tc.rounds, 10, 200*time.Microsecond)
			if len(iv) != tc.rounds*10 {
				t.Fatalf("%d acquisitions, want %d", len(iv), tc.rounds*10)
			}
			if n, who := maxOverlap(iv); n > tc.maxHolders {
				t.Fatalf("%d held at once (peak when %s held it), want at most %d", n, who, tc.maxHolders)
			}
			heldAtOnce(t, s.Endpoint, "/it/at-once/"+strconv.Itoa(tc.maxHolders), tc.maxHolders)
			t.Logf("%d acquisitions in %s", len(iv), time.Since(begin).Round(time.Millisecond))
		})
	}
}

// A holder process is SIGKILLed: a waiter gets the lock only after the dead
// holder's lease expired, and within TTL plus slack.
func TestIntegrationKilledHolder(t *testing.T) {
	s := realServer(t)
	const ttl = 5 * time.Second
	key := "/it/killed/lock"
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperHolder$")
	helper.Env = append(os.Environ(), "CRD_LOCK_HELPER_ENDPOINT="+s.Endpoint, "CRD_LOCK_HELPER_KEY="+key)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		helper.Process.Kill()
		helper.Wait()
		t.Fatalf("helper did not report holding the lock: %v", err)
	}
	var deadLease int64
	if _, err := fmt.Sscanf(line, "held %x", &deadLease); err != nil {
		t.Fatalf("helper said %q", line)
	}
	c := testsupport.NewClient(t, s.Endpoint)
	got := make(chan *Held, 1)
	queued := make(chan int, 1)
	go func() {
		o := opts(key, "waiter")
		o.TTL = ttl
		o.OnQueued = func(int) { queued <- 1 }
		h, err := Acquire(context.Background(), c, o)
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	<-queued
	_ = helper.Process.Signal(syscall.SIGKILL)
	_ = helper.Wait()
	killed := time.Now()
	h := <-got
	if h == nil {
		return
	}
	defer release(t, h)
	waited := time.Since(killed)
	ttlResp, err := c.TimeToLive(context.Background(), clientv3.LeaseID(deadLease))
	if err != nil {
		t.Fatal(err)
	}
	if ttlResp.TTL != -1 {
		t.Errorf("waiter acquired while the dead holder's lease still had TTL %d", ttlResp.TTL)
	}
	// Keepalives renew every TTL/3, so expiry comes 2/3 TTL to TTL after the kill.
	if waited < ttl/2 || waited > ttl+3*time.Second {
		t.Errorf("waiter acquired %s after the kill, want between %s and %s", waited, ttl/2, ttl+3*time.Second)
	}
	t.Logf("waiter acquired %s after SIGKILL of the holder (TTL %s)", waited.Round(time.Millisecond), ttl)
}

// TestHelperHolder is not a test: TestIntegrationKilledHolder runs it as a
// separate process that takes the lock, says so and waits to be killed.
func TestHelperHolder(t *testing.T) {
	ep := os.Getenv("CRD_LOCK_HELPER_ENDPOINT")
	if ep == "" {
		t.Skip("helper process only")
	}
	c := testsupport.NewClient(t, ep)
	o := opts(os.Getenv("CRD_LOCK_HELPER_KEY"), "doomed")
	o.TTL = 5 * time.Second
	h, err := Acquire(context.Background(), c, o)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Printf("held %x\n", int64(h.LeaseID()))
	time.Sleep(time.Minute)
	os.Exit(1)
}

// Unlock → the waiter has the lock promptly (a loose bound that catches a
// polling design; the precise figure is a benchmark's job).
func TestIntegrationPromptHandover(t *testing.T) {
	s := realServer(t)
	c := testsupport.NewClient(t, s.Endpoint)
	key := "/it/handover/lock"
	for i := range 5 {
		d, ok := handover(t, c, key)
		if !ok {
			return
		}
		if d > 2*time.Second {
			t.Errorf("round %d: handover took %s, want under 2s", i, d)
		}
	}
}

// The lease is revoked behind the holder's back: Done closes within one
// keepalive period and the owner comparison fails from then on.
func TestIntegrationRevokedBehindBack(t *testing.T) {
	s := realServer(t)
	c := testsupport.NewClient(t, s.Endpoint)
	other := testsupport.NewClient(t, s.Endpoint)
	h, err := Acquire(context.Background(), c, opts("/it/revoke/lock", "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, h)
	if _, err := other.Revoke(context.Background(), h.LeaseID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-time.After(h.TTL() / 3 * 2):
		t.Fatal("Done not closed within one keepalive period after the revoke")
	}
	if exitcode.CodeOf(h.Err()) != exitcode.LockBusy || !strings.Contains(h.Err().Error(), "lost") {
		t.Errorf("Err = %v", h.Err())
	}
}

// etcd compacts its history all the time here, as a production etcd with
// --auto-compaction-retention does (only much faster): a waiter whose watch
// starts at a revision already compacted away must look again and keep its
// place, not fail; and compaction must never let two hold at once.
func TestIntegrationUnderCompaction(t *testing.T) {
	s := realServer(t)
	compactor := testsupport.NewClient(t, s.Endpoint)
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		defer func() { done <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if r, err := compactor.Get(ctx, "/it/compact-probe"); err == nil {
				if _, err := compactor.Compact(ctx, r.Header.Revision); err == nil {
					n++
				}
			}
			cancel()
		}
	}()
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	for _, tc := range []struct {
		name       string
		maxHolders int
	}{{"mutex", 1}, {"semaphore of 2", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			// etcd 3.4.23 drops deletions under this compaction
			// (TestIntegrationLostDeleteEvent): a short Recheck keeps the
			// test quick there.
			iv := contend(t, s.Endpoint, "/it/compact/"+strconv.Itoa(tc.maxHolders), tc.maxHolders, rounds, 8, time.Millisecond,
				func(o *Options) { o.recheck = 500 * time.Millisecond })
			if len(iv) != rounds*8 {
				t.Fatalf("%d acquisitions, want %d", len(iv), rounds*8)
			}
			if n, who := maxOverlap(iv); n > tc.maxHolders {
				t.Fatalf("%d held at once (peak when %s held it), want at most %d", n, who, tc.maxHolders)
			}
		})
	}
	close(stop)
	if n := <-done; n < 10 {
		t.Fatalf("only %d compactions ran during the test: it did not test compaction", n)
	}
}

// etcd before 3.4.34 and 3.5.16 drops the deletion from a watch that starts
// at the revision etcd was just compacted to (etcd issue 18089; Debian 12
// ships 3.4.23). Here the holder releases and etcd is compacted to the
// deletion's revision exactly between the waiter's read and its watch: on
// such an etcd the watch never reports the release, and only the waiter's
// periodic re-read (Recheck, shortened here) lets it in.
func TestIntegrationLostDeleteEvent(t *testing.T) {
	s := realServer(t)
	c := testsupport.NewClient(t, s.Endpoint)
	other := testsupport.NewClient(t, s.Endpoint)
	ctx := context.Background()
	key := "/it/lostevent/lock"
	a, err := Acquire(ctx, c, opts(key, "a"))
	if err != nil {
		t.Fatal(err)
	}
	// Let a's acquired_at write land first: nothing may write between the
	// waiter's read and the release.
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := Status(ctx, other, key)
		if err == nil && len(info.Holders) == 1 && info.Holders[0].AcquiredAt != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's annotation was not written: %+v, %v", info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	o := opts(key, "b")
	o.recheck = time.Second
	var once sync.Once
	var compactedAt, watchFrom int64
	o.beforeWatch = func(ahead []string, rev int64) {
		once.Do(func() {
			release(t, a)
			r, err := other.Get(ctx, "/it/lostevent/probe")
			if err != nil {
				t.Error(err)
				return
			}
			compactedAt, watchFrom = r.Header.Revision, rev+1
			if _, err := other.Compact(ctx, compactedAt, clientv3.WithCompactPhysical()); err != nil {
				t.Error(err)
			}
		})
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	started := time.Now()
	b, err := Acquire(actx, c, o)
	if err != nil {
		t.Fatalf("b did not get the lock after a released it: %v", err)
	}
	release(t, b)
	if compactedAt != watchFrom {
		t.Fatalf("compacted to %d but the watch started at %d: the scenario needs them equal", compactedAt, watchFrom)
	}
	t.Logf("b held the lock %s after queueing (compacted to %d, the watch's start)", time.Since(started).Round(time.Millisecond), compactedAt)
}
