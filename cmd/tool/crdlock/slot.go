package crdlock

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/cluster"
	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
	"github.com/clusterrebootd/clusterrebootd/lib/silence"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// rebootSlot is `crd-lock hold --reboot-slot`: the seat becomes this node's
// reboot slot through the one admission point (lib/slot.Admission, the
// daemon's own), so a node rebooted by the shell pipeline obeys every fleet
// rule and stays counted from the lock until `crd-lock complete` after its
// boot, and daemons and pipelines on one lock count each other.
type rebootSlot struct {
	fleet    slot.Fleet
	client   *clientv3.Client
	stateDir string
	lease    clientv3.LeaseID
	leases   slot.Leases
	held     *slot.Reboot
	takenAt  time.Time
	log      *slog.Logger
	// sil is this node's configured silence (nil: none), silences what
	// hold reports of it (slotsilence.go).
	sil      *silence.Node
	silences *protocol.SilenceReport
	// notes are hold's notifications (pipelinenotify.go).
	notes *pipelineNotes
	// cfg is the configuration (the windows of the start gate); request
	// the operator's reboot request of this node the admission read (nil:
	// none; an emergency one is not held to the windows).
	cfg     config.Config
	request *policy.Override
}

// takeRebootSlot admits this node's reboot slot under held: every fleet
// rule of the admission (pause, hold, failure budget, waves, policies,
// budgets, pacing) and, before the take and after every wait, the
// node-local checks the daemon runs under its lock (cluster.LocalChecks:
// kill switch, windows, detectors, the under-lock gate), from the same
// configuration: a pipeline that waited in line past its window's end never
// reboots. ctx ends a wait (--timeout, a signal); a lost seat ends it too.
func takeRebootSlot(ctx context.Context, client *clientv3.Client, cfg config.Config, held *lock.Held, bootID, machineID string, logger *slog.Logger, notes *pipelineNotes) (*rebootSlot, error) {
	if bootID == "" {
		return nil, exitcode.Errorf(exitcode.RebootFailed, "crd-lock: hold --reboot-slot: this boot's id is unreadable; a reboot slot needs it to tell this machine from others")
	}
	if err := reboot.CheckStateDir(cfg.StateDir); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(held.Context(), cancel)
	defer stop()
	r := &rebootSlot{fleet: slot.FromConfig(client, cfg, bootID, machineID, slot.ViaPipeline), client: client, stateDir: cfg.StateDir, log: logger, notes: notes, cfg: cfg}
	r.sil, _ = silence.FromConfig(cfg)
	local := cluster.LocalChecks{Cfg: cfg, Runner: proc.Exec{}, Now: time.Now, Log: logger}
	var lastWait string
	a := slot.Admission{Fleet: r.fleet, Seat: held, Wait: true,
		Recheck: func(ctx context.Context, n slot.Count, v slotinfo.Verdict) error {
			size := 0
			if v.Policy != nil {
				size = v.Policy.ClusterSize
			}
			if res := local.Check(ctx, n.Request, size); res.Err != nil {
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					// --timeout ended the check (a health script still
					// running): no slot before --timeout, exit 4 like any
					// wait for it, not an interruption.
					return exitcode.Errorf(exitcode.LockBusy, "crd-lock: hold --reboot-slot: --timeout ended the checks under the lock (%s); no reboot slot was admitted and COMMAND was not run",
						strings.TrimPrefix(res.Err.Error(), "cluster: "))
				}
				return exitcode.Errorf(exitcode.CodeOf(res.Err), "crd-lock: hold --reboot-slot: under the lock: %s", strings.TrimPrefix(res.Err.Error(), "cluster: "))
			}
			return nil
		},
		Prepare: r.prepare(held),
		OnWait: func(v slotinfo.Verdict) {
			if key := v.Rule + "\x00" + v.Reason; key != lastWait {
				logger.Info("keeping the seat and waiting: "+v.Reason, "rule", v.Rule, "max_holders", v.Rules.MaxHolders)
				lastWait = key
			}
		},
	}
	out, err := a.Admit(wctx)
	if out.Halted {
		logger.Error(out.Verdict.Reason, "event", "rollout_halted")
		notes.halted(out.Verdict.Reason)
	}
	if len(out.Count.Disagree) > 0 {
		logger.Warn("the nodes of this lock disagree on max_holders; the strictest counts", "seen", fmt.Sprint(out.Count.Disagree), "effective", out.Verdict.Rules.MaxHolders)
	}
	var refusal *slotinfo.Refusal
	switch {
	case err == nil:
		r.held, r.request = out.Reboot, out.Count.Request
		r.log.Info("reboot slot taken", "slot_key", out.Reboot.Key, "slot_lease_id", fmt.Sprintf("%x", int64(out.Reboot.Lease)),
			"slot_ttl_sec", int64(r.fleet.TTL/time.Second), "max_holders", out.Verdict.Rules.MaxHolders)
		notes.slotTaken(held.FencingToken(), out.Reboot.Key)
		return r, r.silence(wctx, cfg, held.FencingToken())
	case errors.As(err, &refusal) && refusal.Yield:
		return nil, &yieldError{exitcode.Errorf(exitcode.CodeOf(err), "crd-lock: hold --reboot-slot: not admitted (rule %s): %s", refusal.Rule, refusal.Reason)}
	case errors.As(err, &refusal):
		return nil, exitcode.Errorf(exitcode.CodeOf(err), "crd-lock: hold --reboot-slot: not admitted (rule %s): %s", refusal.Rule, refusal.Reason)
	case errors.Is(err, slot.ErrSeatLost):
		return nil, exitcode.Errorf(exitcode.LockBusy, "crd-lock: hold --reboot-slot: the lock seat %s was lost before the reboot slot was taken; COMMAND was not run", held.Entry())
	}
	var coded *exitcode.Error
	if errors.As(err, &coded) {
		return nil, err
	}
	return nil, r.waitErr(ctx, held, err)
}

// yieldError is a refusal after which this node gives its lock seat up and
// asks again (slot.Verdict.Yield): FleetLock clients that asked first need
// the seat.
type yieldError struct{ error }

func (e *yieldError) Unwrap() error { return e.error }

// prepare records the claim in state_dir before the slot is written.
func (r *rebootSlot) prepare(held *lock.Held) func(context.Context, slot.Leases) error {
	return func(_ context.Context, l slot.Leases) error {
		r.lease, r.leases, r.takenAt = l.Slot, l, time.Now()
		if err := slot.WriteClaim(r.stateDir, slot.NewClaim(r.fleet, l, r.takenAt, held.FencingToken())); err != nil {
			r.lease, r.leases = 0, slot.Leases{}
			return err
		}
		return nil
	}
}

func (r *rebootSlot) waitErr(ctx context.Context, held *lock.Held, err error) error {
	switch {
	case held.Err() != nil:
		return exitcode.Errorf(exitcode.LockBusy, "crd-lock: hold --reboot-slot: %v while waiting for a reboot slot; COMMAND was not run", held.Err())
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return exitcode.Errorf(exitcode.LockBusy, "crd-lock: hold --reboot-slot: no reboot slot admitted before --timeout: other nodes are rebooting or the rollout is paced (see clusterrebootd status)")
	case ctx.Err() != nil:
		return exitcode.Errorf(exitcode.Interrupted, "crd-lock: hold --reboot-slot: interrupted while waiting for a reboot slot")
	}
	return r.etcdErr("admitting the reboot slot", err)
}

func (r *rebootSlot) etcdErr(what string, err error) error {
	return exitcode.Errorf(exitcode.EtcdUnavailable, "crd-lock: hold --reboot-slot: %s at %s: %v", what, strings.Join(r.client.Endpoints(), ","), err)
}

// after decides, once COMMAND ended and before the seat is released, whether
// the slot stays: after a COMMAND that exited 0 it does (the node is going
// down), renewed to its whole TTL; after one that failed it stays too when
// a reboot marker of this boot, written since the slot was taken, says a
// reboot command started (crd-reboot leaves it: the shutdown may still
// come). Else the slot is freed. It reports whether the slot was kept.
func (r *rebootSlot) after(status int, lost bool) bool {
	keep := status == 0 && !lost
	if !keep {
		if m, err := reboot.ReadMarker(r.stateDir); err == nil && m.BootID == r.fleet.BootID && !m.RequestedAt.Before(r.takenAt.Add(-time.Second)) {
			keep = true
			r.log.Warn("COMMAND failed after a reboot command started (its marker is in state_dir); the reboot slot is kept until the node is back or the slot expires",
				"slot_key", r.held.Key, "status", status)
		}
	}
	if !keep {
		r.free()
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.fleet.RPCTimeout)
	defer cancel()
	switch err := r.held.Renew(ctx); {
	case errors.Is(err, slot.ErrExpired):
		r.log.Warn("the reboot slot had already expired (COMMAND outlasted reboot_slot_ttl_sec); nothing keeps this node counted once the seat is released",
			"slot_key", r.held.Key, "slot_ttl_sec", int64(r.fleet.TTL/time.Second))
		return false
	case err != nil:
		r.log.Warn("cannot renew the reboot slot; it keeps the rest of its TTL", "slot_key", r.held.Key, "err", err)
	}
	if err := r.held.MarkStarted(ctx); err != nil && !errors.Is(err, slot.ErrExpired) {
		r.log.Warn("cannot mark the reboot started in its in-flight record", "slot_key", r.held.Key, "err", err)
	}
	r.extendSilence()
	r.log.Info("the reboot slot keeps this node counted until `crd-lock complete` after its boot", "slot_key", r.held.Key,
		"slot_ttl_sec", int64(r.fleet.TTL/time.Second))
	return true
}

// start is the start gate's answer (lib/reboot ServeStart): crd-reboot
// under this hold asks it right before its reboot command, and gets the
// daemon's last checks there: the windows once more (COMMAND may have
// drained the node for minutes; not for an emergency request), then the
// slot's start (lib/slot Reboot.Start: a pause, a halt or a hold given
// meanwhile, the slot still alive), in the lock's context. nil: go on.
func (r *rebootSlot) start(lockCtx context.Context) error {
	if r.request == nil || !r.request.Now {
		if res := (cluster.LocalChecks{Cfg: r.cfg, Now: time.Now}).Window(); res.Err != nil {
			r.log.Warn("the reboot command may not start: the window closed while COMMAND ran", "event", "start_refused", "reason", res.Reason)
			return exitcode.Errorf(exitcode.CodeOf(res.Err), "crd-lock: hold --reboot-slot: %s (checked again right before the reboot command); nothing was rebooted",
				strings.TrimPrefix(res.Err.Error(), "cluster: "))
		}
	}
	ctx, cancel := context.WithTimeout(lockCtx, 3*r.fleet.RPCTimeout)
	defer cancel()
	err := r.held.Start(ctx)
	var ref *slotinfo.Refusal
	switch {
	case err == nil:
		r.log.Info("the reboot command may start: its slot is marked started", "event", "slot_started", "slot_key", r.held.Key)
		r.extendSilence()
		return nil
	case errors.As(err, &ref):
		err = exitcode.Errorf(ref.Code, "crd-lock: hold --reboot-slot: not started (rule %s): %s", ref.Rule, ref.Reason)
	case errors.Is(err, slot.ErrExpired):
		err = exitcode.Errorf(exitcode.RebootFailed, "crd-lock: hold --reboot-slot: the reboot slot %s ended before the reboot command (reboot_slot_ttl_sec %d); nothing was rebooted: raise it above COMMAND's run time",
			r.held.Key, int64(r.fleet.TTL/time.Second))
	case lockCtx.Err() != nil:
		err = exitcode.Errorf(exitcode.LockBusy, "crd-lock: hold --reboot-slot: the lock was lost before the reboot command; nothing was rebooted")
	default:
		err = r.etcdErr("marking the reboot started", err)
	}
	r.log.Warn("the reboot command may not start", "event", "start_refused", "error", err.Error())
	return err
}

// free revokes the slot's lease and removes the claim.
func (r *rebootSlot) free() {
	if r.lease == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.fleet.RPCTimeout)
	defer cancel()
	switch err := slot.Abort(ctx, r.client, r.leases); {
	case errors.Is(err, slot.ErrExpired):
		r.log.Info("the reboot slot had already expired", "slot_key", r.fleet.Key(), "slot_ttl_sec", int64(r.fleet.TTL/time.Second))
	case err != nil:
		r.log.Warn("cannot free the reboot slot; it expires with its lease", "slot_key", r.fleet.Key(), "err", err)
	}
	if err := slot.RemoveClaim(r.stateDir); err != nil {
		r.log.Warn("cannot remove the reboot slot claim", "err", err)
	}
	r.expireSilences()
	r.lease, r.leases = 0, slot.Leases{}
}

// CompleteResult is the JSON line of crd-lock complete.
type CompleteResult struct {
	base
	SlotKey string `json:"slot_key,omitempty"`
	// Freed says whether the slot was deleted (false: none was claimed, it
	// had expired, or it was not this machine's).
	Freed bool `json:"freed"`
	// Kept says the slot was renewed (--keep).
	Kept bool `json:"kept,omitempty"`
	// MarkerRemoved says the reboot marker of the completed reboot was removed.
	MarkerRemoved bool `json:"marker_removed,omitempty"`
	// Silences: the Alertmanager silences expired (or extended, --keep).
	Silences *protocol.SilenceReport `json:"silences,omitempty"`
	// Notifications: reboot_completed, slot_expired (docs/notifications.md).
	Notifications *protocol.Notifications `json:"notifications,omitempty"`
}

// Text renders the result for humans.
func (r *CompleteResult) Text(w io.Writer) error {
	fmt.Fprintf(w, "slot: %s\nresult: %s\n", orNone(r.SlotKey), r.ExitName)
	fmt.Fprintf(w, "freed: %v\n", r.Freed)
	if r.Kept {
		fmt.Fprintln(w, "kept: true")
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// runComplete is `crd-lock complete [--keep]`: the pipeline's line after
// boot. It frees the reboot slot that `crd-lock hold --reboot-slot` took
// (the claim in state_dir names its lease) once the boot id says the node
// rebooted, and removes the reboot marker of that reboot; with --keep it
// renews the slot instead (post-boot checks failing: the fleet waits).
func runComplete(ctx context.Context, o *completeOpts, args []string, stdout, stderr io.Writer) error {
	fs, f, keep := o.fs, &o.f, o.keep
	res := &CompleteResult{base: base{Header: report.Header{Tool: tool}, Subcommand: "complete"}}
	format := report.JSON
	var notes *pipelineNotes
	finish := func(err error) error { res.Notifications = notes.wait(); return finishResult(stdout, format, res, err) }
	cfg, _, err := f.setup(fs, args, stdout, &format, "complete")
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	res.Node = cfg.NodeName
	if err != nil {
		return finish(err)
	}
	logger, err := f.common.Logger(stderr, tool)
	if err != nil {
		return finish(err)
	}
	notes = newPipelineNotes(cfg, logger)
	cl, ok, err := slot.ReadClaim(cfg.StateDir)
	if err != nil {
		return finish(err)
	}
	if !ok {
		logger.Info("no reboot slot claimed in state_dir: nothing to complete", "state_dir", cfg.StateDir)
		return finish(nil)
	}
	res.SlotKey, res.Key = cl.Key, cl.Lock
	boot, err := reboot.BootID("")
	if err != nil {
		return finish(exitcode.Errorf(exitcode.RebootFailed, "crd-lock: complete: %v; cannot tell whether this node rebooted: the slot is left to expire", err))
	}
	client, err := f.connect(ctx, cfg)
	if err != nil {
		return finish(err)
	}
	defer client.Close()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Duration(cfg.EtcdDialTimeoutSec)*time.Second)
	defer cancel()
	if *keep {
		ttl, err := slot.Keep(rctx, client, cl)
		if errors.Is(err, slot.ErrExpired) {
			logger.Warn("the reboot slot had already expired; nothing to keep", "slot_key", cl.Key)
			return finish(nil)
		}
		if err != nil {
			return finish(exitcode.Errorf(exitcode.EtcdUnavailable, "crd-lock: complete --keep: renewing %s at %s: %v", cl.Key, strings.Join(client.Endpoints(), ","), err))
		}
		res.Kept = true
		cluster.PostRebootOverdue(rctx, client, cfg, cl, time.Now(), logger)
		res.Silences = completeSilences(ctx, cfg, client, cl.LeaseID(), true, logger)
		logger.Info("reboot slot renewed", "slot_key", cl.Key, "ttl_sec", ttl)
		return finish(nil)
	}
	x := slot.Completion{Client: client, NS: cfg.Namespace(), BootID: boot, WaveBakeSec: cfg.Rollout.WaveBakeSec, FailureWindowSec: cfg.Rollout.FailureWindowSec}
	freed, err := x.Complete(rctx, cl)
	expired := errors.Is(err, slot.ErrExpired)
	var coded *exitcode.Error
	if errors.As(err, &coded) {
		return finish(fmt.Errorf("crd-lock: complete: %w", err))
	}
	if err != nil && !expired {
		return finish(exitcode.Errorf(exitcode.EtcdUnavailable, "crd-lock: complete: freeing %s at %s: %v", cl.Key, strings.Join(client.Endpoints(), ","), err))
	}
	res.Freed = freed
	notes.completed(ctx, client, cl, expired)
	if err := slot.RemoveClaim(cfg.StateDir); err != nil {
		return finish(err)
	}
	res.Silences = completeSilences(ctx, cfg, client, 0, false, logger)
	if m, err := reboot.ReadMarker(cfg.StateDir); err == nil && m.BootID != boot {
		if err := reboot.RemoveMarker(cfg.StateDir); err == nil {
			res.MarkerRemoved = true
		}
	}
	if expired {
		logger.Info("reboot completed; the reboot slot had already expired", "slot_key", cl.Key)
		return finish(nil)
	}
	logger.Info("reboot completed; the reboot slot is free", "slot_key", cl.Key, "freed", freed)
	return finish(nil)
}
