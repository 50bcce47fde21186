package cluster

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// Keys under the namespace (docs/cluster-protocol.md).
const (
	nodesDir  = "nodes/"
	slotsDir  = "rebooting/"
	pauseName = "disable"
	leaseFile = "publish-lease"
)

func (s *session) nodeKey() string     { return s.ns + nodesDir + s.cfg.NodeName }
func (s *session) slotsPrefix() string { return s.ns + slotsDir }
func (s *session) slotKey() string     { return s.ns + slotsDir + s.cfg.NodeName }
func (s *session) pauseKey() string    { return s.ns + pauseName }
func (s *session) lockKey() string     { return lock.Key(s.cfg.LockKey, s.cfg.Group) }

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
		clientv3.OpGet(s.ns+nodesDir, clientv3.WithPrefix()),
		clientv3.OpGet(s.slotsPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(s.pauseKey()),
	).Commit()
	if err != nil {
		return v, s.etcdErr(ctx, "reading the cluster view under "+s.ns, err)
	}
	v.ReadAt = s.w.now().UTC()
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		name := strings.TrimPrefix(string(kv.Key), s.ns+nodesDir)
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
	for i := range v.Rebooting {
		if v.Rebooting[i].Group == anyGroup {
			v.Rebooting[i].Group = ""
		}
	}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
		v.Paused = parsePause(kvs[0].Value)
	}
	return v, nil
}

// parseSlots turns slot keys into slots. A slot whose value cannot be read
// still counts (named by its key, group unknown): a slot is never ignored.
func (s *session) parseSlots(ctx context.Context, kvs []*mvccpb.KeyValue, withTTL bool) []policy.Slot {
	slots := []policy.Slot{}
	for _, kv := range kvs {
		name := strings.TrimPrefix(string(kv.Key), s.slotsPrefix())
		var sl policy.Slot
		if err := json.Unmarshal(kv.Value, &sl); err != nil {
			s.log.Warn("reboot slot with an unreadable value counts for every group", "key", string(kv.Key), "error", err.Error())
			sl = policy.Slot{Group: anyGroup}
		}
		sl.Node = name
		if withTTL && kv.Lease != 0 {
			if ttl, err := s.client.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil {
				sl.TTLSec = ttl.TTL
			}
		}
		slots = append(slots, sl)
	}
	return slots
}

// anyGroup marks a slot whose group is unknown: it counts against every
// group's max_holders.
const anyGroup = "\x00any"

// parsePause reads the pause value; an unreadable value still pauses.
func parsePause(value []byte) *policy.Pause {
	var p policy.Pause
	if err := json.Unmarshal(value, &p); err == nil && p.Reason != "" {
		return &p
	}
	raw := oneLine(string(value), 120)
	if raw == "" {
		raw = "(empty)"
	}
	return &policy.Pause{Reason: "paused; the disable key holds no JSON reason: " + raw, By: p.By, Since: p.Since}
}

// presence is who counts against max_holders right now.
type presence struct {
	// Nodes are the distinct nodes holding a seat of this group's lock or a
	// reboot slot of this group, this node included, sorted.
	Nodes []string
	// Revision is the etcd revision both were read at.
	Revision int64
}

// present reads the lock's holders and the reboot slots at one revision and
// counts the distinct nodes among them, this node included. Slots of other
// groups do not count (each group has its own lock and max_holders); a slot
// whose group cannot be read counts.
func (s *session) present(ctx context.Context) (presence, error) {
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	info, err := lock.Entries(rctx, s.client, s.lockKey())
	if err != nil {
		if ctx.Err() != nil {
			return presence{}, s.etcdErr(ctx, "reading the lock holders", ctx.Err())
		}
		return presence{}, err
	}
	resp, err := s.client.Get(rctx, s.slotsPrefix(), clientv3.WithPrefix(), clientv3.WithRev(info.Revision))
	if err != nil {
		return presence{}, s.etcdErr(ctx, "reading the reboot slots", err)
	}
	set := map[string]bool{s.cfg.NodeName: true}
	for _, h := range info.Holders {
		who := h.Node
		if who == "" {
			// An entry without annotation (etcdctl lock): someone unknown.
			who = "entry " + h.Entry
		}
		set[who] = true
	}
	for _, sl := range s.parseSlots(rctx, resp.Kvs, false) {
		if sl.Group == s.cfg.Group || sl.Group == anyGroup {
			set[sl.Node] = true
		}
	}
	p := presence{Revision: info.Revision}
	for n := range set {
		p.Nodes = append(p.Nodes, n)
	}
	sort.Strings(p.Nodes)
	return p, nil
}

// oneLine flattens s to one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "..."
	}
	return s
}
