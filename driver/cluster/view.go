package cluster

import (
	"context"
	"encoding/json"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// leaseFile, in run_dir, keeps the publish lease's ID across runs.
const leaseFile = "publish-lease"

func (s *session) nodeKey() string     { return slot.RecordsDir(s.ns) + s.cfg.NodeName }
func (s *session) slotsPrefix() string { return slot.Dir(s.ns) }
func (s *session) slotKey() string     { return slot.Key(s.ns, s.cfg.NodeName) }
func (s *session) pauseKey() string    { return slot.PauseKey(s.ns) }
func (s *session) lockKey() string     { return s.cfg.LockKeyForGroup() }

func emptyView() policy.View {
	return policy.View{Nodes: []policy.NodeRecord{}, Rebooting: []policy.Slot{}}
}

// readView reads the health records, the reboot slots (with their leases'
// remaining TTL) and the pause key in one transaction, so they are
// consistent with each other.
func (s *session) readView(ctx context.Context) (policy.View, error) {
	v := emptyView()
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	resp, err := s.client.Txn(rctx).Then(
		clientv3.OpGet(slot.RecordsDir(s.ns), clientv3.WithPrefix()),
		clientv3.OpGet(s.slotsPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(s.pauseKey()),
		clientv3.OpGet(slot.HoldsDir(s.ns), clientv3.WithPrefix()),
		clientv3.OpGet(slot.RequestsDir(s.ns), clientv3.WithPrefix()),
		slot.HaltOps(s.ns)[0], slot.HaltOps(s.ns)[1],
	).Commit()
	if err != nil {
		return v, s.etcdErr(ctx, "reading the cluster view under "+s.ns, err)
	}
	v.ReadAt = s.w.now().UTC()
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		name := strings.TrimPrefix(string(kv.Key), slot.RecordsDir(s.ns))
		var rec policy.NodeRecord
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			s.log.Warn("ignoring an unreadable health record", "key", string(kv.Key), "error", err.Error())
			continue
		}
		// The key names the node; a record cannot speak for another.
		rec.Node = name
		v.Nodes = append(v.Nodes, rec)
	}
	v.Rebooting = s.parseSlots(rctx, resp.Responses[1].GetResponseRange().Kvs, true)
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
		v.Paused = parsePause(kvs[0].Value)
	}
	v.Holds = parseOverrides(slot.HoldsDir(s.ns), resp.Responses[3].GetResponseRange().Kvs)
	v.Requests = parseOverrides(slot.RequestsDir(s.ns), resp.Responses[4].GetResponseRange().Kvs)
	v.Halted = haltOf(slot.ParseHalts(resp.Responses[5:]), s.cfg.Group)
	return v, nil
}

// haltOf is the halt that stops this node's group as the view shows it
// (nil: none); an unreadable one halts the fleet.
func haltOf(halts []slot.Halt, group string) *policy.Pause {
	h := (slot.Rollout{Halts: halts}).HaltOf(group)
	if h == nil {
		return nil
	}
	return &policy.Pause{Reason: h.Reason, By: h.By, Since: h.Since, V: h.V}
}

// parseOverrides reads holds or requests under dir (lib/slot).
func parseOverrides(dir string, kvs []*mvccpb.KeyValue) []policy.Override {
	return slot.ParseOverrides(dir, kvs)
}

// parseSlots turns slot keys into slots (lib/slot.Parse: the key names the
// node). A slot whose value cannot be read is still listed.
func (s *session) parseSlots(ctx context.Context, kvs []*mvccpb.KeyValue, withTTL bool) []policy.Slot {
	slots := []policy.Slot{}
	for _, kv := range kvs {
		p := slot.Parse(s.ns, string(kv.Key), kv.Value, kv.Lease, kv.ModRevision)
		if !p.Bound {
			s.log.Warn("reboot slot without a lock or group in its value counts for every lock and group", "key", string(kv.Key))
		}
		sl := p.Policy()
		if withTTL && kv.Lease != 0 {
			if ttl, err := s.client.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil {
				sl.TTLSec = ttl.TTL
			}
		}
		slots = append(slots, sl)
	}
	return slots
}

// parsePause reads the pause value; an unreadable value still pauses.
func parsePause(value []byte) *policy.Pause { return slot.ParsePause(value) }

// oneLine flattens s to one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "..."
	}
	return s
}
