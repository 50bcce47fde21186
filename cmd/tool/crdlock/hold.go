package crdlock

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// HoldResult is the JSON line crd-lock hold prints after COMMAND ends.
type HoldResult struct {
	base
	MaxHolders   int        `json:"max_holders,omitempty"`
	Purpose      string     `json:"purpose,omitempty"`
	FencingToken int64      `json:"fencing_token,omitempty"`
	LeaseID      string     `json:"lease_id,omitempty"`
	AcquiredAt   *time.Time `json:"acquired_at,omitempty"`
	LockWaitMS   *int64     `json:"lock_wait_ms,omitempty"`
	HeldMS       *int64     `json:"held_ms,omitempty"`
	// KillGraceMS is the time COMMAND has between SIGTERM and SIGKILL after
	// the lock is lost.
	KillGraceMS *int64   `json:"kill_grace_ms,omitempty"`
	Argv        []string `json:"argv,omitempty"`
	// CommandExitStatus is COMMAND's exit status (128+N if killed by signal
	// N); absent when COMMAND never ran.
	CommandExitStatus *int `json:"command_exit_status,omitempty"`
	// Evicted is true when the entry was removed from the line while
	// waiting (crd-lock release --force); COMMAND never ran.
	Evicted bool `json:"evicted,omitempty"`
	// LockLost is true when the lock was lost while COMMAND ran.
	LockLost bool `json:"lock_lost,omitempty"`
	// SlotKey is the reboot slot taken with --reboot-slot; SlotKept says it
	// outlives crd-lock (until `crd-lock complete` after the boot, or its TTL).
	SlotKey  string `json:"slot_key,omitempty"`
	SlotKept bool   `json:"slot_kept,omitempty"`
	// Silences: the Alertmanager silences made with the slot (docs/silences.md).
	Silences *protocol.SilenceReport `json:"silences,omitempty"`
	// Notifications: reboot_starting, reboot_failed (docs/notifications.md).
	Notifications *protocol.Notifications `json:"notifications,omitempty"`
	// Released is true when the lease was revoked after COMMAND ended.
	Released bool `json:"released"`
}

// Settle fills the header from err; a COMMAND that ran and failed while
// the lock held is "command_failed" (its status is the exit code).
func (r *HoldResult) Settle(err error) {
	r.Header.Settle(err)
	if r.CommandExitStatus != nil && *r.CommandExitStatus != 0 && !r.LockLost {
		r.ExitName = "command_failed"
	}
}

// Text renders the result for humans.
func (r *HoldResult) Text(w io.Writer) error {
	report.Line(w, "key", r.Key)
	report.Line(w, "result", r.ExitName)
	if r.FencingToken != 0 {
		report.Line(w, "fencing token", r.FencingToken)
		report.Line(w, "lease", r.LeaseID)
	}
	if r.LockWaitMS != nil {
		report.Line(w, "waited", time.Duration(*r.LockWaitMS)*time.Millisecond)
	}
	if r.CommandExitStatus != nil {
		report.Line(w, "command status", *r.CommandExitStatus)
	}
	if r.Error != "" {
		report.Line(w, "error", r.Error)
	}
	return nil
}

// runHold is `crd-lock hold`, in the steps of holdsteps.go.
func runHold(ctx context.Context, o *holdOpts, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	h := &holdRun{o: o, res: &HoldResult{base: base{Header: report.Header{Tool: tool}, Subcommand: "hold"}}}
	format := report.JSON
	finish := func(err error) error { h.notes.holdEnded(err, h.res); return finishResult(stdout, format, h.res, err) }
	// Signals are ours from the start: while waiting they interrupt the wait,
	// while COMMAND runs they are forwarded to it.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigc)

	if err := h.prepare(args, stdout, stderr, &format); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return finish(err)
	}
	client, err := h.acquire(ctx, sigc)
	if client != nil {
		defer client.Close()
	}
	if err != nil {
		return finish(err)
	}
	guard, err := h.startGuardian(stderr)
	if err != nil {
		return finish(err)
	}
	if err := h.openGate(); err != nil {
		guard.Stop()
		return finish(err)
	}
	defer h.closeGate()
	return finish(h.outcome(h.underLock(h.command(stdin, stdout, stderr, guard.Pgid()), guard, sigc)))
}

// supervise runs cmd to its end: signals are forwarded to its process
// group, and when the lock is lost the group gets SIGTERM, then SIGKILL after
// grace. It returns the exit status (128+N for signal N) and whether the lock
// was lost.
func supervise(cmd *exec.Cmd, held *lock.Held, sigc <-chan os.Signal, grace time.Duration, warn func(string, ...any)) (int, bool, error) {
	if err := cmd.Start(); err != nil {
		return 0, false, exitcode.Errorf(exitcode.Config, "crd-lock: hold: starting COMMAND %s: %v", cmd.Path, err)
	}
	pgid := cmd.Process.Pid
	if a := cmd.SysProcAttr; a != nil && a.Pgid != 0 {
		pgid = a.Pgid
	}
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()
	lostc := held.Done()
	var killc <-chan time.Time
	lost := false
	for {
		select {
		case err := <-waitc:
			return exitStatus(cmd, err), lost, nil
		case sig := <-sigc:
			_ = syscall.Kill(-pgid, sig.(syscall.Signal))
		case <-lostc:
			lostc = nil
			lost = true
			warn("lock lost while COMMAND runs; terminating it", "err", held.Err(), "kill_grace", grace)
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			killc = time.After(grace)
		case <-killc:
			warn("COMMAND still running after the grace period; killing its process group")
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// exitStatus is the shell's view of how cmd ended.
func exitStatus(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return 1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// guardMode is the hidden subcommand that runs the guardian of COMMAND's
// process group (lib/groupguard); crd-lock hold starts it, never a person.
const guardMode = "__guard-group"

// releaseAfterError gives the lock up when COMMAND could not be run.
func releaseAfterError(held *lock.Held, key string, logger *slog.Logger) {
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := held.Release(rctx); err != nil {
		logger.Warn("release failed; the lock frees itself when the lease expires", "key", key, "err", err)
	}
}

// defaultKillGrace is --kill-grace when the TTL is long enough.
const defaultKillGrace = 10 * time.Second

// killGrace is the grace in effect. A holder gives up a lost lock at least
// TTL/3 before the lease can expire, so COMMAND must be gone within TTL/3:
// a grace given that is not below it is refused; the default is 10 s or a
// quarter of the TTL, whichever is less (the rest of the third is margin for
// the kill itself).
func killGrace(ttl, given time.Duration, set bool) (time.Duration, error) {
	if !set {
		return min(defaultKillGrace, ttl/4), nil
	}
	if given >= ttl/3 {
		return 0, exitcode.Errorf(exitcode.Config, "crd-lock: hold: --kill-grace %s is not below a third of the lock TTL %s: after a lost lock COMMAND could still run when the next holder starts; give less than %s, or a longer --ttl (lock_ttl_sec)", given, ttl, ttl/3)
	}
	return given, nil
}
