package lock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
)

// Status reads the holders and the waiters (in the order they will get the
// lock) of key, with each lease's remaining TTL. An entry without a JSON
// annotation (written by `etcdctl lock`) shows only its lease; it counts
// with max_holders 1. It is for people: the TTLs cost one lookup per entry,
// made a few at a time; one that fails leaves TTLUnknown.
func Status(ctx context.Context, c *clientv3.Client, key string) (lockinfo.Info, error) {
	info, err := Entries(ctx, c, key)
	if err != nil {
		return info, err
	}
	all := make([]*lockinfo.Entry, 0, len(info.Holders)+len(info.Waiters))
	for i := range info.Holders {
		all = append(all, &info.Holders[i])
	}
	for i := range info.Waiters {
		all = append(all, &info.Waiters[i])
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, ttlLookups)
	for _, e := range all {
		id, err := ParseLeaseID(e.LeaseID)
		if err != nil || id == 0 {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if ttl, err := c.TimeToLive(ctx, id); err == nil {
				e.TTLRemainingSec = ttl.TTL
			}
		}()
	}
	wg.Wait()
	return info, nil
}

// ttlLookups is how many TimeToLive requests Status has in flight at once.
const ttlLookups = 16

// Entries is Status without the TTLs (TTLUnknown): one read, whatever the
// length of the queue. The cluster steps use it under the lock, where a
// lookup per waiter could outlast the request's deadline with a long queue.
func Entries(ctx context.Context, c *clientv3.Client, key string) (lockinfo.Info, error) {
	info := lockinfo.Info{Key: key, Holders: []lockinfo.Entry{}, Waiters: []lockinfo.Entry{}}
	resp, err := c.Get(ctx, key+"/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return info, exitcode.Errorf(exitcode.EtcdUnavailable, "lock: reading %s from etcd at %s: %v", key, strings.Join(c.Endpoints(), ","), err)
	}
	info.Revision = resp.Header.Revision
	position, limit := 0, 0
	for _, kv := range resp.Kvs {
		if !IsEntry(key, string(kv.Key)) {
			continue
		}
		e := lockinfo.Entry{Entry: string(kv.Key), FencingToken: kv.CreateRevision, LeaseID: strconv.FormatInt(kv.Lease, 16), TTLRemainingSec: lockinfo.TTLUnknown,
			Annotation: lockinfo.ParseAnnotation(kv.Value)}
		// Each contender holds while its position is below the smallest
		// max_holders of its own and of every entry ahead (Acquire's rule),
		// so the holders are a prefix of the line.
		if limit == 0 || e.MaxHolders < limit {
			limit = e.MaxHolders
		}
		if position < limit && len(info.Waiters) == 0 {
			info.Holders = append(info.Holders, e)
		} else {
			info.Waiters = append(info.Waiters, e)
		}
		position++
	}
	return info, nil
}

// ParseLeaseID parses a lease ID in hex (as in entries and LEASE_ID).
func ParseLeaseID(s string) (clientv3.LeaseID, error) {
	v, err := strconv.ParseInt(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("lock: lease id %q is not hex: %w", s, err)
	}
	return clientv3.LeaseID(v), nil
}

// Evict removes every entry of key whose annotation names node, holders and
// waiters alike, and returns them. A holder's lease is revoked: that deletes
// the entry and every other key the lease carries, and a still-running
// holder notices at once and stops. A waiter's entry alone is deleted: its
// lease lives on, which is how the waiter tells an eviction from a lost
// lease; it stops with ErrEvicted instead of queueing again. An entry
// without a lease is deleted. It is the runbook's answer to a lock that
// hangs.
func Evict(ctx context.Context, c *clientv3.Client, key, node string) ([]lockinfo.Entry, error) {
	info, err := Entries(ctx, c, key)
	if err != nil {
		return nil, err
	}
	evicted := []lockinfo.Entry{}
	for i, e := range append(info.Holders, info.Waiters...) {
		if e.Node != node {
			continue
		}
		if err := remove(ctx, c, e, i >= len(info.Holders)); err != nil {
			return evicted, err
		}
		evicted = append(evicted, e)
	}
	return evicted, nil
}

// EvictLeaseless deletes every entry of key that has no lease. No process of
// lib/lock or `etcdctl lock` writes one, nothing ever expires it, and it
// blocks the line for ever (an `etcdctl put` by hand, a restored backup).
func EvictLeaseless(ctx context.Context, c *clientv3.Client, key string) ([]lockinfo.Entry, error) {
	info, err := Entries(ctx, c, key)
	if err != nil {
		return nil, err
	}
	evicted := []lockinfo.Entry{}
	for _, e := range append(info.Holders, info.Waiters...) {
		if e.LeaseID != "0" {
			continue
		}
		if err := remove(ctx, c, e, false); err != nil {
			return evicted, err
		}
		evicted = append(evicted, e)
	}
	return evicted, nil
}

// remove deletes one entry: by revoking its lease (a holder), or by deleting
// the entry itself (a waiter, or an entry without a lease), only if it is
// still the same entry (its create revision).
func remove(ctx context.Context, c *clientv3.Client, e lockinfo.Entry, waiter bool) error {
	id, err := ParseLeaseID(e.LeaseID)
	if err != nil {
		return exitcode.New(exitcode.Internal, err)
	}
	if id == 0 || waiter {
		_, err = c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(e.Entry), "=", e.FencingToken)).
			Then(clientv3.OpDelete(e.Entry)).Commit()
	} else {
		_, err = c.Revoke(ctx, id)
	}
	if err != nil {
		return exitcode.Errorf(exitcode.EtcdUnavailable, "lock: evicting %s (lease %s) at %s: %v", e.Entry, e.LeaseID, strings.Join(c.Endpoints(), ","), err)
	}
	return nil
}
