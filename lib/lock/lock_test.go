package lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

func TestIsEntry(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want bool
	}{{"/l/abc", true}, {"/l/g/abc", false}, {"/l/", false}, {"/lx/abc", false}} {
		t.Run(tc.key, func(t *testing.T) {
			if got := IsEntry("/l", tc.key); got != tc.want {
				t.Errorf("IsEntry(/l, %q) = %v, want %v", tc.key, got, tc.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 10 * time.Second}
	for _, tc := range []struct {
		name    string
		attempt int
		r       float64
		want    time.Duration
	}{
		{"first retry low", 0, 0, time.Second},
		{"first retry high end", 0, 0.999999, 2 * time.Second},
		{"third retry middle", 2, 0.5, time.Second + 7*time.Second/2},
		{"capped at max", 20, 0.999999, 10 * time.Second},
		{"capped low end is min", 20, 0, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.Rand = func() float64 { return tc.r }
			got := b.Delay(tc.attempt)
			if d := got - tc.want; d > time.Millisecond || d < -time.Millisecond {
				t.Errorf("Delay(%d) with rand %v = %s, want %s", tc.attempt, tc.r, got, tc.want)
			}
		})
	}
	t.Run("defaults", func(t *testing.T) {
		if got := (Backoff{}).Delay(0); got < time.Second || got > 2*time.Second {
			t.Errorf("zero Backoff Delay(0) = %s, want within [1s, 2s]", got)
		}
	})
}

func TestOptionsRejected(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	for _, tc := range []struct {
		name string
		edit func(*Options)
	}{
		{"relative key", func(o *Options) { o.Key = "lock" }},
		{"negative holders", func(o *Options) { o.MaxHolders = -1 }},
		{"ttl below etcd minimum", func(o *Options) { o.TTL = time.Second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts("/t/rejected", "n1")
			tc.edit(&o)
			_, err := Acquire(context.Background(), c, o)
			if exitcode.CodeOf(err) != exitcode.Config {
				t.Fatalf("Acquire = %v, want a config error", err)
			}
		})
	}
}

func TestAcquireStatusRelease(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	ctx := context.Background()
	key := "/t/basic/lock"
	info, err := Status(ctx, c, key)
	if err != nil || info.Held() {
		t.Fatalf("before: Status = %+v, %v; want free", info, err)
	}
	o := opts(key, "node-a")
	o.BootID = "boot-1"
	h, err := Acquire(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	// acquired_at is written in the background after Acquire returns.
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err = Status(ctx, c, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Holders) != 1 || len(info.Waiters) != 0 {
			t.Fatalf("Status = %+v, want one holder", info)
		}
		if info.Holders[0].AcquiredAt != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	e := info.Holders[0]
	if e.Node != "node-a" || e.BootID != "boot-1" || e.Purpose != "test" || e.AcquiredAt == nil {
		t.Errorf("holder annotation = %+v", e.Annotation)
	}
	if e.FencingToken != h.FencingToken() || e.Entry != h.Entry() {
		t.Errorf("holder %s token %d, want %s token %d", e.Entry, e.FencingToken, h.Entry(), h.FencingToken())
	}
	if e.LeaseID != fmt.Sprintf("%x", int64(h.LeaseID())) || e.TTLRemainingSec <= 0 || e.TTLRemainingSec > 3 {
		t.Errorf("lease %s ttl %d, want %x with 0 < ttl <= 3", e.LeaseID, e.TTLRemainingSec, int64(h.LeaseID()))
	}
	if e.Since(time.Now()) < 0 || h.Waited() < 0 || h.Key() != key || h.TTL() != 3*time.Second || h.Annotation().Node != "node-a" {
		t.Errorf("accessors: since %s waited %s key %s ttl %s", e.Since(time.Now()), h.Waited(), h.Key(), h.TTL())
	}
	if h.Err() != nil {
		t.Errorf("Err while held = %v", h.Err())
	}
	release(t, h)
	select {
	case <-h.Done():
	default:
		t.Error("Done not closed after Release")
	}
	if !errors.Is(h.Err(), ErrReleased) || h.Context().Err() == nil {
		t.Errorf("after Release: Err = %v, ctx err = %v", h.Err(), h.Context().Err())
	}
	if err := h.Release(ctx); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
	info, _ = Status(ctx, c, key)
	if info.Held() || len(info.Waiters) != 0 {
		t.Errorf("after Release: Status = %+v, want free", info)
	}
}

func TestFencingTokenGrows(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	var last int64
	for i := range 3 {
		h, err := Acquire(context.Background(), c, opts("/t/fence/lock", "n"))
		if err != nil {
			t.Fatal(err)
		}
		if h.FencingToken() <= last {
			t.Errorf("acquisition %d: token %d not above %d", i, h.FencingToken(), last)
		}
		last = h.FencingToken()
		release(t, h)
	}
}

// contend runs rounds of contenders that each take the lock once, hold it
// for hold, and record when; it returns every holding interval.
func contend(t *testing.T, endpoint, key string, maxHolders, rounds, contenders int, hold time.Duration, adjust ...func(*Options)) []interval {
	t.Helper()
	clients := make([]*clientv3.Client, contenders)
	for i := range clients {
		clients[i] = testsupport.NewClient(t, endpoint)
	}
	var mu sync.Mutex
	var all []interval
	for r := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, contenders)
		for i := range contenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := opts(key, fmt.Sprintf("r%d-c%d", r, i))
				o.MaxHolders = maxHolders
				for _, f := range adjust {
					f(&o)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				h, err := Acquire(ctx, clients[i], o)
				if err != nil {
					errs <- err
					return
				}
				start := time.Now()
				time.Sleep(hold)
				end := time.Now()
				select {
				case <-h.Done():
					errs <- fmt.Errorf("%s lost the lock while holding it: %v", o.Node, h.Err())
				default:
				}
				mu.Lock()
				all = append(all, interval{o.Node, start, end})
				mu.Unlock()
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer rcancel()
				if err := h.Release(rctx); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", r, err)
		}
	}
	return all
}

func TestMaxOverlapDetectsOverlap(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name string
		iv   []interval
		want int
	}{
		{"disjoint", []interval{{"a", at(0), at(10)}, {"b", at(11), at(20)}}, 1},
		{"touching", []interval{{"a", at(0), at(10)}, {"b", at(10), at(20)}}, 1},
		{"overlap", []interval{{"a", at(0), at(10)}, {"b", at(9), at(20)}}, 2},
		{"three", []interval{{"a", at(0), at(30)}, {"b", at(5), at(20)}, {"c", at(6), at(7)}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := maxOverlap(tc.iv); got != tc.want {
				t.Errorf("maxOverlap = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestMutualExclusion(t *testing.T) {
	iv := contend(t, embedded.Endpoint, "/t/mutex/lock", 1, 20, 5, time.Millisecond)
	if len(iv) != 100 {
		t.Fatalf("%d acquisitions, want 100", len(iv))
	}
	if n, who := maxOverlap(iv); n != 1 {
		t.Fatalf("%d holders at once (while %s held it), want 1", n, who)
	}
}

func TestSemaphoreNeverMoreThanN(t *testing.T) {
	iv := contend(t, embedded.Endpoint, "/t/sem/lock", 2, 10, 5, 5*time.Millisecond)
	if n, who := maxOverlap(iv); n > 2 {
		t.Fatalf("%d holders at once (peak at %s), want at most 2", n, who)
	}
	heldAtOnce(t, embedded.Endpoint, "/t/sem-at-once/lock", 2)
}

// heldAtOnce: n contenders take the lock with max_holders n, and each keeps
// it until all n hold it. A semaphore that admits fewer never gets there
// (the deadline ends it); a correct one gets there whatever the timing.
// (How many overlap in a contention run with short holds depends on the
// machine's timing: asserting that peak flaked on a loaded machine.)
func heldAtOnce(t *testing.T, endpoint, key string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	holding := 0
	all := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		c := testsupport.NewClient(t, endpoint)
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts(key, fmt.Sprintf("at-once-%d", i))
			o.MaxHolders = n
			h, err := Acquire(ctx, c, o)
			if err != nil {
				errs <- fmt.Errorf("%s: %w", o.Node, err)
				return
			}
			defer func() {
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer rcancel()
				_ = h.Release(rctx)
			}()
			mu.Lock()
			if holding++; holding == n {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-ctx.Done():
				mu.Lock()
				most := holding
				mu.Unlock()
				errs <- fmt.Errorf("%s held the lock, and only %d of %d ever held it at once", o.Node, most, n)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("max_holders %d did not let %d hold the lock at once: %v", n, n, err)
	}
}

func TestSemaphoreQueue(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	ctx := context.Background()
	key := "/t/semqueue/lock"
	o := opts(key, "a")
	o.MaxHolders = 2
	a, err := Acquire(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Node = "b"
	b, err := Acquire(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Held, 1)
	queued := make(chan int, 1)
	o.Node = "c"
	o.OnQueued = func(pos int) { queued <- pos }
	go func() {
		h, err := Acquire(ctx, c, o)
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	if pos := <-queued; pos != 3 {
		t.Errorf("queued at position %d, want 3", pos)
	}
	info, _ := Status(ctx, c, key)
	if len(info.Holders) != 2 || len(info.Waiters) != 1 || info.Waiters[0].Node != "c" {
		t.Fatalf("Status = %+v, want holders a, b and waiter c", info)
	}
	// The second holder leaving must let c in, even though the first stays.
	release(t, b)
	select {
	case h := <-got:
		release(t, h)
	case <-time.After(5 * time.Second):
		t.Fatal("c did not get the semaphore after b released")
	}
	release(t, a)
}

func TestHandoverIsPrompt(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	d, ok := handover(t, c, "/t/handover/lock")
	if !ok {
		return
	}
	// A loose bound: catches a polling design, not a busy machine.
	if d > 2*time.Second {
		t.Errorf("waiter acquired %s after release, want well under 2s", d)
	}
}

func TestTimeoutWhileHeld(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	key := "/t/timeout/lock"
	h, err := Acquire(context.Background(), c, opts(key, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = Acquire(ctx, c, opts(key, "b"))
	if exitcode.CodeOf(err) != exitcode.LockBusy {
		t.Fatalf("Acquire = %v (code %d), want lock_busy", err, exitcode.CodeOf(err))
	}
	info, _ := Status(context.Background(), c, key)
	if len(info.Waiters) != 0 {
		t.Errorf("the timed-out waiter left its entry: %+v", info.Waiters)
	}
}

func TestCancelWhileWaiting(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	key := "/t/cancel/lock"
	h, err := Acquire(context.Background(), c, opts(key, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err = Acquire(ctx, c, opts(key, "b"))
	if exitcode.CodeOf(err) != exitcode.Interrupted {
		t.Fatalf("Acquire = %v, want interrupted", err)
	}
}

func TestLostWhenLeaseRevoked(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	h, err := Acquire(context.Background(), c, opts("/t/revoke/lock", "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, h)
	ctx := context.Background()
	if r, err := c.Txn(ctx).If(h.IsOwnerCmp()).Then(clientv3.OpPut("/t/revoke/marker", "x")).Commit(); err != nil || !r.Succeeded {
		t.Fatalf("owner txn while held: %v, succeeded=%v", err, r != nil && r.Succeeded)
	}
	if _, err := c.Revoke(ctx, h.LeaseID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-time.After(h.TTL()):
		t.Fatal("Done not closed within one TTL after the lease was revoked")
	}
	if exitcode.CodeOf(h.Err()) != exitcode.LockBusy || h.Context().Err() == nil {
		t.Errorf("Err = %v, want lock_busy and a cancelled context", h.Err())
	}
	if r, err := c.Txn(ctx).If(h.IsOwnerCmp()).Then(clientv3.OpPut("/t/revoke/marker", "y")).Commit(); err != nil || r.Succeeded {
		t.Errorf("owner txn after loss succeeded=%v err=%v, want refused", r != nil && r.Succeeded, err)
	}
}

// A waiter whose lease expires while it waits (a process frozen for longer
// than the TTL; here the lease is revoked, as its expiry would) lost its
// place in line, not a fight with etcd: OnRequeued is told, OnRetry is not,
// and the waiter queues again and gets the lock when it is free.
func TestRequeuedWhenWaiterLeaseLost(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	ctx := context.Background()
	const key = "/t/requeue/lock"
	first, err := Acquire(ctx, c, opts(key, "first"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var queued, retries int
	var requeued []error
	o := opts(key, "waiter")
	o.OnQueued = func(int) { mu.Lock(); queued++; mu.Unlock() }
	o.OnRetry = func(int, error, time.Duration) { mu.Lock(); retries++; mu.Unlock() }
	o.OnRequeued = func(_ int, err error, _ time.Duration) { mu.Lock(); requeued = append(requeued, err); mu.Unlock() }
	type result struct {
		h   *Held
		err error
	}
	done := make(chan result, 1)
	go func() { h, err := Acquire(ctx, c, o); done <- result{h, err} }()
	counts := func() (int, int, int) { mu.Lock(); defer mu.Unlock(); return queued, retries, len(requeued) }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testsupport.Eventually(t, 10*time.Second, what, cond)
	}
	waitFor("the waiter queues", func() bool { q, _, _ := counts(); return q == 1 })
	info, err := Status(ctx, c, key)
	if err != nil || len(info.Waiters) != 1 {
		t.Fatalf("status %+v, %v; want one waiter", info, err)
	}
	lease, err := ParseLeaseID(info.Waiters[0].LeaseID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	waitFor("the waiter queues again", func() bool { q, _, _ := counts(); return q == 2 })
	if _, r, n := counts(); r != 0 || n != 1 || !errors.Is(requeued[0], ErrPlaceLost) {
		t.Errorf("OnRetry told %d times, OnRequeued %d times (%v); want 0 and once with ErrPlaceLost", r, n, requeued)
	}
	release(t, first)
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Acquire after requeue = %v", r.err)
		}
		release(t, r.h)
	case <-time.After(5 * time.Second):
		t.Fatal("the requeued waiter did not get the free lock")
	}
}

// The holder's entry is deleted behind its back: the lock ends. Once as the
// watch reports it, and once with a watch that never does (a lost watch
// event, see Recheck; the watch follows another key there), when the holder
// next reads its entry.
func TestLostWhenEntryDeleted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		adjust func(*Options)
		within time.Duration
	}{
		{"seen by the watch", func(*Options) {}, 2 * time.Second},
		{"unseen by the watch", func(o *Options) {
			o.recheck = 200 * time.Millisecond
			o.entryWatchKey = "/t/delete-unseen/elsewhere"
		}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testsupport.NewClient(t, embedded.Endpoint)
			o := opts("/t/delete/"+strings.ReplaceAll(tc.name, " ", "-")+"/lock", "a")
			tc.adjust(&o)
			h, err := Acquire(context.Background(), c, o)
			if err != nil {
				t.Fatal(err)
			}
			defer release(t, h)
			if _, err := c.Delete(context.Background(), h.Entry()); err != nil {
				t.Fatal(err)
			}
			select {
			case <-h.Done():
				if !strings.Contains(h.Err().Error(), "was deleted") {
					t.Errorf("Err = %v, want the entry deleted", h.Err())
				}
			case <-time.After(tc.within):
				t.Fatalf("Done not closed within %s of the entry's deletion", tc.within)
			}
		})
	}
}

func TestEvict(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	ctx := context.Background()
	key := "/t/evict/lock"
	h, err := Acquire(ctx, c, opts(key, "stuck-node"))
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, h)
	none, err := Evict(ctx, c, key, "other-node")
	if err != nil || len(none) != 0 {
		t.Fatalf("Evict(other-node) = %v, %v; want nothing", none, err)
	}
	got, err := Evict(ctx, c, key, "stuck-node")
	if err != nil || len(got) != 1 || got[0].Entry != h.Entry() {
		t.Fatalf("Evict(stuck-node) = %+v, %v", got, err)
	}
	select {
	case <-h.Done():
	case <-time.After(h.TTL()):
		t.Fatal("the evicted holder did not notice")
	}
}

// The protocol is concurrency.Mutex's: with max_holders 1 both exclude
// each other, so `etcdctl lock` on the same key is honoured.
func TestInteropWithConcurrencyMutex(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	ctx := context.Background()
	key := "/t/interop/lock"
	h, err := Acquire(ctx, c, opts(key, "ours"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := concurrency.NewSession(c, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := concurrency.NewMutex(s, key)
	if err := m.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		t.Fatalf("concurrency.Mutex TryLock while we hold = %v, want ErrLocked", err)
	}
	release(t, h)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := Status(ctx, c, key)
	if err != nil || len(info.Holders) != 1 || info.Holders[0].MaxHolders != 1 || info.Holders[0].Node != "" {
		t.Fatalf("Status of a concurrency.Mutex holder = %+v, %v", info, err)
	}
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := Acquire(tctx, c, opts(key, "ours")); exitcode.CodeOf(err) != exitcode.LockBusy {
		t.Fatalf("Acquire while concurrency.Mutex holds = %v, want lock_busy", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestGroupsAreIndependent(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	base := "/t/groups/lock"
	var held []*Held
	for _, g := range []string{"", "rack1", "rack10"} {
		h, err := Acquire(ctx, c, opts(strings.TrimSuffix(base+"/"+g, "/"), "n-"+g))
		if err != nil {
			t.Fatalf("group %q: %v", g, err)
		}
		held = append(held, h)
	}
	info, _ := Status(ctx, c, base)
	if len(info.Holders) != 1 || len(info.Waiters) != 0 {
		t.Errorf("ungrouped Status counts group entries: %+v", info)
	}
	for _, h := range held {
		release(t, h)
	}
}

func TestUnreachableIsEtcdUnavailable(t *testing.T) {
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c := testsupport.NewClient(t, fmt.Sprintf("http://127.0.0.1:%d", port))
	o := opts("/t/unreachable/lock", "a")
	o.RPCTimeout = 200 * time.Millisecond
	retries := 0
	o.OnRetry = func(int, error, time.Duration) { retries++ }
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err = Acquire(ctx, c, o)
	if exitcode.CodeOf(err) != exitcode.EtcdUnavailable {
		t.Fatalf("Acquire = %v, want etcd_unavailable", err)
	}
	if retries < 2 {
		t.Errorf("%d retries, want several with a 20-200ms backoff in 1.5s", retries)
	}
}

// A partition: the holder stops hearing from etcd. It must give the lock up
// before the server can expire the lease and hand it to someone else.
func TestLostOnPartitionBeforeServerExpiry(t *testing.T) {
	p, viaProxy := proxied(t)
	direct := testsupport.NewClient(t, embedded.Endpoint)
	h, err := Acquire(context.Background(), viaProxy, opts("/t/partition/lock", "a"))
	if err != nil {
		t.Fatal(err)
	}
	p.Partition(true)
	cut := time.Now()
	select {
	case <-h.Done():
	case <-time.After(h.TTL() + time.Second):
		t.Fatal("holder did not notice the partition within TTL + 1s")
	}
	noticed := time.Since(cut)
	ttl, err := direct.TimeToLive(context.Background(), h.LeaseID())
	if err != nil {
		t.Fatal(err)
	}
	// TTL -1 means expired; 0 means under a second left (etcd truncates).
	if ttl.TTL < 0 {
		t.Errorf("holder noticed the loss %s after the cut, but the server had already expired the lease", noticed)
	}
	if exitcode.CodeOf(h.Err()) != exitcode.LockBusy {
		t.Errorf("Err = %v, want lock_busy", h.Err())
	}
	p.Partition(false)
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.Release(rctx)
}

// A partition right after a long wait: the session renewed the lease last
// while the holder was queued, up to TTL/3 before it got the lock. Counting
// two thirds of the TTL from the acquisition would leave it holding until
// just before the server expires the lease (seen: 2.4 s with TTL 30); it
// must still give up about TTL/3 before.
func TestLostOnPartitionRightAfterWaiting(t *testing.T) {
	p, viaProxy := proxied(t)
	direct := testsupport.NewClient(t, embedded.Endpoint)
	const key = "/t/partition-after-wait/lock"
	first, err := Acquire(context.Background(), direct, opts(key, "first"))
	if err != nil {
		t.Fatal(err)
	}
	o := opts(key, "waiter")
	o.TTL = 6 * time.Second // keepalives every 2 s
	queued := make(chan int, 1)
	o.OnQueued = func(pos int) { queued <- pos }
	type acquired struct {
		h   *Held
		err error
	}
	got := make(chan acquired, 1)
	go func() {
		h, err := Acquire(context.Background(), viaProxy, o)
		if err == nil {
			p.Partition(true) // at once: no renewal after the acquisition gets through
		}
		got <- acquired{h, err}
	}()
	<-queued
	info, err := Status(context.Background(), direct, key)
	if err != nil || len(info.Waiters) != 1 {
		t.Fatalf("status = %+v, %v", info, err)
	}
	lease, err := ParseLeaseID(info.Waiters[0].LeaseID)
	if err != nil {
		t.Fatal(err)
	}
	// Hand the lock over late in a keepalive period: more than a second
	// after the waiter's last renewal.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ttl, err := direct.TimeToLive(context.Background(), lease)
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TTL <= 4 {
			time.Sleep(600 * time.Millisecond) // about 1.7 s after it
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter's lease stayed at %d s", ttl.TTL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	release(t, first)
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer func() {
		p.Partition(false)
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.h.Release(rctx)
	}()
	select {
	case <-a.h.Done():
	case <-time.After(o.TTL + time.Second):
		t.Fatal("holder did not notice the partition within TTL + 1s")
	}
	gaveUp := time.Now()
	for {
		ttl, err := direct.TimeToLive(context.Background(), lease)
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TTL < 0 {
			break
		}
		if time.Since(gaveUp) > o.TTL {
			t.Fatal("the server did not expire the lease within a TTL after the holder gave up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// TTL/3 is 2 s; allow half a second for the polling and a busy machine.
	margin := time.Since(gaveUp)
	t.Logf("gave up %s before the server expired the lease", margin.Round(time.Millisecond))
	if margin < 1500*time.Millisecond {
		t.Errorf("holder gave up only %s before the server expired the lease; want about TTL/3 (2 s)", margin.Round(time.Millisecond))
	}
}

// Status looks up every entry's TTL, a few at a time; Entries makes one read
// whatever the queue's length (the cluster steps use it under the lock,
// where a lookup per waiter within one deadline stalled a long queue).
func TestStatusAndEntriesWithALongQueue(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	const key = "/t/long-queue/lock"
	ctx := context.Background()
	for i := range 40 {
		g, err := c.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(ctx, fmt.Sprintf("%s/%x", key, g.ID), fmt.Sprintf(`{"node":"n%d"}`, i), clientv3.WithLease(g.ID)); err != nil {
			t.Fatal(err)
		}
	}
	info, err := Status(ctx, c, key)
	if err != nil || len(info.Holders) != 1 || len(info.Waiters) != 39 {
		t.Fatalf("status: %d holders, %d waiters, %v", len(info.Holders), len(info.Waiters), err)
	}
	for _, e := range append(info.Holders, info.Waiters...) {
		if e.TTLRemainingSec <= 0 || e.TTLRemainingSec > 60 {
			t.Errorf("%s: ttl %d, want its lease's", e.Node, e.TTLRemainingSec)
		}
	}
	if info.Waiters[38].Node != "n39" {
		t.Errorf("waiters out of order: last is %s", info.Waiters[38].Node)
	}
	entries, err := Entries(ctx, c, key)
	if err != nil || len(entries.Holders) != 1 || len(entries.Waiters) != 39 || entries.Holders[0].Node != "n0" {
		t.Fatalf("entries: %+v, %v", entries.Holders, err)
	}
	if entries.Waiters[0].TTLRemainingSec != lockinfo.TTLUnknown {
		t.Errorf("Entries looked up a TTL: %d", entries.Waiters[0].TTLRemainingSec)
	}
}

// proxied returns a TCP proxy to the test etcd that can cut the link, and a
// client that talks through it.
func proxied(t *testing.T) (*etcdtest.Proxy, *clientv3.Client) {
	t.Helper()
	p, err := etcdtest.NewProxy(embedded.Endpoint[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, testsupport.NewClient(t, "http://"+p.Addr)
}

// Contenders that disagree on max_holders: the smallest in the line counts.
// A holds with max_holders 1; B, with 3, must not hold with it. Once A is
// gone, B holds; C, with 1, then waits for B.
func TestSmallestMaxHoldersInTheLine(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	key := "/t/smallest/lock"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	oa := opts(key, "a")
	a, err := Acquire(ctx, c, oa)
	if err != nil {
		t.Fatal(err)
	}
	ob := opts(key, "b")
	ob.MaxHolders = 3
	bctx, bcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err = Acquire(bctx, c, ob)
	bcancel()
	if exitcode.CodeOf(err) != exitcode.LockBusy {
		t.Fatalf("b (max_holders 3) beside a (max_holders 1): %v, want lock_busy: the smallest counts", err)
	}
	info, err := Status(ctx, c, key)
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Node != "a" {
		t.Errorf("status holders %+v (%v), want a alone", info.Holders, err)
	}
	release(t, a)
	b, err := Acquire(ctx, c, ob)
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, b)
	oc := opts(key, "c")
	cctx, ccancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err = Acquire(cctx, c, oc)
	ccancel()
	if exitcode.CodeOf(err) != exitcode.LockBusy {
		t.Fatalf("c (max_holders 1) behind b: %v, want lock_busy", err)
	}
}
