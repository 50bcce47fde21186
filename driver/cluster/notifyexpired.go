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
	"github.com/clusterrebootd/clusterrebootd/lib/slotnotify"
)

// A node that never comes back cannot say so: its in-flight record
// (slotnotify.Inflight) is what other nodes' publish looks at.

func (s *session) wantsExpiry() bool      { return s.cfg.Notifications.Wants(config.NotifySlotExpired) }
func (c *cycleRun) inflightLease() string { return fmt.Sprintf("%x", int64(c.slotLease)) }

// markInflight records this node's reboot as in flight (best effort: a
// failure only means a slot that expires goes unreported).
func (c *cycleRun) markInflight() {
	if !c.wantsExpiry() {
		return
	}
	rec := slotnotify.Inflight{Node: c.cfg.NodeName, Lease: c.inflightLease(), Since: c.w.now().UTC(), TTLSec: c.cfg.RebootSlotTTLSec, FencingToken: c.res.FencingToken}
	rctx, cancel := c.rpcCtx(c.uctx)
	defer cancel()
	if err := slotnotify.MarkInflight(rctx, c.client, c.ns, rec); err != nil {
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
	if err := slotnotify.ClearInflight(rctx, s.client, s.ns, s.cfg.NodeName); err != nil {
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
		clientv3.OpGet(slotnotify.InflightDir(s.ns), clientv3.WithPrefix()),
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
		var rec slotnotify.Inflight
		node := strings.TrimPrefix(string(kv.Key), slotnotify.InflightDir(s.ns))
		if json.Unmarshal(kv.Value, &rec) != nil || rec.Node != node {
			continue
		}
		if lease, ok := slots[node]; ok && fmt.Sprintf("%x", lease) == rec.Lease {
			continue // still in its slot
		}
		if s.w.now().Before(rec.Since.Add(time.Duration(rec.TTLSec) * time.Second)) {
			continue // its slot cannot have expired yet: freed, or being retaken
		}
		s.notifyOnce(ctx, slotnotify.OnceID(node, rec.Lease), notifyevents.Fields{Event: config.NotifySlotExpired, Node: node, FencingToken: rec.FencingToken,
			Slot: slot.Key(s.ns, node), Since: notifyevents.Stamp(rec.Since),
			Detail: fmt.Sprintf("%s did not come back within reboot_slot_ttl_sec (%d s); other nodes may reboot now", node, rec.TTLSec)})
		dctx, cancel := s.rpcCtx(ctx)
		_, _ = s.client.Txn(dctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).Commit()
		cancel()
	}
}
