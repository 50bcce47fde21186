package crdlock

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/groupguard"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
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

func runHold(ctx context.Context, o *holdOpts, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, f, timeout, purpose, withSlot, grace := o.fs, &o.f, o.timeout, o.purpose, o.withSlot, o.grace
	res := &HoldResult{base: base{Header: report.Header{Tool: tool}, Subcommand: "hold"}}
	format := report.JSON
	finish := func(err error) error { return finishResult(stdout, format, res, err) }
	// Signals are ours from the start: while waiting they interrupt the wait,
	// while COMMAND runs they are forwarded to it.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigc)

	// "--" ends the flags; the rest is COMMAND.
	if err := f.parse(fs, args, stdout, &format); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return finish(err)
	}
	argv := fs.Args()
	res.Argv = argv
	if *timeout < 0 {
		return finish(exitcode.Errorf(exitcode.Config, "crd-lock: hold: --timeout %s: must not be negative (0 waits for ever)", *timeout))
	}
	if *grace < 0 {
		return finish(exitcode.Errorf(exitcode.Config, "crd-lock: hold: --kill-grace %s: must not be negative", *grace))
	}
	if len(argv) == 0 {
		return finish(exitcode.Errorf(exitcode.Config, "crd-lock: hold: no COMMAND given: crd-lock hold [flags] -- COMMAND [ARGS...]"))
	}
	cfg, key, err := f.load(fs)
	res.Node, res.Key, res.MaxHolders, res.Purpose = cfg.NodeName, key, cfg.MaxHolders, *purpose
	if err == nil {
		err = report.CheckField("--purpose", *purpose)
	}
	if err != nil {
		return finish(err)
	}
	logger, err := f.common.Logger(stderr, tool)
	if err != nil {
		return finish(err)
	}
	*grace, err = killGrace(time.Duration(cfg.LockTTLSec)*time.Second, *grace, cli.IsSet(fs, "kill-grace"))
	if err != nil {
		return finish(err)
	}
	graceMS := grace.Milliseconds()
	res.KillGraceMS = &graceMS
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return finish(exitcode.Errorf(exitcode.Config, "crd-lock: hold: COMMAND %q: %v", argv[0], errors.Unwrap(err)))
	}

	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sigc:
			cancel()
		case <-actx.Done():
		}
	}()
	// --timeout bounds the whole wait: connecting, the line, the reboot slot.
	if *timeout > 0 {
		var tcancel context.CancelFunc
		actx, tcancel = context.WithTimeout(actx, *timeout)
		defer tcancel()
	}
	client, err := f.connect(actx, cfg)
	if err != nil {
		return finish(err)
	}
	defer client.Close()
	if *withSlot && *purpose == "" {
		*purpose = "reboot"
		res.Purpose = *purpose
	}
	bootID, _ := reboot.BootID("")
	machineID := reboot.MachineID("")
	held, err := lock.Acquire(actx, client, lockOptions(cfg, *purpose, bootID, machineID, logger))
	var rs *rebootSlot
	if err == nil && *withSlot {
		rs, err = takeRebootSlot(actx, client, cfg, held, bootID, machineID, logger)
		if err != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = held.Release(rctx)
			rcancel()
		} else {
			res.SlotKey = rs.held.Key
		}
	}
	cancel() // stop the interrupt watcher: from here on signals go to COMMAND
	if err != nil {
		res.Evicted = errors.Is(err, lock.ErrEvicted)
		return finish(err)
	}
	ann := held.Annotation()
	wait := held.Waited().Milliseconds()
	res.FencingToken, res.LeaseID, res.AcquiredAt, res.LockWaitMS = held.FencingToken(), fmt.Sprintf("%x", int64(held.LeaseID())), ann.AcquiredAt, &wait
	logger.Info("lock acquired", "key", key, "fencing_token", held.FencingToken(), "lease_id", res.LeaseID, "lock_wait_ms", wait)

	// The guardian kills COMMAND's whole process group should crd-lock die
	// (SIGKILL, OOM): the lease outlives crd-lock by at least 2/3 TTL, the
	// guardian acts at once.
	guard, err := groupguard.Start("/proc/self/exe", []string{tool, guardMode}, stderr)
	if err != nil {
		if rs != nil {
			rs.free()
		}
		releaseAfterError(held, key, logger)
		return finish(exitcode.Errorf(exitcode.Internal, "crd-lock: hold: COMMAND not run: %v", err))
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args = argv
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.Env = append(os.Environ(),
		"LOCK_KEY="+key,
		"FENCING_TOKEN="+strconv.FormatInt(held.FencingToken(), 10),
		"LEASE_ID="+res.LeaseID,
		"NODE_NAME="+cfg.NodeName,
	)
	if rs != nil {
		cmd.Env = append(cmd.Env, "SLOT_KEY="+rs.held.Key)
	}
	// The guardian's process group, so the whole group can be signalled.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: guard.Pgid()}
	started := time.Now()
	status, lost, runErr := supervise(cmd, held, sigc, *grace, logger.Warn)
	// Nothing COMMAND started in its group may run once the lock is free.
	guard.Stop()
	heldMS := time.Since(started).Milliseconds()
	res.HeldMS = &heldMS
	if rs != nil {
		// Before the seat goes: the slot, kept, counts the node without a gap.
		res.SlotKept = rs.after(status, lost || runErr != nil)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	relErr := held.Release(rctx)
	rcancel()
	res.Released = relErr == nil && !lost
	if relErr != nil && !lost {
		logger.Warn("release failed; the lock frees itself when the lease expires", "key", key, "err", relErr)
	}
	if runErr != nil {
		return finish(runErr)
	}
	res.CommandExitStatus = &status
	if lost {
		res.LockLost = true
		return finish(exitcode.Errorf(exitcode.LockBusy, "crd-lock: hold: %v; COMMAND was terminated (status %d)", held.Err(), status))
	}
	if status != 0 {
		return finish(exitcode.Errorf(exitcode.Code(status), "crd-lock: hold: COMMAND %s exited with status %d", argv[0], status))
	}
	return finish(nil)
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
