package driver

import (
	"context"
	"fmt"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/detect"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/pkgbusy"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/testclock"
	"github.com/clusterrebootd/clusterrebootd/lib/window"
)

// Detector answers step 2: does this node need a reboot?
type Detector interface {
	Detect(ctx context.Context, cfg config.Config) detect.Report
}

// Windows answers step 3: may a reboot start at now?
type Windows interface {
	At(cfg config.Config, now time.Time) (window.Decision, error)
}

// Gate runs the health script in a phase, with the cluster view's size.
type Gate interface {
	Check(ctx context.Context, cfg config.Config, phase string, sum policy.Summary) gate.Result
}

// Hooks runs post_reboot_hooks.
type Hooks interface {
	Run(ctx context.Context, cfg config.Config, hooks []config.Hook) error
}

// Deps is the world the cycle acts on. Zero fields are filled by Real.
type Deps struct {
	Now        func() time.Time
	KillSwitch func(path string) (set bool, reason string, err error)
	BootID     func() (string, error)
	Detect     Detector
	// PackageBusy answers, beside detection, whether a package manager is
	// mid-transaction (lib/pkgbusy): nil, or an error with
	// exitcode.PackageManagerBusy.
	PackageBusy func() error
	Windows     Windows
	Gate        Gate
	Hooks       Hooks
	Child       Child
	// Sleep waits d or until ctx ends (settle_sec).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Real fills every unset dependency with the real one: the file system
// under root ("" = "/"), commands through proc.Exec and the wall clock of
// lib/testclock (time.Now, unless built with the crdtestclock tag).
func (d Deps) Real(root string) Deps {
	runner := proc.Exec{}
	if d.Now == nil {
		d.Now = testclock.Now
	}
	if d.KillSwitch == nil {
		d.KillSwitch = reboot.KillSwitch
	}
	if d.BootID == nil {
		d.BootID = func() (string, error) { return reboot.BootID(root) }
	}
	if d.Detect == nil {
		d.Detect = RealDetector{Env: detect.Env{Root: root, Runner: runner}}
	}
	if d.PackageBusy == nil {
		d.PackageBusy = func() error { return pkgbusy.Check(root) }
	}
	if d.Windows == nil {
		d.Windows = RealWindows{}
	}
	if d.Gate == nil {
		d.Gate = RealGate{Runner: runner, Root: root, Child: d.Child}
	}
	if d.Hooks == nil {
		d.Hooks = RealHooks{Runner: runner}
	}
	if d.Sleep == nil {
		d.Sleep = sleep
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RealDetector builds the configured detectors and checks them (lib/detect).
type RealDetector struct{ Env detect.Env }

// Detect implements Detector.
func (r RealDetector) Detect(ctx context.Context, cfg config.Config) detect.Report {
	ds, err := detect.New(cfg.Detectors, r.Env)
	if err != nil {
		return detect.Report{Err: err}
	}
	return detect.Check(ctx, ds)
}

// RealWindows evaluates windows.allow/deny (lib/window).
type RealWindows struct{}

// At implements Windows.
func (RealWindows) At(cfg config.Config, now time.Time) (window.Decision, error) {
	loc, err := window.LoadLocation(cfg.Windows.Timezone)
	if err != nil {
		return window.Decision{}, exitcode.Errorf(exitcode.Config, "windows.timezone: %v", err)
	}
	s, err := window.New(cfg.Windows.Allow, cfg.Windows.Deny, loc)
	if err != nil {
		return window.Decision{}, err
	}
	return s.At(now), nil
}

// RealGate runs the gate's built-in checks, its alert and PromQL checks (in
// a child) and health_script (lib/gate) with CLUSTER_SIZE from the view;
// Root is where /run/utmp is read ("" = "/").
type RealGate struct {
	Runner proc.Runner
	Root   string
	// Child runs the alert and PromQL checks (`crd-lock step alerts`),
	// only when some are configured.
	Child Child
}

// Check implements Gate.
func (g RealGate) Check(ctx context.Context, cfg config.Config, phase string, sum policy.Summary) gate.Result {
	c := gate.FromConfig(cfg, phase)
	c.Checks.Root = g.Root
	c.Checks.Remote = remoteChecks(g.Child, cfg)
	if !sum.ReadAt.IsZero() {
		c.ClusterSize = sum.ClusterSize
	}
	return gate.Run(ctx, g.Runner, cfg.HealthScript, gate.Timeout(cfg), c)
}

// RealHooks runs hooks in order without a shell; the first failure stops.
type RealHooks struct{ Runner proc.Runner }

// Run implements Hooks.
func (h RealHooks) Run(ctx context.Context, cfg config.Config, hooks []config.Hook) error {
	for i, hk := range hooks {
		timeout := hk.Timeout()
		name := hk.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		res := h.Runner.Run(ctx, proc.Spec{Argv: hk.Cmd, Env: reboot.HookEnv(cfg.NodeName, cfg.EtcdEndpoints, "post-reboot"), Dir: "/", Timeout: timeout})
		if !res.OK() {
			why := res.Describe(timeout)
			return exitcode.Errorf(exitcode.RebootFailed, "hook %s (%v) %s", name, hk.Cmd, why)
		}
	}
	return nil
}
