package crdlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/groupguard"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// holdRun is one `crd-lock hold` between its steps (runHold): prepare,
// acquire, run COMMAND under the lock, outcome.
type holdRun struct {
	o      *holdOpts
	res    *HoldResult
	cfg    config.Config
	key    string
	argv   []string
	path   string // COMMAND found on PATH
	logger *slog.Logger
	held   *lock.Held
	slot   *rebootSlot    // with --reboot-slot
	notes  *pipelineNotes // with --reboot-slot
	// gate is COMMAND's start gate (with --reboot-slot): its ends, ours
	// first (questions read, answers written), then COMMAND's.
	gate []*os.File
}

// prepare checks everything before any etcd traffic: the flags (format
// gets --format), COMMAND, the configuration, the kill grace. An error
// from here leaves the lock untouched.
func (h *holdRun) prepare(args []string, stdout, stderr io.Writer, format *report.Format) error {
	o, res := h.o, h.res
	// "--" ends the flags; the rest is COMMAND.
	if err := o.f.parse(o.fs, args, stdout, format); err != nil {
		return err
	}
	h.argv = o.fs.Args()
	res.Argv = h.argv
	if *o.timeout < 0 {
		return exitcode.Errorf(exitcode.Config, "crd-lock: hold: --timeout %s: must not be negative (0 waits for ever)", *o.timeout)
	}
	if *o.grace < 0 {
		return exitcode.Errorf(exitcode.Config, "crd-lock: hold: --kill-grace %s: must not be negative", *o.grace)
	}
	if len(h.argv) == 0 {
		return exitcode.Errorf(exitcode.Config, "crd-lock: hold: no COMMAND given: crd-lock hold [flags] -- COMMAND [ARGS...]")
	}
	cfg, key, err := o.f.load(o.fs)
	h.cfg, h.key = cfg, key
	res.Node, res.Key, res.MaxHolders, res.Purpose = cfg.NodeName, key, cfg.MaxHolders.Of(1), *o.purpose
	if err == nil {
		err = report.CheckField("--purpose", *o.purpose)
	}
	if err != nil {
		return err
	}
	if h.logger, err = o.f.common.Logger(stderr, tool); err != nil {
		return err
	}
	if *o.grace, err = killGrace(time.Duration(cfg.LockTTLSec)*time.Second, *o.grace, cli.IsSet(o.fs, "kill-grace")); err != nil {
		return err
	}
	if *o.withSlot {
		h.notes = newPipelineNotes(cfg, h.logger)
	}
	graceMS := o.grace.Milliseconds()
	res.KillGraceMS = &graceMS
	if h.path, err = exec.LookPath(h.argv[0]); err != nil {
		return exitcode.Errorf(exitcode.Config, "crd-lock: hold: COMMAND %q: %v", h.argv[0], errors.Unwrap(err))
	}
	return nil
}

// acquire waits for the lock, and with --reboot-slot for this node's
// reboot slot, until --timeout or a signal on sigc. The client it returns
// (nil when connecting failed) is the caller's to close once the lock is
// released.
func (h *holdRun) acquire(ctx context.Context, sigc <-chan os.Signal) (*clientv3.Client, error) {
	o, res := h.o, h.res
	actx, cancel := context.WithCancel(ctx)
	// Stops the interrupt watcher: once this returns, signals go to COMMAND.
	defer cancel()
	go func() {
		select {
		case <-sigc:
			cancel()
		case <-actx.Done():
		}
	}()
	// --timeout bounds the whole wait: connecting, the line, the reboot slot.
	if *o.timeout > 0 {
		var tcancel context.CancelFunc
		actx, tcancel = context.WithTimeout(actx, *o.timeout)
		defer tcancel()
	}
	client, err := o.f.connect(actx, h.cfg)
	if err != nil {
		return nil, err
	}
	if *o.withSlot && *o.purpose == "" {
		*o.purpose = "reboot"
		res.Purpose = *o.purpose
	}
	bootID, _ := reboot.BootID("")
	machineID := reboot.MachineID("")
	lo := lockOptions(h.cfg, *o.purpose, bootID, machineID, h.logger)
	// A plain hold counts for every candidate whatever its place in line
	// (operators hold reboots back with it); a seat taken for a reboot slot
	// is a candidate (lockinfo.Annotation.Candidate).
	lo.Candidate = *o.withSlot
	if *o.withSlot && h.cfg.MaxHolders.Percent > 0 {
		// A percentage's seats: of every health record (lib/slot Fleet.Seats).
		seats, serr := slot.FromConfig(client, h.cfg, bootID, machineID, slot.ViaPipeline).Seats(actx)
		if serr != nil {
			return client, exitcode.Errorf(exitcode.EtcdUnavailable, "crd-lock: hold: counting the health records for max_holders %s: %v", h.cfg.MaxHolders, serr)
		}
		lo.MaxHolders = seats
		res.MaxHolders = seats
	}
	for {
		h.held, err = lock.Acquire(actx, client, lo)
		if err != nil || !*o.withSlot {
			break
		}
		h.slot, err = takeRebootSlot(actx, client, h.cfg, h.held, bootID, machineID, h.logger, h.notes)
		if err == nil {
			res.SlotKey = h.slot.held.Key
			res.Silences = h.slot.silences
			break
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = h.held.Release(rctx)
		rcancel()
		var y *yieldError
		if !errors.As(err, &y) {
			break
		}
		// FleetLock clients of this group asked first and need the seat
		// this node held: it gave the seat up; it asks again after a
		// pause, within --timeout.
		pause := yieldPause(h.cfg)
		h.logger.Info("lock seat given up: "+y.Error()+"; asking again", "event", "seat_yielded", "retry_in", pause.String())
		select {
		case <-actx.Done():
			return client, yieldTimeout(actx, y)
		case <-time.After(pause):
		}
	}
	if err != nil {
		res.Evicted = errors.Is(err, lock.ErrEvicted)
		return client, err
	}
	held := h.held
	ann := held.Annotation()
	wait := held.Waited().Milliseconds()
	res.FencingToken, res.LeaseID, res.AcquiredAt, res.LockWaitMS = held.FencingToken(), fmt.Sprintf("%x", int64(held.LeaseID())), ann.AcquiredAt, &wait
	h.logger.Info("lock acquired", "key", h.key, "fencing_token", held.FencingToken(), "lease_id", res.LeaseID, "lock_wait_ms", wait)
	return client, nil
}

// yieldPause is how long a pipeline that gave its lock seat up to FleetLock
// clients waits before it asks again: check_interval_sec, at most 30 s.
func yieldPause(cfg config.Config) time.Duration {
	d := time.Duration(cfg.CheckIntervalSec) * time.Second
	if d <= 0 || d > 30*time.Second {
		d = 30 * time.Second
	}
	return d
}

// yieldTimeout is the error of a wait that ended while this node had given
// its seat up: --timeout (LockBusy, as for any wait for the slot) or a
// signal.
func yieldTimeout(actx context.Context, y *yieldError) error {
	if !errors.Is(actx.Err(), context.DeadlineExceeded) {
		return exitcode.Errorf(exitcode.Interrupted, "crd-lock: hold --reboot-slot: interrupted while waiting for a reboot slot")
	}
	return exitcode.Errorf(exitcode.LockBusy, "crd-lock: hold --reboot-slot: no reboot slot admitted before --timeout: %v; COMMAND was not run", strings.TrimPrefix(y.Error(), "crd-lock: hold --reboot-slot: not admitted "))
}

// startGuardian starts the process that kills COMMAND's whole process group
// should crd-lock die (SIGKILL, OOM): the lease outlives crd-lock by at
// least 2/3 TTL, the guardian acts at once. When it cannot start, the slot
// and the lock are given back and COMMAND does not run.
func (h *holdRun) startGuardian(stderr io.Writer) (*groupguard.Guard, error) {
	guard, err := groupguard.Start("/proc/self/exe", []string{tool, guardMode}, stderr)
	if err != nil {
		if h.slot != nil {
			h.slot.free()
		}
		releaseAfterError(h.held, h.key, h.logger)
		return nil, exitcode.Errorf(exitcode.Internal, "crd-lock: hold: COMMAND not run: %v", err)
	}
	return guard, nil
}

// openGate opens the start gate COMMAND's crd-reboot asks right before
// its reboot command (lib/reboot AskStart; the slot's start): two pipes
// whose far ends COMMAND inherits as descriptors 3 (answers) and 4
// (questions), named in its environment. Without a reboot slot there is
// none. When the pipes cannot be made, COMMAND does not run: the slot is
// freed and the lock released (exit 9).
func (h *holdRun) openGate() error {
	if h.slot == nil {
		return nil
	}
	qr, qw, err := os.Pipe()
	if err == nil {
		var ar, aw *os.File
		if ar, aw, err = os.Pipe(); err == nil {
			h.gate = []*os.File{qr, aw, ar, qw}
			go reboot.ServeStart(qr, aw, func() error { return h.slot.start(h.held.Context()) })
			return nil
		}
		qr.Close()
		qw.Close()
	}
	h.slot.free()
	releaseAfterError(h.held, h.key, h.logger)
	return exitcode.Errorf(exitcode.RebootFailed, "crd-lock: hold --reboot-slot: COMMAND not run: the start gate's pipes: %v", err)
}

// closeGate closes both ends of the start gate, which ends its server.
func (h *holdRun) closeGate() {
	for _, f := range h.gate {
		f.Close()
	}
}

// command is COMMAND with the streams of crd-lock, the lock's variables in
// its environment, in the guardian's process group pgid (so the whole group
// can be signalled).
func (h *holdRun) command(stdin io.Reader, stdout, stderr io.Writer, pgid int) *exec.Cmd {
	cmd := exec.Command(h.path, h.argv[1:]...)
	cmd.Args = h.argv
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.Env = append(os.Environ(),
		"LOCK_KEY="+h.key,
		"FENCING_TOKEN="+strconv.FormatInt(h.held.FencingToken(), 10),
		"LEASE_ID="+h.res.LeaseID,
		"NODE_NAME="+h.cfg.NodeName,
	)
	if h.slot != nil {
		cmd.Env = append(cmd.Env, "SLOT_KEY="+h.slot.held.Key)
	}
	if len(h.gate) == 4 {
		cmd.ExtraFiles = []*os.File{h.gate[2], h.gate[3]}
		cmd.Env = append(cmd.Env, reboot.EnvStartFDs+"=3,4")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	return cmd
}

// underLock runs cmd while the lock is held (supervise), stops what it
// left in its group, keeps or frees the reboot slot, then releases the
// lock.
func (h *holdRun) underLock(cmd *exec.Cmd, guard *groupguard.Guard, sigc <-chan os.Signal) (status int, lost bool, runErr error) {
	res := h.res
	started := time.Now()
	status, lost, runErr = supervise(cmd, h.held, sigc, *h.o.grace, h.logger.Warn)
	// Nothing COMMAND started in its group may run once the lock is free.
	guard.Stop()
	heldMS := time.Since(started).Milliseconds()
	res.HeldMS = &heldMS
	if h.slot != nil {
		// Before the seat goes: the slot, kept, counts the node without a gap.
		res.SlotKept = h.slot.after(status, lost || runErr != nil)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	relErr := h.held.Release(rctx)
	rcancel()
	res.Released = relErr == nil && !lost
	if relErr != nil && !lost {
		h.logger.Warn("release failed; the lock frees itself when the lease expires", "key", h.key, "err", relErr)
	}
	return status, lost, runErr
}

// outcome is hold's error from how COMMAND ended: its own exit status, exit
// 4 when the lock was lost under it.
func (h *holdRun) outcome(status int, lost bool, runErr error) error {
	if runErr != nil {
		return runErr
	}
	h.res.CommandExitStatus = &status
	if lost {
		h.res.LockLost = true
		return exitcode.Errorf(exitcode.LockBusy, "crd-lock: hold: %v; COMMAND was terminated (status %d)", h.held.Err(), status)
	}
	if status != 0 {
		return exitcode.Errorf(exitcode.Code(status), "crd-lock: hold: COMMAND %s exited with status %d", h.argv[0], status)
	}
	return nil
}
