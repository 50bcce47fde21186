// Package slotnotify holds the notifications of a reboot slot's life that
// the daemon's cluster child (driver/cluster) and the shell pipeline
// (`crd-lock hold --reboot-slot`, `crd-lock complete`) both send: one
// sender per step with the node's fields filled in, the once-per-cluster
// record in etcd, the in-flight record of a reboot, and the fields of
// reboot_completed and slot_expired. Only programs that link
// lib/notifications (net/http) import it.
package slotnotify

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/notifications"
)

// Dir is where once-per-cluster notifications are recorded:
// <ns>notified/<event>/<id>, created only if absent, on a lease of
// OnceTTLSec (the record only has to outlive the condition it reports).
func Dir(ns string) string { return ns + "notified/" }

// OnceKey is the record of event id in Dir.
func OnceKey(ns, event, id string) string { return Dir(ns) + event + "/" + id }

// OnceID names one slot of one node: node-<lease in hex>.
func OnceID(node, lease string) string { return node + "-" + lease }

// OnceTTLSec is the lifetime of a once-per-cluster record.
const OnceTTLSec = 24 * 3600

// Sender queues the notifications of one step about one node: Send fills
// in the node, group, lock and time, and returns at once. Wait, when the
// step's work is done, gives the queue at most notifications.timeout_sec
// more.
type Sender struct {
	cfg               config.Notifications
	node, group, lock string
	now               func() time.Time
	log               *slog.Logger
	// n is started by the first Send (nil until then).
	n *notifications.Sender
}

// NewSender is the sender of node cfg.NodeName on lock (its group's key).
func NewSender(cfg config.Config, lock string, now func() time.Time, log *slog.Logger) *Sender {
	return &Sender{cfg: cfg.Notifications, node: cfg.NodeName, group: cfg.Group, lock: lock, now: now, log: log}
}

// Enabled reports whether any destination is configured.
func (s *Sender) Enabled() bool { return s != nil && s.cfg.Enabled() }

// Wants reports whether event is sent anywhere.
func (s *Sender) Wants(event string) bool { return s != nil && s.cfg.Wants(event) }

// Send queues f (with this node's defaults where f leaves them empty) when
// its event is configured; it never waits for a destination.
func (s *Sender) Send(f notifications.Fields) {
	if !s.Wants(f.Event) {
		return
	}
	if s.n == nil {
		s.n = notifications.New(s.cfg, s.log.With("component", "notify"))
	}
	if f.Node == "" {
		f.Node = s.node
	}
	if f.Group == "" {
		f.Group = s.group
	}
	if f.Lock == "" {
		f.Lock = s.lock
	}
	f.Time = notifications.Stamp(s.now())
	s.n.Send(f)
}

// Once sends f only if no node sent it before: the node whose transaction
// creates OnceKey(ns, f.Event, id) sends. An etcd failure sends nothing (at
// most once). Each request is bounded by rpc.
func (s *Sender) Once(ctx context.Context, client *clientv3.Client, ns, id string, rpc time.Duration, f notifications.Fields) {
	if !s.Wants(f.Event) {
		return
	}
	key := OnceKey(ns, f.Event, id)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rpc)
	defer cancel()
	created, err := ClaimOnce(rctx, client, key, s.node, s.now())
	switch {
	case err != nil:
		s.log.Warn("cannot record a once-per-cluster notification; not sent", "event", "notify_failed", "notification", f.Event, "key", key, "error", err.Error())
	case !created:
		s.log.Debug("notification already sent by another node", "notification", f.Event, "key", key)
	default:
		s.Send(f)
	}
}

// ClaimOnce creates key unless it exists, on a lease of OnceTTLSec, and
// reports whether this call created it.
func ClaimOnce(ctx context.Context, client *clientv3.Client, key, by string, at time.Time) (bool, error) {
	lease, err := client.Grant(ctx, OnceTTLSec)
	if err != nil {
		return false, err
	}
	val, _ := json.Marshal(map[string]string{"by": by, "at": notifications.Stamp(at)})
	resp, err := client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease.ID))).Commit()
	if err != nil || !resp.Succeeded {
		_, _ = client.Revoke(ctx, lease.ID)
		return false, err
	}
	return true, nil
}

// Wait lets what is queued go out for at most one more timeout and returns
// what became of it; ok is false when nothing was sent (no report).
func (s *Sender) Wait() (rep notifications.Report, ok bool) {
	if s == nil || s.n == nil {
		return rep, false
	}
	return s.n.Wait(), true
}
