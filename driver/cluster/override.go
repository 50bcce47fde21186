package cluster

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// checkOverride refuses an override without a valid node or (when needed)
// a reason.
func checkOverride(step string, a protocol.OverrideArgs, withReason bool) error {
	if !config.ValidNodeName(a.Node) {
		return exitcode.Errorf(exitcode.Config, "crd-lock step %s: --node %q is not a node name: give the node_name of the node (as status lists it)", step, a.Node)
	}
	if withReason && strings.TrimSpace(a.Reason) == "" {
		return exitcode.Errorf(exitcode.Config, "crd-lock step %s: --reason is required: say why (it is shown in status and the node's logs)", step)
	}
	return nil
}

// known refuses an override of a node nothing in etcd knows — no health
// record, no reboot slot, no reboot in flight — unless --force: a typo
// would hold or request nothing and say it did.
func (s *session) known(ctx context.Context, step string, a protocol.OverrideArgs) error {
	if a.Force {
		return nil
	}
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	count := clientv3.WithCountOnly()
	resp, err := s.client.Txn(rctx).Then(
		clientv3.OpGet(slot.RecordKey(s.ns, a.Node), count),
		clientv3.OpGet(slot.Key(s.ns, a.Node), count),
		clientv3.OpGet(slot.InflightKey(s.ns, a.Node), count),
	).Commit()
	if err != nil {
		return s.etcdErr(ctx, "looking for node "+a.Node, err)
	}
	for _, r := range resp.Responses {
		if r.GetResponseRange().Count > 0 {
			return nil
		}
	}
	return exitcode.Errorf(exitcode.Config, "crd-lock step %s: no node %q is known under %s (no health record, no reboot slot): check the name against clusterrebootd status, or give --force for a node that has not published yet", step, a.Node, s.ns)
}

// overrideValue is an override's value as written.
type overrideValue struct {
	policy.Pause
	// Now: an emergency reboot request.
	Now bool `json:"now,omitempty"`
}

// putOverride writes key unless it exists (an existing one keeps its
// reason, author and time) and returns the override now in effect.
func (s *session) putOverride(ctx context.Context, key string, a protocol.OverrideArgs) (*policy.Override, bool, error) {
	o := policy.Override{Node: a.Node, Now: a.Now, Pause: policy.Pause{Reason: oneLine(a.Reason, 200), By: s.cfg.NodeName, Since: s.w.now().UTC()}}
	val, _ := json.Marshal(overrideValue{Pause: o.Pause, Now: a.Now})
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	resp, err := s.client.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return nil, false, s.etcdErr(ctx, "writing "+key, err)
	}
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			o = slot.ParseOverrides(strings.TrimSuffix(key, a.Node), kvs)[0]
		}
	} else {
		o.Revision = resp.Header.Revision
	}
	return &o, resp.Succeeded, nil
}

// hold keeps one node from rebooting (<ns>holds/<node>); the rest of the
// rollout goes on.
func (s *session) hold(ctx context.Context, a protocol.OverrideArgs, res *protocol.OverrideResult) error {
	res.Target = a.Node
	if err := checkOverride(protocol.StepHold, a, true); err != nil {
		return err
	}
	if a.Now {
		return exitcode.Errorf(exitcode.Config, "crd-lock step hold: --now is for request only")
	}
	if err := s.known(ctx, protocol.StepHold, a); err != nil {
		return err
	}
	key := slot.HoldKey(s.ns, a.Node)
	o, changed, err := s.putOverride(ctx, key, a)
	if err != nil {
		return err
	}
	res.Hold, res.Changed = o, changed
	s.log.Info("node held: it does not reboot until the hold is released", "event", "held", "key", key, "target", a.Node, "changed", changed, "reason", o.Reason)
	return nil
}

// releaseHold deletes one node's hold.
func (s *session) releaseHold(ctx context.Context, a protocol.OverrideArgs, res *protocol.OverrideResult) error {
	res.Target = a.Node
	if err := checkOverride(protocol.StepReleaseHold, a, false); err != nil {
		return err
	}
	key := slot.HoldKey(s.ns, a.Node)
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	resp, err := s.client.Delete(rctx, key)
	if err != nil {
		return s.etcdErr(ctx, "deleting "+key, err)
	}
	res.Changed = resp.Deleted > 0
	s.log.Info("node's hold released", "event", "hold_released", "key", key, "target", a.Node, "changed", res.Changed)
	return nil
}

// request asks one node to reboot at its next chance (<ns>requests/<node>),
// through the lock, windows and gates, although no detector says so. The
// node's completion after the reboot consumes it.
func (s *session) request(ctx context.Context, a protocol.OverrideArgs, res *protocol.OverrideResult) error {
	res.Target = a.Node
	if err := checkOverride(protocol.StepRequest, a, true); err != nil {
		return err
	}
	if err := s.known(ctx, protocol.StepRequest, a); err != nil {
		return err
	}
	key := slot.RequestKey(s.ns, a.Node)
	o, changed, err := s.putOverride(ctx, key, a)
	if err != nil {
		return err
	}
	res.Request, res.Changed = o, changed
	s.log.Info("reboot requested: the node reboots at its next chance", "event", "reboot_requested", "key", key, "target", a.Node, "changed", changed, "reason", o.Reason, "emergency", o.Now)
	return nil
}

// requestRevision is the reboot marker's extra field naming the revision of
// the operator's request this reboot carried out.
const requestRevision = protocol.MarkerRequestRevision

// consumeRequest deletes this node's reboot request after the reboot the
// marker records, if the marker carried one and the request did not change
// since (a newer request asks for another reboot).
func (s *session) consumeRequest(ctx context.Context, m reboot.Marker) {
	rev, err := strconv.ParseInt(m.Extra[requestRevision], 10, 64)
	if err != nil || rev <= 0 {
		return
	}
	key := slot.RequestKey(s.ns, s.cfg.NodeName)
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	resp, err := s.client.Txn(rctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		s.log.Warn("cannot consume the reboot request; the node may reboot for it again: delete the key with etcdctl", "event", "request_consume_failed", "key", key, "error", err.Error())
		return
	}
	s.log.Info("reboot request consumed", "event", "request_consumed", "key", key, "consumed", resp.Succeeded)
}

// consumeRequestAfterBoot consumes the reboot request the marker carried,
// once the boot id says the node rebooted.
func (s *session) consumeRequestAfterBoot(ctx context.Context) {
	m, err := reboot.ReadMarker(s.cfg.StateDir)
	if err != nil {
		return
	}
	if boot, _, err := s.w.ids(); err != nil || boot == m.BootID {
		return
	}
	s.consumeRequest(ctx, m)
}
