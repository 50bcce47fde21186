// Package lock is the cluster lock: at most MaxHolders processes hold a lock
// key at a time, enforced by etcd v3, and a crashed or powered-off holder
// frees its place by itself when its lease expires.
//
// The protocol is the one of go.etcd.io/etcd/client/v3/concurrency.Mutex
// (and so of `etcdctl lock`): every contender puts <key>/<lease-id-hex> with
// its lease, and the contenders are ordered by the create revision of those
// entries. With MaxHolders 1 the first entry holds the lock and every waiter
// watches the entry just before its own; with MaxHolders N the first N
// entries hold it and waiters watch the key range for deletions. Waiting is a
// watch, never a poll. Unlike concurrency.Mutex, the entry's value carries a
// JSON annotation from the moment it is queued, so `crd-lock status` can name
// every waiter, not only the holder.
//
// A Held lock's Done channel closes when the lock is gone: the lease expired
// or was revoked, the entry was deleted, or etcd stopped answering
// keepalives for two thirds of the TTL — earlier than the server can expire
// the lease, so nothing keeps acting under a lock that another node may
// already hold.
package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
)

// Options configure Acquire.
type Options struct {
	// Key is the lock key (see Key); entries live under Key + "/".
	Key string
	// MaxHolders is how many may hold the lock at once (default 1).
	MaxHolders int
	// TTL is the lease TTL (lock_ttl_sec), at least 2 s (etcd's minimum).
	TTL time.Duration
	// Node, PID, BootID, MachineID and Purpose annotate the entry.
	Node      string
	PID       int
	BootID    string
	MachineID string
	Purpose   string
	// Candidate marks the seat as an admission candidate's
	// (lockinfo.Annotation.Candidate).
	Candidate bool
	// Backoff spaces out retries after connection failures.
	Backoff Backoff
	// RPCTimeout bounds each request while acquiring; a request that takes
	// longer counts as a connection failure and is retried (default 5 s).
	RPCTimeout time.Duration
	// Now is the clock for the annotation's timestamps (default time.Now).
	Now func() time.Time
	// OnRetry, when set, is told about each connection failure before the
	// backoff sleep (for logging).
	OnRetry func(attempt int, err error, wait time.Duration)
	// OnRequeued, when set, is told instead of OnRetry when our place in
	// line was lost while waiting (ErrPlaceLost: the lease expired, as after
	// a freeze longer than the TTL, or the entry was deleted), before the
	// backoff sleep after which Acquire queues again at the end of the line.
	// etcd did not fail; without OnRequeued, OnRetry is told.
	OnRequeued func(attempt int, err error, wait time.Duration)
	// OnQueued, when set, is called once the entry is queued behind others.
	OnQueued func(position int)

	// recheck is how long a waiter trusts its watch before it reads again
	// without an event (default Recheck); tests shorten it.
	recheck time.Duration
	// beforeWatch, when set, runs between a waiter's read and its watch
	// (tests: to compact etcd at the revision a watch starts from).
	beforeWatch func(ahead []string, rev int64)
	// entryWatchKey, when set, is the key a holder's watch follows instead
	// of its entry (tests: a watch that never reports the deletion).
	entryWatchKey string
}

// Recheck is how long a waiter waits on its watch before it reads the line
// again anyway, and how often a holder reads its own entry. Handovers never
// wait for it: they come from the watch. It
// bounds the damage of a lost watch event: etcd before 3.4.34 and 3.5.16
// drops a deletion from a watch that starts at the revision etcd was just
// compacted to (etcd issue 18089), and a waiter relying on the watch alone
// would then wait forever, and the whole line behind it.
const Recheck = 30 * time.Second

// ProtocolVersion is written in every annotation ("v"). It is the same
// number as policy.ProtocolVersion, the version of everything the daemon
// writes (docs/cluster-protocol.md, "Versions"): a reader accepts any
// version and ignores fields it does not know; an annotation it cannot
// decode allows one holder.
const ProtocolVersion = 3

// ErrPlaceLost: our lease expired or our entry was deleted while we waited
// in line; Acquire queues again (Options.OnRequeued).
var ErrPlaceLost = errors.New("lock: our place in line was lost while waiting (lease expired or entry deleted)")

// Sentinel errors of one acquisition attempt.
var (
	// errSessionLost: our lease or entry vanished while queued; start over.
	errSessionLost = ErrPlaceLost
	// errWatchClosed: the watch ended without an error (leader lost); start over.
	errWatchClosed = errors.New("lock: watch closed while waiting")
	// errCompacted: the watch would have started at a revision etcd has
	// compacted away; look again and watch from the new revision.
	errCompacted = errors.New("lock: watch revision compacted while waiting")
	// errInLine: ctx ended while our entry was queued behind holders.
	errInLine = errors.New("lock: still queued when the wait ended")
	// ErrEvicted: our entry was deleted while we waited and our lease lives
	// on, so it was not lost: someone removed us from the line (crd-lock
	// release --force, etcdctl del). Not retried: queueing again would undo
	// the operator's decision.
	ErrEvicted = errors.New("evicted from the line while waiting")
)

func (o *Options) defaults() error {
	if o.Key == "" || !strings.HasPrefix(o.Key, "/") {
		return exitcode.Errorf(exitcode.Config, "lock: key %q must be an absolute etcd key such as /cluster/clusterrebootd/lock", o.Key)
	}
	if o.MaxHolders == 0 {
		o.MaxHolders = 1
	}
	if o.MaxHolders < 0 {
		return exitcode.Errorf(exitcode.Config, "lock: max_holders %d must be at least 1", o.MaxHolders)
	}
	if o.TTL < 2*time.Second {
		return exitcode.Errorf(exitcode.Config, "lock: lock_ttl_sec %s is below etcd's minimum of 2s", o.TTL)
	}
	if o.RPCTimeout <= 0 {
		o.RPCTimeout = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.recheck <= 0 {
		o.recheck = Recheck
	}
	return nil
}

// Acquire queues for the lock and returns once it is held, ctx ends, or a
// non-retryable error occurs. Connection failures are retried with Backoff.
// Errors: exit 4 when ctx's deadline passed while the lock was held by others,
// 7 when etcd could not be reached or refused us, 130 when ctx was cancelled.
func Acquire(ctx context.Context, c *clientv3.Client, o Options) (*Held, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	var lastConnErr error
	for attempt := 0; ; attempt++ {
		h, err := acquireOnce(ctx, c, &o)
		if err == nil {
			h.waited = time.Since(start)
			return h, nil
		}
		if ctx.Err() != nil {
			return nil, ctxError(ctx, o.Key, lastConnErr, err)
		}
		if !retryable(err) {
			return nil, unavailable(c, err)
		}
		wait := o.Backoff.Delay(attempt)
		if errors.Is(err, ErrPlaceLost) {
			// Not an etcd failure: a deadline passing later is not blamed on it.
			if o.OnRequeued != nil {
				o.OnRequeued(attempt+1, err, wait)
			} else if o.OnRetry != nil {
				o.OnRetry(attempt+1, err, wait)
			}
		} else {
			lastConnErr = err
			if o.OnRetry != nil {
				o.OnRetry(attempt+1, err, wait)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctxError(ctx, o.Key, lastConnErr, err)
		case <-t.C:
		}
	}
}

// ctxError explains why Acquire stopped when ctx ended.
func ctxError(ctx context.Context, key string, lastConnErr, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return exitcode.Errorf(exitcode.Interrupted, "lock: interrupted while waiting for %s", key)
	case errors.Is(err, errInLine):
		return exitcode.Errorf(exitcode.LockBusy, "lock: %s not acquired before the deadline: held by others (see crd-lock status --key %s)", key, key)
	case lastConnErr != nil:
		return exitcode.Errorf(exitcode.EtcdUnavailable, "lock: %s not acquired before the deadline; etcd kept failing: %v", key, lastConnErr)
	case errors.Is(err, ErrPlaceLost):
		return exitcode.Errorf(exitcode.LockBusy, "lock: %s not acquired before the deadline: our place in line was lost (lease expired or entry deleted) and the wait ended before we queued again", key)
	case retryable(err):
		return exitcode.Errorf(exitcode.EtcdUnavailable, "lock: %s not acquired before the deadline; etcd did not answer: %v", key, err)
	default:
		return exitcode.Errorf(exitcode.LockBusy, "lock: %s not acquired before the deadline", key)
	}
}

// unavailable codes a non-retryable etcd error (auth, permission) as exit 7.
func unavailable(c *clientv3.Client, err error) error {
	var ec *exitcode.Error
	if errors.As(err, &ec) {
		return err
	}
	return exitcode.Errorf(exitcode.EtcdUnavailable, "lock: etcd at %s refused the request: %v; check etcd_username and the role's permission on etcd_namespace", strings.Join(c.Endpoints(), ","), err)
}

// retryable reports whether err is a connection-level failure worth a retry.
func retryable(err error) bool {
	if errors.Is(err, errSessionLost) || errors.Is(err, errWatchClosed) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"Unavailable", "DeadlineExceeded", "deadline exceeded", "no leader",
		"leader changed", "connection", "transport", "timed out", "too many requests"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// acquireOnce is one attempt: a fresh lease, an entry, then waiting in line.
func acquireOnce(ctx context.Context, c *clientv3.Client, o *Options) (*Held, error) {
	rpc := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, o.RPCTimeout) }
	gctx, cancel := rpc()
	grant, err := c.Grant(gctx, int64(o.TTL/time.Second))
	cancel()
	if err != nil {
		return nil, err
	}
	// The session outlives ctx (which may carry the acquire timeout): it ends
	// on Release or when the lease is lost.
	sess, err := concurrency.NewSession(c, concurrency.WithLease(grant.ID),
		concurrency.WithTTL(int(o.TTL/time.Second)), concurrency.WithContext(context.Background()))
	if err != nil {
		revoke(c, grant.ID, o.RPCTimeout)
		return nil, err
	}
	fail := func(err error) (*Held, error) {
		sess.Orphan()
		revoke(c, grant.ID, o.RPCTimeout)
		return nil, err
	}
	myKey := fmt.Sprintf("%s/%x", o.Key, grant.ID)
	ann := lockinfo.Annotation{V: ProtocolVersion, Node: o.Node, PID: o.PID, BootID: o.BootID, MachineID: o.MachineID, Purpose: o.Purpose, Candidate: o.Candidate, MaxHolders: o.MaxHolders, QueuedAt: o.Now().UTC()}
	val, _ := json.Marshal(ann)
	tctx, cancel := rpc()
	resp, err := c.Txn(tctx).If(clientv3.Compare(clientv3.CreateRevision(myKey), "=", 0)).
		Then(clientv3.OpPut(myKey, string(val), clientv3.WithLease(grant.ID))).Commit()
	cancel()
	if err != nil {
		return fail(err)
	}
	if !resp.Succeeded {
		// A fresh lease's key cannot exist; if it does, something else wrote
		// under our lease ID: never take it for our own entry.
		return fail(exitcode.Errorf(exitcode.Internal, "lock: entry %s already existed when it was to be created", myKey))
	}
	myRev := resp.Header.Revision
	if err := waitTurn(ctx, c, sess, o, myKey, myRev); err != nil {
		return fail(err)
	}
	// The lock is ours: the read that found nobody ahead also found our entry.
	// acquired_at is for people reading `crd-lock status`; the Held writes it
	// in the background (Held.annotate) so that a handover costs one write
	// (the predecessor's release), not two.
	now := o.Now().UTC()
	ann.AcquiredAt = &now
	return newHeld(c, sess, o, myKey, myRev, ann), nil
}

// waitTurn blocks until fewer than MaxHolders entries are ahead of ours.
func waitTurn(ctx context.Context, c *clientv3.Client, sess *concurrency.Session, o *Options, myKey string, myRev int64) error {
	queued := false
	var info aheadInfo
	reread := true
	for {
		if reread {
			var err error
			info, err = entriesAhead(ctx, c, o, myKey, myRev)
			if err != nil && ctx.Err() != nil {
				return errInLine
			}
			if err != nil {
				return err
			}
		}
		if info.fewer && len(info.near) < info.limit {
			// Ahead of us are fewer than our max_holders, and than what each
			// of them allows (a line whose nodes disagree: the smallest counts).
			return nil
		}
		if !queued && o.OnQueued != nil {
			o.OnQueued(position(ctx, c, o, myRev, info))
			queued = true
		}
		deleted, err := waitDelete(ctx, c, sess, o, myKey, info.near, info.rev)
		if err != nil {
			if errors.Is(err, errCompacted) && ctx.Err() == nil {
				// Our entry keeps its place: the next read finds it (or
				// reports it gone) at a revision that is not compacted.
				reread = true
				continue
			}
			if ctx.Err() != nil {
				return errInLine
			}
			return err
		}
		// A deletion: read the line again. The periodic re-check (a watch
		// can lose an event): single keys only, whatever the line's length;
		// the line is read again only if one of them is gone.
		reread = deleted || !stillThere(ctx, c, o, myKey, &info)
	}
}

// stillThere reports whether our entry and the entries we watch all still
// exist, by single-key reads, and moves info's revision on.
func stillThere(ctx context.Context, c *clientv3.Client, o *Options, myKey string, info *aheadInfo) bool {
	rctx, cancel := context.WithTimeout(ctx, o.RPCTimeout)
	defer cancel()
	ops := []clientv3.Op{clientv3.OpGet(myKey, clientv3.WithCountOnly())}
	for _, k := range info.near {
		ops = append(ops, clientv3.OpGet(k, clientv3.WithCountOnly()))
	}
	resp, err := c.Txn(rctx).Then(ops...).Commit()
	if err != nil {
		return false
	}
	for _, r := range resp.Responses {
		if r.GetResponseRange().Count == 0 {
			return false
		}
	}
	info.rev = resp.Header.Revision
	return true
}

// aheadPage is how many entries a waiter reads at once, nearest first,
// beyond its max_holders (entries of nested group lines may be among them).
const aheadPage = 16

// entriesAhead reads the entries nearest ahead of ours (at most MaxHolders,
// nearest first), whether they are all that is ahead, and checks that ours
// still exists. Whatever the length of the line, it gets a few entries, not
// the line: a waiter cannot enter while its MaxHolders nearest predecessors
// are all there, so they are all it needs to know and to watch.
//
// The line is read keys only, and the chosen entries' values (their
// max_holders) at the same revision after: etcd sorts and filters a range
// by revision after reading all of it, and a range with values reads every
// value from its backend, so a waiter's read of a line of 10,000 entries
// cost etcd 10,000 values (queueing 10,000 nodes took more than ten
// minutes); keys only, it walks only its in-memory index.
func entriesAhead(ctx context.Context, c *clientv3.Client, o *Options, myKey string, myRev int64) (a aheadInfo, err error) {
	for range 10 {
		// A compaction between the keys and the values: read again.
		if a, err = entriesAheadOnce(ctx, c, o, myKey, myRev); !errors.Is(err, rpctypes.ErrCompacted) {
			break
		}
	}
	return a, err
}

func entriesAheadOnce(ctx context.Context, c *clientv3.Client, o *Options, myKey string, myRev int64) (aheadInfo, error) {
	rctx, cancel := context.WithTimeout(ctx, o.RPCTimeout)
	defer cancel()
	page := int64(o.MaxHolders + aheadPage)
	ahead := func(maxCreate int64) []clientv3.OpOption {
		return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(maxCreate),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(page)}
	}
	resp, err := c.Txn(rctx).Then(clientv3.OpGet(myKey, clientv3.WithCountOnly()), clientv3.OpGet(o.Key+"/", ahead(myRev-1)...)).Commit()
	if err != nil {
		return aheadInfo{}, err
	}
	if resp.Responses[0].GetResponseRange().Count == 0 {
		return aheadInfo{}, entryGone(ctx, c, o, myKey)
	}
	a := aheadInfo{rev: resp.Header.Revision, limit: o.MaxHolders}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	for {
		for _, kv := range kvs {
			if IsEntry(o.Key, string(kv.Key)) && len(a.near) < o.MaxHolders {
				a.near = append(a.near, string(kv.Key))
			}
		}
		if len(a.near) == o.MaxHolders {
			break // as many ahead as we allow: we cannot enter now
		}
		if int64(len(kvs)) < page {
			a.fewer = true // the line ahead ended: near is all of it
			break
		}
		// A page of entries of nested group lines: read on from the oldest,
		// at the same revision.
		r, err := c.Get(rctx, o.Key+"/", append(ahead(kvs[len(kvs)-1].CreateRevision-1), clientv3.WithRev(a.rev))...)
		if err != nil {
			return aheadInfo{}, err
		}
		kvs = r.Kvs
	}
	if !a.fewer || len(a.near) == 0 {
		return a, nil // as many ahead as we allow, or none: their limits do not matter
	}
	// Fewer ahead than we allow: whether we enter depends on what each of
	// them allows. Their values at the same revision, after our own entry
	// (counted: it was there at that revision; it tells this read apart).
	ops := []clientv3.Op{clientv3.OpGet(myKey, clientv3.WithCountOnly(), clientv3.WithRev(a.rev))}
	for _, k := range a.near {
		ops = append(ops, clientv3.OpGet(k, clientv3.WithRev(a.rev)))
	}
	vresp, err := c.Txn(rctx).Then(ops...).Commit()
	if err != nil {
		return aheadInfo{}, err
	}
	for _, r := range vresp.Responses[1:] {
		for _, kv := range r.GetResponseRange().Kvs {
			a.limit = min(a.limit, lockinfo.ParseAnnotation(kv.Value).MaxHolders)
		}
	}
	return a, nil
}

// aheadInfo is what a waiter reads of the line ahead of it.
type aheadInfo struct {
	// near are the entries nearest ahead of ours, nearest first: at most
	// MaxHolders of them.
	near []string
	// fewer says near is every entry ahead (fewer than MaxHolders).
	fewer bool
	// limit is the smallest max_holders of ours and of near's.
	limit int
	rev   int64
}

// maxPosition bounds the read of a waiter's place in the line, for the log.
const maxPosition = 1000

// position is our place in the line (from 1), for the log, read once per
// wait: exact when the entries ahead were all read, else counted from a
// keys-only read of at most maxPosition entries (maxPosition+1 says "beyond").
func position(ctx context.Context, c *clientv3.Client, o *Options, myRev int64, a aheadInfo) int {
	if a.fewer {
		return len(a.near) + 1
	}
	rctx, cancel := context.WithTimeout(ctx, o.RPCTimeout)
	defer cancel()
	resp, err := c.Get(rctx, o.Key+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(a.rev),
		clientv3.WithMaxCreateRev(myRev-1), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(maxPosition))
	if err != nil {
		return len(a.near) + 1
	}
	n := 0
	for _, kv := range resp.Kvs {
		if IsEntry(o.Key, string(kv.Key)) {
			n++
		}
	}
	if int64(len(resp.Kvs)) == maxPosition {
		return maxPosition + 1
	}
	return n + 1
}

// entryGone tells an evicted waiter (entry deleted, lease alive) from one
// whose lease expired or was revoked (start over).
func entryGone(ctx context.Context, c *clientv3.Client, o *Options, myKey string) error {
	id, err := ParseLeaseID(myKey[strings.LastIndex(myKey, "/")+1:])
	if err != nil {
		return errSessionLost
	}
	tctx, cancel := context.WithTimeout(ctx, o.RPCTimeout)
	defer cancel()
	ttl, err := c.TimeToLive(tctx, id)
	if err != nil || ttl.TTL <= 0 {
		return errSessionLost
	}
	return exitcode.New(exitcode.LockBusy, fmt.Errorf("lock: %s: entry %s %w (crd-lock release --force or etcdctl del); not queueing again", o.Key, myKey, ErrEvicted))
}

// IsEntry reports whether key is a direct entry of lockKey (not an entry of
// a group lock nested below it).
func IsEntry(lockKey, key string) bool {
	rest, ok := strings.CutPrefix(key, lockKey+"/")
	return ok && rest != "" && !strings.Contains(rest, "/")
}

// waitDelete waits for a deletion that may let us in: of one of the
// entries nearest ahead of ours (ahead: as many as our max_holders), or of
// our own. It also returns, without an error, after o.recheck (see
// Recheck).
func waitDelete(ctx context.Context, c *clientv3.Client, sess *concurrency.Session, o *Options, myKey string, ahead []string, rev int64) (deleted bool, err error) {
	if o.beforeWatch != nil {
		o.beforeWatch(ahead, rev)
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	recheck := time.NewTimer(o.recheck)
	defer recheck.Stop()
	// The entries nearest ahead (up to watchNear of them; the whole line
	// beyond that), and our own entry, whose deletion (an eviction) is seen
	// at once, too.
	from := clientv3.WithRev(rev + 1)
	var chans []clientv3.WatchChan
	if len(ahead) <= watchNear {
		for _, k := range ahead {
			chans = append(chans, c.Watch(wctx, k, from, clientv3.WithFilterPut()))
		}
	} else {
		chans = append(chans, c.Watch(wctx, o.Key+"/", clientv3.WithPrefix(), from, clientv3.WithFilterPut()))
	}
	chans = append(chans, c.Watch(wctx, myKey, from, clientv3.WithFilterPut()))
	events := make(chan watchEvent, len(chans))
	for _, ch := range chans {
		go func() {
			for {
				select {
				case wr, ok := <-ch:
					select {
					case events <- watchEvent{wr, ok}:
					case <-wctx.Done():
						return
					}
					if !ok {
						return
					}
				case <-wctx.Done():
					return
				}
			}
		}()
	}
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-sess.Done():
			return false, errSessionLost
		case <-recheck.C:
			return false, nil
		case ev := <-events:
			wr, ok = ev.wr, ev.ok
		}
		if !ok {
			return false, errWatchClosed
		}
		if wr.CompactRevision != 0 {
			return false, errCompacted
		}
		if err := wr.Err(); err != nil {
			return false, err
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return true, nil
			}
		}
	}
}

// watchNear is how many entries ahead a waiter watches one by one; with a
// larger max_holders it watches the line.
const watchNear = 16

type watchEvent struct {
	wr clientv3.WatchResponse
	ok bool
}

// revoke revokes a lease with a fresh bounded context (the caller's may be
// cancelled); failure is harmless: the lease expires by itself.
func revoke(c *clientv3.Client, id clientv3.LeaseID, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := c.Revoke(ctx, id)
	return err
}
