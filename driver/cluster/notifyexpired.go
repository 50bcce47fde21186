package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/notifications"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slotnotify"
)

// A node that never comes back cannot say so: its in-flight record
// (lib/slot.Inflight, written with its slot by the admission, deleted with
// it by completion or abort) is what other nodes' publish looks at.

func (s *session) wantsExpiry() bool { return s.cfg.Notifications.Wants(config.NotifySlotExpired) }

// noticeExpiredSlots is publish's look at the reboots in flight: a record
// older than its slot's TTL whose slot is gone means the slot expired
// before its node completed. It sends slot_expired once per cluster and
// leaves the record alone: it is the failure budget's evidence.
func (s *session) noticeExpiredSlots(ctx context.Context) {
	if !s.wantsExpiry() {
		return
	}
	rctx, cancel := s.rpcCtx(ctx)
	resp, err := s.client.Txn(rctx).Then(
		clientv3.OpGet(slot.InflightDir(s.ns), clientv3.WithPrefix()),
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
	c := slot.Count{Rollout: slot.Rollout{}}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		c.Rollout.Inflight = append(c.Rollout.Inflight, slot.ParseInflight(s.ns, kv))
	}
	for _, rec := range c.Rollout.Inflight {
		if lease, ok := slots[rec.Node]; ok && fmt.Sprintf("%x", lease) == rec.Lease {
			continue // still in its slot
		}
		if s.w.now().Before(rec.Since.Add(time.Duration(rec.TTLSec) * time.Second)) {
			continue // its slot cannot have expired yet: freed, or being retaken
		}
		s.notifyOnce(ctx, slotnotify.OnceID(rec.Node, rec.Lease), notifications.Fields{Event: config.NotifySlotExpired, Node: rec.Node, FencingToken: rec.FencingToken,
			Slot: slot.Key(s.ns, rec.Node), Since: notifications.Stamp(rec.Since),
			Detail: fmt.Sprintf("%s did not come back within reboot_slot_ttl_sec (%d s); it counts against the rollout's failure budget", rec.Node, rec.TTLSec)})
	}
}
