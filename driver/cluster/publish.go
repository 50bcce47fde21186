package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/clusterrebootd/clusterrebootd/lib/atomicfile"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/version"
)

// validStates are the states a node may publish.
func validStates() []string {
	return []string{policy.StateIdle, policy.StateNeedsReboot, policy.StateBlocked,
		policy.StateWaiting, policy.StateRebooting, policy.StatePostReboot}
}

// publish writes this node's health record on the publish lease and reads
// the view back.
func (s *session) publish(ctx context.Context, a driver.PublishArgs, res *driver.PublishResult) error {
	if !slices.Contains(validStates(), a.State) {
		return exitcode.Errorf(exitcode.Config, "crd-lock step publish: --state %q: use one of %s", a.State, strings.Join(validStates(), ", "))
	}
	if a.LastCheck.IsZero() {
		a.LastCheck = s.w.now()
	}
	rec := policy.NodeRecord{
		Node: s.cfg.NodeName, State: a.State, Reason: oneLine(a.Detail, 200), RebootRequired: a.RebootRequired,
		LastCheck: a.LastCheck.UTC(), Group: s.cfg.Group, Version: version.Get().Version,
	}
	val, _ := json.Marshal(rec)
	id, old, err := s.publishLease(ctx)
	if err != nil {
		return err
	}
	rctx, cancel := s.rpcCtx(ctx)
	_, err = s.client.Put(rctx, s.nodeKey(), string(val), clientv3.WithLease(id))
	cancel()
	if err != nil {
		return s.etcdErr(ctx, "writing the health record "+s.nodeKey(), err)
	}
	if old != 0 {
		// The record moved to the new lease; the old one carries nothing now.
		fctx, cancel := s.fresh()
		_, _ = s.client.Revoke(fctx, old)
		cancel()
	}
	s.log.Debug("health record published", "event", "published", "key", s.nodeKey(), "lease_id", fmt.Sprintf("%x", id), "state", a.State)
	v, err := s.readView(ctx)
	if err != nil {
		return err
	}
	res.View = v
	return nil
}

// publishLease returns the lease the record lives on: the one remembered in
// run_dir/publish-lease, renewed once, or a new one when it expired (or its
// TTL no longer matches 3 × health_publish_interval_sec; then old is the
// lease to revoke once the record has moved). A lease is never granted per
// publish: records would pile up leases in etcd.
func (s *session) publishLease(ctx context.Context) (id, old clientv3.LeaseID, err error) {
	ttl := int64(3 * s.cfg.HealthPublishIntervalSec)
	path := filepath.Join(s.cfg.RunDir, leaseFile)
	if b, rerr := os.ReadFile(path); rerr == nil {
		if prev, perr := lock.ParseLeaseID(strings.TrimSpace(string(b))); perr == nil && prev != 0 {
			rctx, cancel := s.rpcCtx(ctx)
			ka, kerr := s.client.KeepAliveOnce(rctx, prev)
			cancel()
			switch {
			case kerr == nil && ka.TTL == ttl:
				return prev, 0, nil
			case kerr == nil:
				s.log.Info("publish lease TTL changed; granting a new lease", "lease_id", fmt.Sprintf("%x", prev), "ttl_sec", ka.TTL, "want_ttl_sec", ttl)
				old = prev
			case errors.Is(kerr, rpctypes.ErrLeaseNotFound):
				s.log.Info("publish lease expired; granting a new one", "lease_id", fmt.Sprintf("%x", prev))
			default:
				return 0, 0, s.etcdErr(ctx, "renewing the publish lease", kerr)
			}
		}
	}
	rctx, cancel := s.rpcCtx(ctx)
	grant, err := s.client.Grant(rctx, ttl)
	cancel()
	if err != nil {
		return 0, 0, s.etcdErr(ctx, "granting the publish lease", err)
	}
	if werr := writeFileAtomic(path, []byte(fmt.Sprintf("%x\n", grant.ID))); werr != nil {
		// The record is still published; without the file the next run
		// grants another lease, and this one expires after 3 intervals.
		s.log.Warn("cannot remember the publish lease; check run_dir", "event", "publish_lease_unsaved", "file", path, "error", werr.Error())
	}
	return grant.ID, old, nil
}

// writeFileAtomic creates path's directory if needed and writes data
// atomically (lib/atomicfile).
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o600)
}

// complete deletes this node's reboot slot (and its lease).
func (s *session) complete(ctx context.Context, res *driver.CompleteResult) error {
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	resp, err := s.client.Delete(rctx, s.slotKey(), clientv3.WithPrevKV())
	if err != nil {
		return s.etcdErr(ctx, "deleting the reboot slot "+s.slotKey(), err)
	}
	res.Freed = resp.Deleted > 0
	if len(resp.PrevKvs) > 0 && resp.PrevKvs[0].Lease != 0 {
		// The slot lease carries nothing else; let it go now.
		_, _ = s.client.Revoke(rctx, clientv3.LeaseID(resp.PrevKvs[0].Lease))
	}
	s.log.Info("reboot slot freed", "event", "slot_freed", "key", s.slotKey(), "freed", res.Freed)
	return nil
}

// keepSlot renews this node's reboot slot while it is back but failing its
// post-reboot checks: the slot, granted before the reboot, would otherwise
// run out and let the next node follow one that is not healthy again. A
// slot that already expired is not re-taken (that needs the lock).
func (s *session) keepSlot(ctx context.Context, res *driver.CompleteResult) error {
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	resp, err := s.client.Get(rctx, s.slotKey())
	if err != nil {
		return s.etcdErr(ctx, "reading the reboot slot "+s.slotKey(), err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].Lease == 0 {
		s.log.Warn("no reboot slot left to keep: it expired while the node was down; other nodes may reboot",
			"event", "slot_gone", "key", s.slotKey(), "slot_ttl_sec", s.cfg.RebootSlotTTLSec)
		return nil
	}
	ka, err := s.client.KeepAliveOnce(rctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	if err != nil {
		return s.etcdErr(ctx, "renewing the reboot slot "+s.slotKey(), err)
	}
	res.Kept = ka.TTL > 0
	s.log.Info("reboot slot kept while the post-reboot checks fail", "event", "slot_kept", "key", s.slotKey(), "ttl_sec", ka.TTL)
	return nil
}

// status reads the view and the lock of this node's group.
func (s *session) status(ctx context.Context, res *driver.StatusResult) error {
	v, err := s.readView(ctx)
	if err != nil {
		return err
	}
	res.View = v
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	info, err := lock.Status(rctx, s.client, s.lockKey())
	if err != nil {
		return err
	}
	res.Lock = driver.LockStatus{Key: info.Key, Revision: info.Revision, Holders: lockEntries(info.Holders), Waiters: lockEntries(info.Waiters)}
	return nil
}

func lockEntries(es []lock.Entry) []driver.LockEntry {
	out := make([]driver.LockEntry, 0, len(es))
	for _, e := range es {
		out = append(out, driver.LockEntry{Entry: e.Entry, Node: e.Node, LeaseID: e.LeaseID, FencingToken: e.FencingToken,
			TTLRemainingSec: e.TTLRemainingSec, QueuedAt: e.QueuedAt, AcquiredAt: e.AcquiredAt})
	}
	return out
}

// pause sets the cluster-wide kill switch unless it is already set (an
// existing pause keeps its reason, author and time).
func (s *session) pause(ctx context.Context, a driver.PauseArgs, res *driver.PauseResult) error {
	if strings.TrimSpace(a.Reason) == "" {
		return exitcode.Errorf(exitcode.Config, "crd-lock step pause: --reason is required: say why reboots stop (it is shown to every node)")
	}
	p := policy.Pause{Reason: oneLine(a.Reason, 200), By: s.cfg.NodeName, Since: s.w.now().UTC()}
	val, _ := json.Marshal(p)
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	resp, err := s.client.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(s.pauseKey()), "=", 0)).
		Then(clientv3.OpPut(s.pauseKey(), string(val))).
		Else(clientv3.OpGet(s.pauseKey())).Commit()
	if err != nil {
		return s.etcdErr(ctx, "writing "+s.pauseKey(), err)
	}
	res.Changed = resp.Succeeded
	res.Paused = &p
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			res.Paused = parsePause(kvs[0].Value)
		}
	}
	s.log.Info("cluster reboots paused", "event", "paused", "key", s.pauseKey(), "changed", res.Changed, "reason", res.Paused.Reason)
	return nil
}

// resume deletes the cluster-wide kill switch.
func (s *session) resume(ctx context.Context, res *driver.PauseResult) error {
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	resp, err := s.client.Delete(rctx, s.pauseKey())
	if err != nil {
		return s.etcdErr(ctx, "deleting "+s.pauseKey(), err)
	}
	res.Changed = resp.Deleted > 0
	s.log.Info("cluster reboots resumed", "event", "resumed", "key", s.pauseKey(), "changed", res.Changed)
	return nil
}
