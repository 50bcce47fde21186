package crdlock

import (
	"context"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/silence"
	"github.com/clusterrebootd/clusterrebootd/lib/silence/record"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// The pipeline's silences (docs/silences.md), as the daemon's cluster step
// makes them: `crd-lock hold --reboot-slot` silences the node's alerts once
// it took the slot, before COMMAND; `crd-lock complete` expires them after
// the boot. A failure is logged and reported in the JSON; it stops COMMAND
// only with silences.required.

// slotEnd is when lease runs out (lib/slot Ends, as every entry point's
// silence computes it), bounded by the configuration's request timeout.
func slotEnd(ctx context.Context, client *clientv3.Client, lease clientv3.LeaseID, ttl time.Duration, rpc time.Duration) time.Time {
	return slot.Ends(ctx, client, lease, ttl, rpc, time.Now)
}

// silence creates (or updates) the node's silence for the slot just taken.
func (r *rebootSlot) silence(ctx context.Context, cfg config.Config, token int64) error {
	n, err := silence.FromConfig(cfg)
	if n == nil && err == nil {
		return nil
	}
	r.silences = &protocol.SilenceReport{}
	errs := []error{err}
	if err == nil {
		rec, e := n.Ensure(ctx, silence.Slot{Key: r.held.Key, FencingToken: token, EndsAt: slotEnd(ctx, r.client, r.lease, r.fleet.TTL, r.fleet.RPCTimeout)})
		r.silences.IDs, errs = rec.IDs(), e
		if len(rec.Silences) > 0 {
			r.log.Info("alerts of this node silenced while it reboots", "silence_ids", strings.Join(r.silences.IDs, ","))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	r.silences.CreateFailures, r.silences.Errors = len(errs), errorLines(errs)
	why := strings.Join(r.silences.Errors, "; ")
	if err == nil && !n.Required {
		r.log.Warn("the silence could not be created; COMMAND runs anyway (silences.required is false)", "error", why)
		return nil
	}
	r.notes.silenceFailed()
	r.free()
	return exitcode.Errorf(exitcode.RebootFailed, "crd-lock: hold --reboot-slot: silences.required is true and the silence could not be created: %s; "+
		"COMMAND was not run and the slot is freed: bring the Alertmanager back or set silences.required to false", why)
}

// extendSilence moves the silence's end to the renewed slot's.
func (r *rebootSlot) extendSilence() {
	if r.sil == nil {
		return
	}
	if _, errs := r.sil.Extend(context.Background(), silence.Slot{EndsAt: slotEnd(context.Background(), r.client, r.lease, r.fleet.TTL, r.fleet.RPCTimeout)}); len(errs) > 0 {
		r.log.Warn("the silence could not be extended with the reboot slot; it ends a little earlier", "error", strings.Join(errorLines(errs), "; "))
	}
}

// expireSilences ends the recorded silences when the slot is freed without
// a reboot.
func (r *rebootSlot) expireSilences() {
	if _, ok, _ := record.ReadRecord(r.stateDir); ok {
		expireSilences(context.Background(), r.sil, r.stateDir, r.log, "the reboot was called off")
	}
}

// expireSilences ends the silences recorded in stateDir; a failure is
// logged and reported: the silence ends by itself.
func expireSilences(ctx context.Context, n *silence.Node, stateDir string, log *slog.Logger, why string) *protocol.SilenceReport {
	if _, ok, _ := record.ReadRecord(stateDir); !ok {
		return nil
	}
	expired, errs := n.Expire(ctx, stateDir)
	rep := &protocol.SilenceReport{Expired: len(expired), ExpireFailures: len(errs), Errors: errorLines(errs)}
	if len(expired) > 0 {
		log.Info("silence expired: "+why, "silences", len(expired))
	}
	if len(errs) > 0 {
		log.Warn("the silence could not be expired; it ends by itself with the slot's lease", "error", strings.Join(rep.Errors, "; "))
	}
	return rep
}

// completeSilences is `crd-lock complete`'s part: expire the silences once
// the slot is freed, or, with --keep, extend them with the renewed slot.
func completeSilences(ctx context.Context, cfg config.Config, client *clientv3.Client, lease clientv3.LeaseID, keep bool, log *slog.Logger) *protocol.SilenceReport {
	n, _ := silence.FromConfig(cfg)
	if !keep {
		return expireSilences(ctx, n, cfg.StateDir, log, "the node is back and its reboot slot is freed")
	}
	if _, ok, _ := record.ReadRecord(cfg.StateDir); !ok || n == nil {
		return nil
	}
	rec, errs := n.Extend(ctx, silence.Slot{EndsAt: slotEnd(ctx, client, lease, time.Duration(cfg.RebootSlotTTLSec)*time.Second, time.Duration(max(cfg.EtcdDialTimeoutSec, 1))*time.Second)})
	rep := &protocol.SilenceReport{IDs: rec.IDs(), CreateFailures: len(errs), Errors: errorLines(errs)}
	if len(errs) > 0 {
		log.Warn("the silence could not be extended with the kept reboot slot; it ends by itself", "error", strings.Join(rep.Errors, "; "))
	}
	return rep
}

func errorLines(errs []error) []string {
	var out []string
	for _, e := range errs {
		if e != nil {
			out = append(out, e.Error())
		}
	}
	return out
}
