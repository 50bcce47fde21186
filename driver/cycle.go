package driver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// Driver runs cycles. Its methods are safe for concurrent use.
type Driver struct {
	deps    Deps
	log     *slog.Logger
	metrics *Metrics
	limiter *Limiter

	// WatchEvery is how often local conditions are re-checked while the
	// cycle child waits for the lock (0: check_interval_sec).
	WatchEvery time.Duration

	mu   sync.Mutex
	cfg  config.Config
	view policy.View
	// summary is the last summary read (policy.Summary): what the
	// pre-lock and post-reboot decisions use of the fleet.
	summary policy.Summary
	status  Status
	attempt int
	post    postProgress
	// requiredSince is when the detectors started saying "needed", check
	// after check (zero when not needed).
	requiredSince time.Time
	interrupt     chan string

	// publishedAt is when the last publication succeeded, with or
	// without the view.
	publishedAt time.Time
	// blockedSince is when the node's current blocked state began (zero
	// when not blocked), for the node_blocked notification.
	blockedSince time.Time
	// onStatus, when set, hears of a status that lasts while a cycle is
	// still running (waiting in line): the daemon tells systemd at once,
	// not only when the cycle ends, which may be hours later.
	onStatus func(Status)
}

// OnStatus sets f to hear of a status change in the middle of a cycle.
func (d *Driver) OnStatus(f func(Status)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.onStatus = f
}

// New returns a driver for cfg. deps must be complete (see Deps.Real);
// m may be nil.
func New(cfg config.Config, deps Deps, log *slog.Logger, m *Metrics, limiter *Limiter) *Driver {
	if limiter == nil {
		limiter = NewLimiter(deps.Now, DefaultRepeatEvery)
	}
	return &Driver{deps: deps, log: log.With("node", cfg.NodeName), metrics: m, limiter: limiter, cfg: cfg,
		status: Status{State: policy.StateIdle}, interrupt: make(chan string, 1)}
}

// Config returns the configuration in effect.
func (d *Driver) Config() config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// SetConfig replaces the configuration from the next step on.
func (d *Driver) SetConfig(cfg config.Config) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg = cfg
}

// Status returns the node's current status.
func (d *Driver) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status
}

// View returns the last cluster view read.
func (d *Driver) View() policy.View {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.view
}

// SetView stores a cluster view (from a publish or status step).
func (d *Driver) SetView(v policy.View) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.view = v
	d.summary = v.Summarize(d.cfg.NodeName, d.cfg.ClusterPolicies.FallbackNodes)
}

// PublishedAt is when this node's health record was last published.
func (d *Driver) PublishedAt() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.publishedAt
}

// published keeps what a publication read: the whole view when it read
// one, else the pause alone (the rest of the last view, and its ReadAt,
// stay as they were).
func (d *Driver) published(res protocol.PublishResult, at time.Time) {
	if d.metrics != nil {
		halted := res.Halted != nil || (res.View != nil && res.View.Halted != nil)
		d.metrics.RolloutHalted.Set(map[bool]float64{false: 0, true: 1}[halted])
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.publishedAt = at
	if res.Summary != nil {
		d.summary = *res.Summary
	}
	if res.View != nil {
		d.view = *res.View
		d.summary = res.View.Summarize(d.cfg.NodeName, d.cfg.ClusterPolicies.FallbackNodes)
		return
	}
	d.view.Paused = res.Paused
	d.view.Halted = res.Halted
	node := d.cfg.NodeName
	d.view.Holds = replaceOverride(d.view.Holds, node, res.Hold)
	d.view.Requests = replaceOverride(d.view.Requests, node, res.Request)
}

// RequiredSince is since when the detectors say a reboot is needed, check
// after check (zero when not needed).
func (d *Driver) RequiredSince() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requiredSince
}

// replaceOverride puts node's override (nil: none) in the place of the one
// the list had for it.
func replaceOverride(list []policy.Override, node string, o *policy.Override) []policy.Override {
	out := make([]policy.Override, 0, len(list)+1)
	for _, x := range list {
		if x.Node != node {
			out = append(out, x)
		}
	}
	if o != nil {
		out = append(out, *o)
	}
	return out
}

// summaryFor returns the last cluster summary for a decision that uses it
// (a built-in policy, or the health script's CLUSTER_SIZE), read again first
// when it is older than one publish interval: idle publications do not read
// it (docs/cluster-protocol.md), so only a node that is about to decide
// pays for it, at most once an interval, and what it reads does not grow
// with the fleet (lib/slot.Summary, the index; docs/scaling.md). A
// simulation reads the whole view with the status step, which writes
// nothing.
func (d *Driver) summaryFor(ctx context.Context, cfg config.Config, mode Mode, now time.Time, used bool) policy.Summary {
	if !used || !d.summaryStale(cfg, now) {
		return d.Summary()
	}
	var err error
	if mode.Simulate {
		err = d.readView(ctx, cfg)
	} else {
		err = d.publish(ctx, true)
	}
	if err != nil {
		d.log.Warn("cannot refresh the cluster's summary before the policy check", "event", "publish_failed", "error", err)
	}
	return d.Summary()
}

// Summary returns the last cluster summary read.
func (d *Driver) Summary() policy.Summary {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.summary
}

// readView reads the view through the status step (no write).
func (d *Driver) readView(ctx context.Context, cfg config.Config) error {
	var res protocol.StatusResult
	code, err := d.deps.Child.Run(ctx, protocol.StepStatus, nil, cfg, &res)
	if err != nil {
		return exitcode.New(code, err)
	}
	if code != exitcode.OK {
		return exitcode.Errorf(code, "status: %s", res.Error)
	}
	if !res.View.ReadAt.IsZero() {
		d.SetView(res.View)
	}
	return nil
}

// Interrupt stops a running cycle child (it releases its lease); reason
// is logged. It does nothing when no child runs.
func (d *Driver) Interrupt(reason string) {
	select {
	case d.interrupt <- reason:
	default:
	}
}

func (d *Driver) setStatus(s Status) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.LastCheck.IsZero() {
		s.LastCheck = d.status.LastCheck
	}
	d.status = s
}

// RunOnce runs one cycle: steps 0-4 in this process, 5-7 in the child.
func (d *Driver) RunOnce(ctx context.Context, mode Mode) Outcome {
	cfg := d.Config()
	now := d.deps.Now()
	var out Outcome
	// Drop a stale interrupt request from before this cycle.
	select {
	case <-d.interrupt:
	default:
	}
	defer func() {
		d.finish(cfg, now, &out)
	}()

	// Step 0: a reboot marker left by the last coordinated reboot.
	if stop := d.postReboot(ctx, cfg, mode, &out); stop {
		return out
	}

	// Step 1: kill switch file, cluster pause (last view).
	if stop := d.stepKillSwitch(ctx, cfg, now, &out); stop {
		return out
	}
	// Step 2: detect.
	if stop := d.stepDetect(ctx, cfg, mode, now, &out); stop {
		return out
	}
	// Step 3: window.
	if stop := d.stepWindow(cfg, now, &out); stop {
		return out
	}
	// Step 4: built-in policies on the last view, then the pre-lock gate.
	if stop := d.stepPolicyGate(ctx, cfg, mode, now, &out); stop {
		return out
	}

	// Steps 5-7: the cluster child.
	d.clusterCycle(ctx, cfg, mode, &out)
	return out
}

// refreshRequired runs the detectors while a kill switch or pause holds
// every node, so that status and the health record keep saying which nodes
// need a reboot once it is lifted. A detector error changes nothing here:
// the switch is the reason, and the next cycle reports the error.
func (d *Driver) refreshRequired(ctx context.Context, cfg config.Config, now time.Time) {
	if rep := d.deps.Detect.Detect(ctx, cfg); rep.Err == nil {
		d.setRequired(rep.RebootRequired, now)
		if d.metrics != nil {
			d.metrics.LastCheck.Set(float64(now.Unix()))
		}
	}
}

func (d *Driver) setRequired(required bool, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status.RebootRequired = required
	d.status.LastCheck = now
	switch {
	case !required:
		d.requiredSince = time.Time{}
	case d.requiredSince.IsZero():
		d.requiredSince = now
	}
	if d.metrics != nil {
		v, since := 0.0, 0.0
		if required {
			v, since = 1, float64(d.requiredSince.Unix())
		}
		d.metrics.RebootRequired.Set(v)
		d.metrics.RequiredSince.Set(since)
	}
}

func (d *Driver) summaryStale(cfg config.Config, now time.Time) bool {
	s := d.Summary()
	return s.ReadAt.IsZero() || now.Sub(s.ReadAt) > time.Duration(cfg.HealthPublishIntervalSec)*time.Second
}

func (d *Driver) countHealth(r gate.Result) {
	if d.metrics == nil {
		return
	}
	if r.Healthy {
		d.metrics.HealthChecks.Inc("healthy")
	} else {
		d.metrics.HealthChecks.Inc("unhealthy")
	}
}

// finish updates status, metrics and the log after a cycle.
func (d *Driver) finish(cfg config.Config, now time.Time, out *Outcome) {
	st := Status{Reason: out.Reason, Detail: out.Detail}
	d.mu.Lock()
	st.RebootRequired = d.status.RebootRequired
	d.mu.Unlock()
	switch out.Action {
	case ActionIdle:
		st.State, st.Reason, st.Detail = policy.StateIdle, "", ""
	case ActionRebooting:
		st.State = policy.StateRebooting
	case ActionDryRun:
		st.State = policy.StateNeedsReboot
		st.Detail = "dry run: would reboot now"
	default:
		st.State = policy.StateBlocked
		if out.Reason == protocol.ReasonRebootInProgress && out.Step == 0 {
			st.State = policy.StateRebooting
		}
		if out.Reason == protocol.ReasonPostReboot {
			st.State = policy.StatePostReboot
		}
	}
	d.setStatus(st)
	if out.Action == ActionBlocked && d.metrics != nil {
		d.metrics.Blocked.Inc(out.Reason)
	}
	d.logOutcome(cfg, out)
}

func (d *Driver) logOutcome(cfg config.Config, out *Outcome) {
	attrs := []any{"event", "cycle", "action", out.Action, "step", out.Step}
	if out.Reason != "" {
		attrs = append(attrs, "reason", out.Reason)
	}
	if out.Detail != "" {
		attrs = append(attrs, "detail", out.Detail)
	}
	if out.Attempt > 0 {
		attrs = append(attrs, "attempt", out.Attempt)
	}
	if c := out.Cycle; c != nil {
		attrs = append(attrs, "lock_wait_ms", c.LockWaitMS)
		if c.LeaseID != "" {
			attrs = append(attrs, "lease_id", c.LeaseID, "lock_session_id", cfg.LockKeyForGroup()+"/"+c.LeaseID)
		}
	}
	for _, s := range out.Steps {
		if s.Name == "health" || s.Name == "post_reboot_health" {
			status := "healthy"
			if s.Decision == DecisionBlock || out.Reason == protocol.ReasonHealth {
				status = "unhealthy"
			}
			attrs = append(attrs, "health_status", status)
		}
	}
	if len(out.Detectors) > 0 {
		attrs = append(attrs, "detector", strings.Join(out.Detectors, ","))
	}
	level := slog.LevelInfo
	msg := "cycle: " + out.Action
	if out.Action == ActionBlocked {
		msg = "cycle blocked: " + out.Reason
		// Once per episode (the limiter below): what needs an operator.
		if out.Reason == protocol.ReasonRebootLoop || out.Reason == protocol.ReasonRebootFailed || out.Reason == protocol.ReasonDetector ||
			out.Reason == protocol.ReasonConflict || out.Reason == protocol.ReasonHalted {
			level = slog.LevelWarn
		}
	}
	if out.Action == ActionIdle {
		msg = "cycle: no reboot needed"
	}
	emit, repeated := d.limiter.Observe(out.Action + "\x00" + out.Reason + "\x00" + out.Detail)
	if !emit {
		return
	}
	if repeated > 0 {
		attrs = append(attrs, "repeated", repeated, "repeat_window", d.limiter.Every().String())
		msg += fmt.Sprintf(" (repeated %d times)", repeated)
	}
	d.log.Log(context.Background(), level, msg, attrs...)
}
