package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// failure records a failure of this node against the rollout's failure
// budget (docs/rollout.md): once per node, kind and start. A failure of
// this boot's reboot replaces its in-flight record, which would not count:
// the node's own record names the boot it was taken in.
func (s *session) failure(ctx context.Context, a protocol.FailureArgs, res *protocol.FailureResult) error {
	if !slices.Contains([]string{slot.FailureRebootCommand, slot.FailureRebootLoop}, a.Kind) {
		return exitcode.Errorf(exitcode.Config, "crd-lock step failure: --kind %q: use %s or %s", a.Kind, slot.FailureRebootCommand, slot.FailureRebootLoop)
	}
	if a.Since.IsZero() {
		a.Since = s.w.now()
	}
	id := fmt.Sprintf("%s-%d", a.Kind, a.Since.Unix())
	return s.recordFailure(ctx, a.Kind, oneLine(a.Detail, 300), id, res)
}

// recordFailure writes the failure record id of kind for this node (lib/slot
// RecordFailure) and drops this boot's in-flight record.
func (s *session) recordFailure(ctx context.Context, kind, detail, id string, res *protocol.FailureResult) error {
	rctx, cancel := context.WithTimeout(ctx, 3*s.rpc)
	defer cancel()
	f := slotinfo.Failure{Node: s.cfg.NodeName, Group: s.cfg.Group, Wave: s.cfg.Rollout.Wave, Kind: kind, Detail: detail, At: s.w.now().UTC()}
	recorded, err := slot.RecordFailure(rctx, s.client, s.ns, f, id, s.cfg.Rollout.FailureWindowSec)
	if err != nil {
		return s.etcdErr(ctx, "recording the failure under "+slot.FailuresDir(s.ns), err)
	}
	res.Recorded, res.Key = recorded, slot.FailureKey(s.ns, s.cfg.NodeName, id)
	if boot, _, berr := s.w.ids(); berr == nil {
		key := slot.InflightKey(s.ns, s.cfg.NodeName)
		if r, gerr := s.client.Get(rctx, key); gerr == nil && len(r.Kvs) > 0 {
			if in := slot.ParseInflight(s.ns, r.Kvs[0]); in.BootID == boot {
				_, _ = s.client.Txn(rctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", r.Kvs[0].ModRevision)).Then(clientv3.OpDelete(key)).Commit()
			}
		}
	}
	if recorded {
		s.log.Error("recorded a failure against the rollout's failure budget: "+detail, "event", "failure_recorded", "kind", kind, "key", res.Key)
	}
	return nil
}

// postRebootOverdue is PostRebootOverdue for this step.
func (s *session) postRebootOverdue(ctx context.Context, cl slot.Claim) {
	rctx, cancel := context.WithTimeout(ctx, 3*s.rpc)
	defer cancel()
	PostRebootOverdue(rctx, s.client, s.cfg, cl, s.w.now(), s.log)
}

// PostRebootOverdue records the post_reboot failure of a node back from
// its reboot whose post-reboot checks have kept failing for longer than
// rollout.post_reboot_timeout_sec (counted from its reboot command, as the
// marker in state_dir says): once per reboot. It keeps its slot all the
// same. The daemon's complete --keep and the pipeline's `crd-lock complete
// --keep` call it.
func PostRebootOverdue(ctx context.Context, client *clientv3.Client, cfg config.Config, cl slot.Claim, now time.Time, log *slog.Logger) {
	m, err := reboot.ReadMarker(cfg.StateDir)
	since := m.RequestedAt
	if err != nil {
		// The pipeline's COMMAND need not be crd-reboot: the slot's take.
		t, perr := time.Parse(time.RFC3339Nano, cl.Since)
		if perr != nil {
			return
		}
		since = t
	}
	timeout := time.Duration(cfg.Rollout.PostRebootTimeoutSec) * time.Second
	if timeout <= 0 || now.Sub(since) < timeout {
		return
	}
	f := slotinfo.Failure{Node: cfg.NodeName, Group: cfg.Group, Wave: cfg.Rollout.Wave, Kind: slot.FailurePostReboot, At: now.UTC(),
		Detail: fmt.Sprintf("back since its reboot at %s, but its post-reboot checks kept failing for longer than rollout.post_reboot_timeout_sec (%d s)",
			since.UTC().Format(time.RFC3339), cfg.Rollout.PostRebootTimeoutSec)}
	recorded, err := slot.RecordFailure(ctx, client, cfg.Namespace(), f, strings.TrimSpace(cl.Lease)+"-post_reboot", cfg.Rollout.FailureWindowSec)
	switch {
	case err != nil:
		log.Warn("cannot record the post-reboot failure against the rollout's failure budget", "event", "failure_record_failed", "error", err.Error())
	case recorded:
		log.Error("recorded a failure against the rollout's failure budget: "+f.Detail, "event", "failure_recorded", "kind", f.Kind)
	}
}
