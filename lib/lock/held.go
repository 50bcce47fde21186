package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
)

// ErrReleased is Held.Err after Release.
var ErrReleased = errors.New("lock: released")

// Held is an acquired lock. It stays held until Release or until Done closes
// because the lock was lost; after Done, call Release anyway (it revokes the
// lease in case etcd still has it).
type Held struct {
	client     *clientv3.Client
	session    *concurrency.Session
	key        string
	entry      string
	rev        int64
	ttl        time.Duration
	rpcTimeout time.Duration
	ann        lockinfo.Annotation
	waited     time.Duration

	done     chan struct{}
	stop     chan struct{}
	finished chan struct{}
	once     sync.Once
	stopOnce sync.Once
	mu       sync.Mutex
	err      error
	ctx      context.Context
	cancel   context.CancelFunc

	// recheck is how often the entry is read without a watch event;
	// watchKey is the key the entry's watch follows (the entry; tests
	// point it elsewhere to stand for a watch that loses the deletion).
	recheck  time.Duration
	watchKey string
}

func newHeld(c *clientv3.Client, sess *concurrency.Session, o *Options, entry string, rev int64, ann lockinfo.Annotation) *Held {
	ctx, cancel := context.WithCancel(context.Background())
	h := &Held{
		client: c, session: sess, key: o.Key, entry: entry, rev: rev, ttl: o.TTL, rpcTimeout: o.RPCTimeout, ann: ann,
		done: make(chan struct{}), stop: make(chan struct{}), finished: make(chan struct{}),
		ctx: ctx, cancel: cancel, recheck: o.recheck, watchKey: entry,
	}
	if o.entryWatchKey != "" {
		h.watchKey = o.entryWatchKey
	}
	go h.watchdog()
	return h
}

// Done closes when the lock is no longer held: released, or lost (see Err).
func (h *Held) Done() <-chan struct{} { return h.done }

// Err is nil while the lock is held, ErrReleased after Release, or the reason
// the lock was lost (exit code 4).
func (h *Held) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Context is cancelled when Done closes: run work "under the lock" in it.
func (h *Held) Context() context.Context { return h.ctx }

// Key is the lock key; Entry is this holder's entry under it.
func (h *Held) Key() string { return h.key }

// Entry is the etcd key of this holder's entry, Key/<lease-id-hex>.
func (h *Held) Entry() string { return h.entry }

// FencingToken is the entry's create revision: it grows with every
// acquisition, so a guarded resource can reject a request carrying a token
// lower than one it has already seen.
func (h *Held) FencingToken() int64 { return h.rev }

// LeaseID is the lease the entry is attached to.
func (h *Held) LeaseID() clientv3.LeaseID { return h.session.Lease() }

// TTL is the lease TTL.
func (h *Held) TTL() time.Duration { return h.ttl }

// Annotation is the value written to the entry.
func (h *Held) Annotation() lockinfo.Annotation { return h.ann }

// Waited is how long Acquire took.
func (h *Held) Waited() time.Duration { return h.waited }

// IsOwnerCmp is a transaction comparison that holds only while this entry
// still exists with its create revision — i.e. while the lock is held. Use it
// to write other keys only as the owner:
//
//	client.Txn(ctx).If(h.IsOwnerCmp()).Then(clientv3.OpPut(k, v, clientv3.WithLease(h.LeaseID())))
func (h *Held) IsOwnerCmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(h.entry), "=", h.rev)
}

// lost records why the lock is gone and closes Done (once).
func (h *Held) end(err error) {
	h.once.Do(func() {
		h.mu.Lock()
		h.err = err
		h.mu.Unlock()
		h.cancel()
		close(h.done)
	})
}

// lostAfter is how long without a keepalive answer the lock counts as lost:
// two thirds of the TTL. Keepalives go out every TTL/3, and the server expires
// the lease no earlier than TTL after the last renewal it answered, so the
// holder gives up at least TTL/3 before anyone else can acquire.
func (h *Held) lostAfter() time.Duration { return h.ttl * 2 / 3 }

// watchdog ends the lock when the lease's keepalives stop or go unanswered,
// or when the entry is deleted.
func (h *Held) watchdog() {
	defer close(h.finished)
	kctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ka, err := h.client.KeepAlive(kctx, h.session.Lease())
	if err != nil {
		h.lose(fmt.Errorf("cannot watch the lease's keepalives: %w", err))
		return
	}
	deleted := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		h.watchEntry(kctx, deleted)
	}()
	go func() {
		defer wg.Done()
		h.annotate(kctx)
	}()
	// The deadline counts from a renewal whose sending time is known. The
	// session's keepalives renewed the lease while we waited, the last one
	// up to TTL/3 ago, so two thirds of the TTL from now could be the very
	// moment etcd expires it. One renewal at once fixes the base: until it
	// is answered, the deadline is TTL/3 from now (at most TTL/3 passed
	// since the last renewal, so that still leaves TTL/3 before expiry).
	renewed, gone := make(chan time.Time, 1), make(chan struct{}, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent := time.Now()
		resp, err := h.client.KeepAliveOnce(kctx, h.session.Lease())
		switch {
		case err == nil && resp.TTL > 0:
			renewed <- sent
		case err == nil, errors.Is(err, rpctypes.ErrLeaseNotFound):
			gone <- struct{}{}
		}
	}()
	timer := time.NewTimer(h.ttl / 3)
	defer timer.Stop()
	for {
		select {
		case <-h.stop:
			return
		case sent := <-renewed:
			timer.Reset(h.lostAfter() - time.Since(sent))
		case <-gone:
			h.lose(fmt.Errorf("lease %x expired or was revoked", h.session.Lease()))
			return
		case resp, ok := <-ka:
			if !ok {
				h.lose(fmt.Errorf("lease %x expired or was revoked", h.session.Lease()))
				return
			}
			if resp.TTL <= 0 {
				h.lose(fmt.Errorf("lease %x expired", h.session.Lease()))
				return
			}
			timer.Reset(h.lostAfter())
		case <-timer.C:
			h.lose(fmt.Errorf("etcd answered no keepalive in time (lease TTL %s); the lease may expire any moment", h.ttl))
			return
		case <-h.session.Done():
			h.lose(fmt.Errorf("lease %x expired or was revoked", h.session.Lease()))
			return
		case <-deleted:
			h.lose(fmt.Errorf("entry %s was deleted (lease revoked, crd-lock release --force or etcdctl del)", h.entry))
			return
		}
	}
}

// annotate writes the annotation with acquired_at to the entry, only while
// the entry is still ours. It is information for `crd-lock status`, not part
// of holding the lock: a failure (etcd unreachable, Release first) is
// harmless, and Release cancels it rather than waiting for it.
func (h *Held) annotate(ctx context.Context) {
	val, err := json.Marshal(h.ann)
	if err != nil {
		return
	}
	tctx, cancel := context.WithTimeout(ctx, h.rpcTimeout)
	defer cancel()
	_, _ = h.client.Txn(tctx).If(h.IsOwnerCmp()).
		Then(clientv3.OpPut(h.entry, string(val), clientv3.WithLease(h.session.Lease()))).Commit()
}

// watchEntry closes deleted when the entry is deleted. Establishing a watch
// blocks while etcd is unreachable, so it runs beside the keepalive checks.
// A broken watch (leader change, compaction during a long hold) is
// re-established from a fresh read of the entry, and the entry is also read
// every recheck without an event (see Recheck: a watch can lose a deletion).
func (h *Held) watchEntry(ctx context.Context, deleted chan<- struct{}) {
	from := h.rev + 1
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := h.client.Watch(wctx, h.watchKey, clientv3.WithRev(from), clientv3.WithFilterPut())
		gone, broken := waitEntryEvent(wch, h.recheck)
		cancel()
		if gone {
			close(deleted)
			return
		}
		if broken {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		gctx, gcancel := context.WithTimeout(ctx, h.rpcTimeout)
		resp, err := h.client.Get(gctx, h.entry)
		gcancel()
		if err != nil {
			continue
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.rev {
			close(deleted)
			return
		}
		from = resp.Header.Revision + 1
	}
}

// waitEntryEvent waits on the entry's watch: gone when it reports a
// deletion, broken when it ends, neither when recheck passed first.
func waitEntryEvent(wch clientv3.WatchChan, recheck time.Duration) (gone, broken bool) {
	t := time.NewTimer(recheck)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return false, false
		case wr, ok := <-wch:
			if !ok {
				return false, true
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return true, false
				}
			}
		}
	}
}

// lose ends the lock as lost and stops renewing the lease, so a lease etcd
// still holds runs out instead of blocking others.
func (h *Held) lose(reason error) {
	h.session.Orphan()
	h.end(exitcode.Errorf(exitcode.LockBusy, "lock: lost %s: %w", h.key, reason))
}

// Release gives the lock up: it stops the keepalives and revokes the lease,
// which deletes the entry. ctx should be fresh and bounded (not the cancelled
// context of the work that ran under the lock). Calling it again is a no-op.
// When etcd cannot be reached the entry stays until the lease's TTL runs out.
func (h *Held) Release(ctx context.Context) error {
	first := false
	h.stopOnce.Do(func() { first = true; close(h.stop) })
	if !first {
		return nil
	}
	// Ended first, so that the watchdog, seeing the entry go, cannot call it
	// lost; revoked before waiting for the watchdog, so the next holder's turn
	// does not wait for our goroutines to wind down.
	h.end(ErrReleased)
	h.session.Orphan()
	_, err := h.client.Revoke(ctx, h.session.Lease())
	<-h.finished
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return exitcode.Errorf(exitcode.EtcdUnavailable, "lock: release %s: revoking lease %x failed (%v); the entry expires within %s by itself", h.key, h.session.Lease(), err, h.ttl)
	}
	return nil
}
