package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/notifyevents"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// A node that never comes back cannot say so. While notifications are
// configured, a node that takes its slot also writes
// <ns>notified/inflight/<node> (on a lease of three slot TTLs, so that it
// cleans itself up); it deletes it when it completes or aborts, before it
// frees the slot. Any node's publish that finds an in-flight record whose
// slot is gone although reboot_slot_ttl_sec has passed sends slot_expired,
// once per cluster (notifyOnce), and deletes the record.

// inflight is the value of <ns>notified/inflight/<node>.
type inflight struct {
	Node         string    `json:"node"`
	Lease        string    `json:"lease_id"`
	Since        time.Time `json:"since"`
	TTLSec       int       `json:"ttl_sec"`
	FencingToken int64     `json:"fencing_token,omitempty"`
}

func inflightDir(ns string) string        { return notifiedDir(ns) + "inflight/" }
func inflightKey(ns, node string) string  { return inflightDir(ns) + node }
func (s *session) wantsExpiry() bool      { return s.cfg.Notifications.Wants(config.NotifySlotExpired) }
func (c *cycleRun) inflightLease() string { return fmt.Sprintf("%x", int64(c.slotLease)) }

// markInflight records this node's reboot as in flight (best effort: a
// failure only means a slot that expires goes unreported).
func (c *cycleRun) markInflight() {
	if !c.wantsExpiry() {
		return
	}
	rec := inflight{Node: c.cfg.NodeName, Lease: c.inflightLease(), Since: c.w.now().UTC(), TTLSec: c.cfg.RebootSlotTTLSec, FencingToken: c.res.FencingToken}
	val, _ := json.Marshal(rec)
	rctx, cancel := c.rpcCtx(c.uctx)
	defer cancel()
	lease, err := c.client.Grant(rctx, int64(3*c.cfg.RebootSlotTTLSec))
	if err == nil {
		_, err = c.client.Put(rctx, inflightKey(c.ns, c.cfg.NodeName), string(val), clientv3.WithLease(lease.ID))
	}
	if err != nil {
		c.log.Warn("cannot record the reboot as in flight; if its slot expires, no slot_expired notification is sent", "event", "notify_failed", "error", err.Error())
	}
}

// clearInflight deletes this node's in-flight record (its reboot completed
// or was aborted).
func (s *session) clearInflight(ctx context.Context) {
	if !s.wantsExpiry() {
		return
	}
	rctx, cancel := s.rpcCtx(context.WithoutCancel(ctx))
	defer cancel()
	if _, err := s.client.Delete(rctx, inflightKey(s.ns, s.cfg.NodeName)); err != nil {
		s.log.Warn("cannot delete the in-flight record; a false slot_expired may be sent", "event", "notify_failed", "error", err.Error())
	}
}

// noticeExpiredSlots is publish's look at the reboots in flight: a record
// older than its slot's TTL whose slot is gone means the slot expired
// before its node completed.
func (s *session) noticeExpiredSlots(ctx context.Context) {
	if !s.wantsExpiry() {
		return
	}
	rctx, cancel := s.rpcCtx(ctx)
	resp, err := s.client.Txn(rctx).Then(
		clientv3.OpGet(inflightDir(s.ns), clientv3.WithPrefix()),
		clientv3.OpGet(slot.Dir(s.ns), clientv3.WithPrefix()),
	).Commit()
	cancel()
	if err != nil {
		s.log.Debug("cannot read the reboots in flight", "error", err.Error())
		return
	}
	slots := map[string]int64{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		slots[strings.TrimPrefix(string(kv.Key), slot.Dir(s.ns))] = kv.Lease
	}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var rec inflight
		node := strings.TrimPrefix(string(kv.Key), inflightDir(s.ns))
		if json.Unmarshal(kv.Value, &rec) != nil || rec.Node != node {
			continue
		}
		if lease, ok := slots[node]; ok && fmt.Sprintf("%x", lease) == rec.Lease {
			continue // still in its slot
		}
		if s.w.now().Before(rec.Since.Add(time.Duration(rec.TTLSec) * time.Second)) {
			continue // its slot cannot have expired yet: freed, or being retaken
		}
		s.notifyOnce(ctx, node+"-"+rec.Lease, notifyevents.Fields{Event: config.NotifySlotExpired, Node: node, FencingToken: rec.FencingToken,
			Slot: slot.Key(s.ns, node), Since: notifyevents.Stamp(rec.Since),
			Detail: fmt.Sprintf("%s did not come back within reboot_slot_ttl_sec (%d s); other nodes may reboot now", node, rec.TTLSec)})
		dctx, cancel := s.rpcCtx(ctx)
		_, _ = s.client.Txn(dctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).Commit()
		cancel()
	}
}
