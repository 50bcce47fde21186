package cluster

import (
	"context"
	"log/slog"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/detect"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/pkgbusy"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/window"
)

// LocalChecks are the node-local rules of the admission (docs/rollout.md):
// checked under the lock by every entry point that can look inside the
// node — the daemon's cycle and the pipeline's `crd-lock hold
// --reboot-slot` — from the same configuration, in this order: the kill
// switch file, the windows (not for an emergency request), the detectors
// again (FR-RD-3; an operator's request stands in for them) and the health
// gate in phase under-lock (FR-HG-5).
type LocalChecks struct {
	Cfg    config.Config
	Root   string
	Runner proc.Runner
	Uname  func() (string, error)
	Now    func() time.Time
	Log    *slog.Logger
	// Doing, when set, is told what runs (for a SIGTERM's report).
	Doing func(running string)
}

// LocalResult is what the checks found: the reason token and error of the
// first that said no, and the gate's summary when it ran.
type LocalResult struct {
	Reason string
	Err    error
	Gate   *protocol.GateSummary
}

func (l LocalChecks) doing(s string) {
	if l.Doing != nil {
		l.Doing(s)
	}
}

// Check runs the checks; request is the operator's reboot request of this
// node (nil: none), clusterSize the gate's CLUSTER_SIZE.
func (l LocalChecks) Check(ctx context.Context, request *policy.Override, clusterSize int) LocalResult {
	cfg := l.Cfg
	if set, why, _ := reboot.KillSwitch(cfg.KillSwitchFile); set {
		return LocalResult{Reason: protocol.ReasonKillSwitch, Err: exitcode.Errorf(exitcode.KillSwitch,
			"cluster: kill switch %s is set (%s): remove the file to allow reboots", cfg.KillSwitchFile, why)}
	}
	if request != nil && request.Now {
		l.Log.Info("an operator requested an emergency reboot: the windows are not checked", "event", "emergency_reboot",
			"by", request.By, "since", request.Since.Format(time.RFC3339), "request_reason", request.Reason)
	} else if r := l.Window(); r.Err != nil {
		return r
	}
	if r := l.detect(ctx, request); r.Err != nil {
		return r
	}
	gc := gate.FromConfig(cfg, gate.PhaseUnderLock)
	gc.ClusterSize = clusterSize
	gc.Checks.Remote = remoteChecks(cfg)
	l.doing(protocol.RunningHealthScript)
	gr := gate.Run(ctx, l.Runner, cfg.HealthScript, gate.Timeout(cfg), gc)
	l.doing(protocol.RunningNothing)
	res := LocalResult{Gate: &protocol.GateSummary{Phase: gr.Phase, Healthy: gr.Healthy, ExitStatus: gr.ExitStatus, TimedOut: gr.TimedOut, DurationMS: gr.DurationMS, Reason: gr.Reason}}
	if err := gr.Err(); err != nil {
		res.Reason, res.Err = protocol.ReasonHealth, err
	}
	return res
}

// Window checks the windows alone: closed is reason window, exit 5.
func (l LocalChecks) Window() LocalResult {
	w := l.Cfg.Windows
	loc, err := window.LoadLocation(w.Timezone)
	if err != nil {
		return LocalResult{Reason: protocol.ReasonWindow, Err: exitcode.New(exitcode.Config, err)}
	}
	sched, err := window.New(w.Allow, w.Deny, loc)
	if err != nil {
		return LocalResult{Reason: protocol.ReasonWindow, Err: err}
	}
	if d := sched.At(l.Now()); !d.Open {
		return LocalResult{Reason: protocol.ReasonWindow, Err: exitcode.Errorf(exitcode.WindowClosed, "cluster: window closed: %s", d.Reason)}
	}
	return LocalResult{}
}

// detect asks the detectors again: a reboot that is no longer needed is not
// done (FR-RD-3 debounce), unless an operator requested it.
func (l LocalChecks) detect(ctx context.Context, request *policy.Override) LocalResult {
	ds, err := detect.New(l.Cfg.Detectors, detect.Env{Root: l.Root, Runner: l.Runner, Uname: l.Uname})
	if err != nil {
		return LocalResult{Reason: protocol.ReasonDetector, Err: err}
	}
	l.doing(protocol.RunningDetectors)
	rep := detect.Check(ctx, ds)
	l.doing(protocol.RunningNothing)
	if rep.Err != nil {
		return LocalResult{Reason: protocol.ReasonDetector, Err: rep.Err}
	}
	if !rep.RebootRequired && request == nil {
		return LocalResult{Reason: protocol.ReasonNotNeeded, Err: exitcode.Errorf(exitcode.No, "cluster: no reboot is needed any more (the detectors were asked again under the lock); nothing to do")}
	}
	if !rep.RebootRequired {
		l.Log.Info("no detector says a reboot is needed, but an operator requested one", "event", "reboot_requested",
			"by", request.By, "since", request.Since.Format(time.RFC3339), "request_reason", request.Reason)
	}
	// Beside the detectors, as before the lock: a package transaction that
	// began while this node waited in line stops it before a slot is taken
	// or a hook drains anything (lib/reboot looks once more right before
	// the reboot command). The daemon's cycle and the pipeline both come
	// here.
	if err := pkgbusy.Check(l.Root); err != nil {
		return LocalResult{Reason: protocol.ReasonPackageManagerBusy, Err: err}
	}
	return LocalResult{}
}
