// Package protocol is the contract between the daemon's two processes: the
// daemon (package driver, which links no etcd, HTTP or notification code)
// and its cluster steps (package driver/cluster, run as the short-lived
// child `crd-lock step NAME`). It holds the step names, each step's
// arguments and result, the reason tokens with their exit codes, and the
// request document the daemon writes on the child's stdin (request.go).
// The child writes exactly one JSON object (one of the *Result types) on
// stdout, logs on stderr, and exits with a code of lib/exitcode's table.
//
// Both sides import this package and nothing of each other: driver never
// imports driver/cluster, driver/cluster never imports driver. It links
// only lib packages the daemon links anyway (config, policy, report, gate's
// result types, exitcode).
package protocol

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// ChildTool is the program the daemon runs for its cluster steps.
const ChildTool = "crd-lock"

// ChildCommand is the first argument of every cluster step: crd-lock step NAME.
const ChildCommand = "step"

// Step names, the second argument.
const (
	// StepPublish writes this node's health record and returns the pause
	// key (and, with --read-view, the whole view).
	StepPublish = "publish"
	// StepCycle acquires the lock and runs steps 5-7 of the cycle.
	StepCycle = "cycle"
	// StepComplete frees this node's reboot slot after a coordinated reboot.
	StepComplete = "complete"
	// StepStatus reads the cluster view and the lock.
	StepStatus = "status"
	// StepPause sets the cluster-wide kill switch key.
	StepPause = "pause"
	// StepResume deletes the cluster-wide kill switch key.
	StepResume = "resume"
	// StepHold sets an operator's hold on one node.
	StepHold = "hold"
	// StepReleaseHold deletes one node's hold.
	StepReleaseHold = "release-hold"
	// StepRequest sets an operator's reboot request for one node.
	StepRequest = "request"
	// StepServeMetrics serves a .prom file over HTTP until stdin closes.
	StepServeMetrics = "serve-metrics"
	// StepAlerts runs the gate's alert and PromQL checks for a phase (no etcd).
	StepAlerts = "alerts"
	// StepCheckNotifications asks shoutrrr whether it can use every
	// notifications.urls entry, sending nothing (notifycheck.go).
	StepCheckNotifications = "check-notifications"
	// StepFailure records a failure of this node against the rollout's
	// failure budget (docs/rollout.md): a reboot command that did not take
	// the node down, a reboot loop.
	StepFailure = "failure"
	// StepReport reads every node the cluster knows, one row each, for the
	// compliance report (clusterrebootd report); it writes nothing.
	StepReport = "report"
)

// LockHoldingFile, in run_dir, exists while this node's cycle step holds a
// lock seat (not while it only queues): the daemon, which hears from the
// step only when it ends, reads it for clusterrebootd_lock_holding.
const LockHoldingFile = "lock-holding"

// Steps lists every step name.
func Steps() []string {
	return []string{StepPublish, StepCycle, StepComplete, StepStatus, StepPause, StepResume, StepHold, StepReleaseHold, StepRequest, StepServeMetrics, StepAlerts, StepCheckNotifications, StepFailure, StepReport}
}

// Reason tokens: why a cycle did not reboot (or what happened). They appear
// in logs (reason=), the metric label clusterrebootd_reboot_blocked_total
// {reason}, JSON output and the STATUS= line sent to systemd.
const (
	ReasonKillSwitch       = "kill_switch"
	ReasonPaused           = "paused"
	ReasonHeld             = "held"
	ReasonNotNeeded        = "not_needed"
	ReasonWindow           = "window"
	ReasonPolicy           = "policy"
	ReasonHealth           = "health"
	ReasonLockBusy         = "lock_busy"
	ReasonEtcd             = "etcd"
	ReasonRebootInProgress = "reboot_in_progress"
	ReasonDetector         = "detector"
	ReasonHook             = "hook"
	ReasonRebootFailed     = "reboot_failed"
	ReasonRebootLoop       = "reboot_loop"
	ReasonPostReboot       = "post_reboot"
	// ReasonPackageManagerBusy: dpkg/apt, rpm/dnf or zypper is
	// mid-transaction (or one was interrupted): lib/pkgbusy, asked before
	// the lock, under it and right before the reboot command.
	ReasonPackageManagerBusy = "package_manager_busy"
	// ReasonConflict: another live machine uses this node_name, or another
	// lock shares the etcd namespace, or a slot under this node's name is
	// not this boot's (exit 2: the configuration or a stale key must change).
	ReasonConflict = "conflict"
	// ReasonHalted: the rollout's failure budget is spent (docs/rollout.md);
	// an operator resumes it.
	ReasonHalted = "halted"
	// ReasonWave: a lower wave still needs its reboot, or bakes.
	ReasonWave = "wave"
	// ReasonPaced: min_interval_sec or max_starts_per_hour: the next slot
	// is admitted later.
	ReasonPaced = "paced"
	// ReasonInterrupted: the step was stopped (daemon shutdown, a local
	// condition turned false while waiting for the lock, a reload).
	ReasonInterrupted = "interrupted"
	// ReasonInternal: the cluster-step child crashed, was killed by a
	// signal the daemon did not send, or ended without its JSON result.
	ReasonInternal = "internal"
)

// reasons is the one table of the reason tokens and their exit codes, in
// both directions: ReasonCode reads a reason's code, CodeReason the reason
// marked byCode for a code (a code with none stands for etcd).
var reasons = [...]struct {
	reason string
	code   exitcode.Code
	byCode bool
}{
	{ReasonKillSwitch, exitcode.KillSwitch, true},
	{ReasonPaused, exitcode.KillSwitch, false},
	{ReasonHeld, exitcode.KillSwitch, false},
	{ReasonNotNeeded, exitcode.No, true},
	{ReasonWindow, exitcode.WindowClosed, true},
	{ReasonPolicy, exitcode.HealthBlocked, false},
	{ReasonHealth, exitcode.HealthBlocked, true},
	{ReasonLockBusy, exitcode.LockBusy, true},
	{ReasonEtcd, exitcode.EtcdUnavailable, true},
	{ReasonRebootInProgress, exitcode.HealthBlocked, false},
	{ReasonDetector, exitcode.DetectorError, true},
	{ReasonHook, exitcode.RebootFailed, false},
	{ReasonRebootFailed, exitcode.RebootFailed, true},
	{ReasonRebootLoop, exitcode.RebootLoop, true},
	{ReasonPostReboot, exitcode.HealthBlocked, false},
	{ReasonPackageManagerBusy, exitcode.PackageManagerBusy, true},
	{ReasonConflict, exitcode.Config, false},
	{ReasonHalted, exitcode.KillSwitch, false},
	{ReasonWave, exitcode.HealthBlocked, false},
	{ReasonPaced, exitcode.HealthBlocked, false},
	{ReasonInterrupted, exitcode.Interrupted, true},
	{ReasonInternal, exitcode.Internal, true},
}

// Reasons lists every reason token.
func Reasons() []string {
	out := make([]string, len(reasons))
	for i, r := range reasons {
		out[i] = r.reason
	}
	return out
}

// ReasonCode is the exit code a blocked reason maps to (the exit code of
// `clusterrebootd run --once` and `simulate`); an unknown reason is
// internal.
func ReasonCode(reason string) exitcode.Code {
	for _, r := range reasons {
		if r.reason == reason {
			return r.code
		}
	}
	return exitcode.Internal
}

// CodeReason is the reason a child's exit code stands for when its JSON
// did not name one (a crashed or foreign child).
func CodeReason(code exitcode.Code) string {
	for _, r := range reasons {
		if r.byCode && r.code == code {
			return r.reason
		}
	}
	return ReasonEtcd
}

// Outcomes of the cycle step.
const (
	// OutcomeRebooting: the reboot command ran and exited 0 (exit 0).
	OutcomeRebooting = "rebooting"
	// OutcomeDryRun: everything up to the reboot command passed; nothing ran (exit 0).
	OutcomeDryRun = "dry_run"
	// OutcomeBlocked: a check said "not now"; Reason says which (exit = ReasonCode).
	OutcomeBlocked = "blocked"
)

// PublishArgs are the arguments of `crd-lock step publish`.
type PublishArgs struct {
	// State is one of the policy.State* values.
	State string `json:"state"`
	// RebootRequired is the detectors' last answer.
	RebootRequired bool `json:"reboot_required"`
	// LastCheck is when the daemon last ran its checks.
	LastCheck time.Time `json:"last_check"`
	// Detail is the reason of a blocked state, one line.
	Detail string `json:"detail,omitempty"`
	// ReadView asks for the whole cluster view after the write. Without it
	// the step reads only the pause key, so an idle node's publication costs
	// etcd the same whatever the size of the fleet.
	ReadView bool `json:"read_view,omitempty"`
	// ReadSummary asks for the view's summary after the write: what the
	// built-in policies and CLUSTER_SIZE need, read in a size that does not
	// grow with the fleet (docs/scaling.md). The daemon's pre-lock and
	// post-reboot decisions use it.
	ReadSummary bool `json:"read_summary,omitempty"`
	// BlockedSince and BlockedReason say since when and why the node is
	// blocked (zero: not blocked), for the node_blocked and reboot_loop
	// notifications, which the child sends.
	BlockedSince  time.Time `json:"blocked_since,omitzero"`
	BlockedReason string    `json:"blocked_reason,omitempty"`
	// RequiredSince is since when the detectors say a reboot is needed,
	// without a break (zero: not needed), for the waves' timeout and the
	// compliance report.
	RequiredSince time.Time `json:"required_since,omitzero"`
}

// Register adds the publish flags to fs (the child side).
func (a *PublishArgs) Register(fs *flag.FlagSet) {
	fs.StringVar(&a.State, "state", policy.StateIdle, "node `state` to publish")
	fs.BoolVar(&a.RebootRequired, "reboot-required", false, "whether this node needs a reboot")
	fs.Func("last-check", "`time` of the last check (RFC 3339)", func(s string) error {
		t, err := time.Parse(time.RFC3339, s)
		a.LastCheck = t
		return err
	})
	fs.StringVar(&a.Detail, "detail", "", "why the node is blocked (`text`)")
	fs.BoolVar(&a.ReadView, "read-view", false, "also read the whole cluster view (records, slots, pause) after the write")
	fs.BoolVar(&a.ReadSummary, "read-summary", false, "also read the cluster's summary (sizes and healthy counts, from the index) after the write")
	fs.Func("blocked-since", "`time` (RFC 3339) since when the node is blocked, for notifications", func(s string) error {
		t, err := time.Parse(time.RFC3339, s)
		a.BlockedSince = t
		return err
	})
	fs.StringVar(&a.BlockedReason, "blocked-reason", "", "the `reason` token the node is blocked for, for notifications")
	fs.Func("required-since", "`time` (RFC 3339) since when a reboot is needed", func(s string) error {
		t, err := time.Parse(time.RFC3339, s)
		a.RequiredSince = t
		return err
	})
}

// CycleArgs are the arguments of `crd-lock step cycle`.
type CycleArgs struct {
	// Attempt counts consecutive blocked cycles of this reboot (1 first).
	Attempt int `json:"attempt"`
	// NoWait answers lock_busy or reboot_in_progress instead of waiting in
	// line for the lock or for other nodes' reboot slots (simulate).
	NoWait bool `json:"no_wait,omitempty"`
}

// Register adds the cycle flags to fs.
func (a *CycleArgs) Register(fs *flag.FlagSet) {
	fs.IntVar(&a.Attempt, "attempt", 1, "`number` of this attempt, for logs")
	fs.BoolVar(&a.NoWait, "no-wait", false, "do not wait in line: answer lock_busy or reboot_in_progress when a real run would wait")
}

// PauseArgs are the arguments of `crd-lock step pause` and `step resume`.
type PauseArgs struct {
	// Reason is why reboots are paused, or why a halted rollout may go on
	// (resume; required while halted).
	Reason string `json:"reason,omitempty"`
	// Group, on resume, ends that group's halt alone (failure_scope
	// group); nil: every halt.
	Group *string `json:"group,omitempty"`
}

// Register adds the pause flags to fs.
func (a *PauseArgs) Register(fs *flag.FlagSet) {
	fs.StringVar(&a.Reason, "reason", "", "why reboots are paused, or why a halted rollout may go on (`text`)")
	fs.Func("group", "resume only: end this group's halt alone (`name`; failure_scope group)", func(v string) error { a.Group = &v; return nil })
}

// OverrideArgs are the arguments of `crd-lock step hold|release-hold|request`.
type OverrideArgs struct {
	Node   string `json:"node"`
	Reason string `json:"reason,omitempty"`
	// Force holds or requests a node nothing in etcd knows (no record, no
	// slot): without it that is refused, as a typo would be.
	Force bool `json:"force,omitempty"`
	// Now makes a request an emergency reboot: outside the node's windows,
	// through every other rule (request only).
	Now bool `json:"now,omitempty"`
}

// Register adds the override flags to fs.
func (a *OverrideArgs) Register(fs *flag.FlagSet, withReason bool) {
	fs.StringVar(&a.Node, "node", "", "the node held, released or asked to reboot (`name`, required)")
	if withReason {
		fs.StringVar(&a.Reason, "reason", "", "why (`text`, required; shown in status and logs)")
		fs.BoolVar(&a.Force, "force", false, "also for a node nothing in etcd knows (no health record, no slot)")
		fs.BoolVar(&a.Now, "now", false, "request only: an emergency reboot, outside the node's windows")
	}
}

// OverrideResult is the JSON of `step hold`, `step release-hold` and
// `step request`.
type OverrideResult struct {
	report.Header
	// Target is the node the override is about.
	Target string `json:"target"`
	// Hold is the node's hold now in effect (nil after release-hold).
	Hold *policy.Override `json:"hold,omitempty"`
	// Request is the node's reboot request now in effect.
	Request *policy.Override `json:"request,omitempty"`
	// Changed is false when the key was already in the requested state.
	Changed bool `json:"changed"`
}

// RolloutResume is a halted rollout resumed: the failures acknowledged and
// who, when, why (docs/rollout.md, "Resuming").
type RolloutResume struct {
	// Halted was the recorded halt's reason ("" when only failures were
	// counted, not yet recorded as a halt).
	Halted string `json:"halted,omitempty"`
	// Failures are the failed nodes and kinds acknowledged ("node (kind)").
	Failures []string  `json:"failures"`
	By       string    `json:"by"`
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since"`
	// Revision is the etcd revision the acknowledgement was counted at
	// (older versions acknowledge every failure created at or before it).
	Revision int64 `json:"revision"`
	// Acknowledged names every failure it acknowledges (lib/slot FailureID:
	// "node/id"); a failure it does not name counts, whenever it happened.
	Acknowledged []string `json:"acknowledged"`
	// Scope is the scope resumed ("group:<group>") when one group was;
	// StillHalted are the scopes left halted ("fleet", "group:<group>").
	Scope       string   `json:"scope,omitempty"`
	StillHalted []string `json:"still_halted,omitempty"`
}

// ServeMetricsArgs are the arguments of `crd-lock step serve-metrics`.
type ServeMetricsArgs struct {
	Listen string `json:"listen"`
	File   string `json:"file"`
}

// Register adds the serve-metrics flags to fs.
func (a *ServeMetricsArgs) Register(fs *flag.FlagSet) {
	fs.StringVar(&a.Listen, "listen", config.Default().Metrics.Listen, "`address` to serve /metrics on")
	fs.StringVar(&a.File, "file", "", "exposition `file` served as /metrics")
}

// PublishResult is the JSON of `step publish`.
type PublishResult struct {
	report.Header
	// View is the cluster view read after the write; only with --read-view.
	View *policy.View `json:"view,omitempty"`
	// Paused is the cluster-wide pause in effect (nil: none), read by every
	// publication.
	Paused *policy.Pause `json:"paused,omitempty"`
	// Hold and Request are an operator's hold of this node and reboot
	// request for it (nil: none), read by every publication.
	Hold    *policy.Override `json:"hold,omitempty"`
	Request *policy.Override `json:"request,omitempty"`
	// Halted is the rollout's halt in effect (nil: none; docs/rollout.md),
	// read by every publication.
	Halted *policy.Pause `json:"halted,omitempty"`
	// Summary is the cluster's summary; only with --read-summary.
	Summary *policy.Summary `json:"summary,omitempty"`
	// SummaryFull says the summary was computed from every record, because
	// some records carry no index (an older version publishes them).
	SummaryFull bool `json:"summary_full,omitempty"`
	// Notifications are the notifications this step sent (or failed to).
	Notifications *Notifications `json:"notifications,omitempty"`
}

// CycleResult is the JSON of `step cycle`, one type on both sides: the
// daemon acts on the outcome, reason, detail, stop point, silences and
// notifications; the rest (the admission's verdict, the gate, the reboot)
// it shows as it came, in `run --once` and `simulate`.
type CycleResult struct {
	report.Header
	// Outcome is rebooting, dry_run or blocked.
	Outcome string `json:"outcome"`
	// Reason is a reason token when blocked.
	Reason string `json:"reason,omitempty"`
	// Detail says why, one line.
	Detail string `json:"detail,omitempty"`
	// LockWaitMS is how long the lock took (0 when not acquired).
	LockWaitMS int64 `json:"lock_wait_ms"`
	// LeaseID is the lock session's lease in hex.
	LeaseID string `json:"lease_id,omitempty"`
	// FencingToken is the lock entry's create revision.
	FencingToken int64 `json:"fencing_token,omitempty"`
	// View is the cluster view read under the lock, when one was.
	View *policy.View `json:"view,omitempty"`
	// Stopped says, when SIGTERM stopped the child under the lock, what it
	// was running at that moment (nil otherwise).
	Stopped *StopPoint `json:"stopped,omitempty"`
	// Silences: the Alertmanager silences made for this reboot (nil: none configured or no slot taken).
	Silences *SilenceReport `json:"silences,omitempty"`
	// Notifications are the notifications this step sent (or failed to).
	Notifications *Notifications `json:"notifications,omitempty"`
	// Attempt echoes the arguments' attempt.
	Attempt int `json:"attempt"`
	// SlotKey is the reboot slot this node holds after the step (set only
	// with outcome rebooting).
	SlotKey string `json:"slot_key,omitempty"`
	// Policy is the built-in policies' verdict on the fresh view.
	Policy *policy.Decision `json:"policy,omitempty"`
	// Gate summarises the under-lock health check.
	Gate *GateSummary `json:"gate,omitempty"`
	// Present lists the nodes counted against max_holders at the last count
	// (a name twice when two machines share it).
	Present []string `json:"present,omitempty"`
	// MaxHolders is the max_holders that counted: the strictest in the
	// line, the records and the slots, a percentage resolved.
	MaxHolders int `json:"max_holders,omitempty"`
	// Admission is the admission's last verdict (lib/slot): the rule that
	// said no, or every rule's yes, with the effective rules.
	Admission *slotinfo.Verdict `json:"admission,omitempty"`
	// Reboot is what lib/reboot did (or, in a dry run, would have done).
	Reboot *reboot.Result `json:"reboot,omitempty"`
	// AbortHooks are the abort hooks run after an aborted reboot, in order.
	AbortHooks []AbortHookRun `json:"abort_hooks,omitempty"`
}

// GateSummary is the health gate's result without the captured output.
type GateSummary struct {
	Phase      string `json:"phase"`
	Healthy    bool   `json:"healthy"`
	ExitStatus int    `json:"exit_status"`
	TimedOut   bool   `json:"timed_out"`
	DurationMS int64  `json:"duration_ms"`
	Reason     string `json:"reason"`
}

// AbortHookRun is one abort hook's result in the cycle's JSON.
type AbortHookRun struct {
	Name       string `json:"name"`
	OK         bool   `json:"ok"`
	DurationMS int64  `json:"duration_ms"`
	// Detail says how it failed (empty when OK).
	Detail string `json:"detail,omitempty"`
}

// What a cycle child was running under the lock when it was stopped
// (StopPoint.Running).
const (
	// RunningNothing: between steps (the checks, the slot transaction, the
	// pause key): no process of the node's was running.
	RunningNothing = "nothing"
	// RunningSlotWait: keeping its seat, waiting for another node's slot.
	RunningSlotWait = "slot_wait"
	// RunningDetectors: asking the detectors again (debounce).
	RunningDetectors = "detectors"
	// RunningHealthScript: the health script in phase under-lock.
	RunningHealthScript = "health_script"
	// RunningHook: pre-reboot hook StopPoint.Hook (number HookIndex).
	RunningHook = "hook"
	// RunningRebootCommand: reboot_command had started (it is not stopped:
	// the child reports it only when the command then failed).
	RunningRebootCommand = "reboot_command"
)

// StopPoint is where a cycle child holding the lock was when SIGTERM came.
type StopPoint struct {
	// Running is one of the Running* values.
	Running string `json:"running"`
	// Hook names the pre-reboot hook that ran (Running hook), HookIndex is
	// its place in pre_reboot_hooks, from 1.
	Hook      string `json:"hook,omitempty"`
	HookIndex int    `json:"hook_index,omitempty"`
	// HooksDone counts the pre-reboot hooks that had completed before.
	HooksDone int `json:"hooks_done"`
}

// Describe says in words what was stopped, for the child's detail and the
// daemon's log line.
func (p StopPoint) Describe() string {
	var s string
	switch p.Running {
	case RunningNothing:
		s = "with nothing running, before the reboot command"
	case RunningSlotWait:
		s = "while waiting for a reboot slot (nothing was running)"
	case RunningDetectors:
		s = "while the detectors ran again (they got SIGTERM)"
	case RunningHealthScript:
		s = "while the under-lock health script ran (it got SIGTERM)"
	case RunningHook:
		s = fmt.Sprintf("while pre-reboot hook %d (%s) ran (it got SIGTERM; only abort_hooks undo what it did)", p.HookIndex, p.Hook)
	case RunningRebootCommand:
		return "while the reboot command ran (a started reboot command is not stopped; it failed, and the reboot slot is kept: the shutdown it asked for may still come)"
	default:
		s = fmt.Sprintf("while %q ran", p.Running)
	}
	if p.HooksDone > 0 {
		s += fmt.Sprintf("; %d pre-reboot hook(s) had completed before (only abort_hooks undo them)", p.HooksDone)
	}
	return s
}

// CompleteArgs are the arguments of `crd-lock step complete`.
type CompleteArgs struct {
	// Keep renews the slot's lease instead of freeing it: the node is back
	// but its post-reboot checks fail, and the fleet must wait for it.
	Keep bool `json:"keep,omitempty"`
}

// Register adds the complete flags to fs.
func (a *CompleteArgs) Register(fs *flag.FlagSet) {
	fs.BoolVar(&a.Keep, "keep", false, "renew this node's reboot slot (its whole reboot_slot_ttl_sec again) instead of freeing it")
}

// FailureArgs are the arguments of `crd-lock step failure`.
type FailureArgs struct {
	// Kind is reboot_command or reboot_loop (lib/slot's failure kinds).
	Kind string `json:"kind"`
	// Detail says what happened, one line.
	Detail string `json:"detail"`
	// Since is when it began (the reboot request, the loop's block): one
	// failure record per node, kind and Since.
	Since time.Time `json:"since"`
}

// Register adds the failure flags to fs.
func (a *FailureArgs) Register(fs *flag.FlagSet) {
	fs.StringVar(&a.Kind, "kind", "", "the failure's `kind`: reboot_command or reboot_loop")
	fs.StringVar(&a.Detail, "detail", "", "what happened (`text`)")
	fs.Func("since", "`time` (RFC 3339) it began", func(s string) error {
		t, err := time.Parse(time.RFC3339, s)
		a.Since = t
		return err
	})
}

// FailureResult is the JSON of `step failure`.
type FailureResult struct {
	report.Header
	// Recorded is false when this failure was recorded before.
	Recorded bool   `json:"recorded"`
	Key      string `json:"key,omitempty"`
}

// CompleteResult is the JSON of `step complete`.
// MarkerRequestRevision is the reboot marker's extra field naming the
// revision of the operator's reboot request the reboot carried out; the
// complete step consumes the request at that revision.
const MarkerRequestRevision = "request_revision"

type CompleteResult struct {
	report.Header
	// Freed is true when a slot of this node existed and was deleted.
	Freed bool `json:"freed"`
	// Kept is true when --keep renewed an existing slot; false with --keep
	// means there was no slot left to keep (it expired while the node was
	// down).
	Kept bool `json:"kept,omitempty"`
	// Silences: the Alertmanager silences expired (or extended, --keep).
	Silences *SilenceReport `json:"silences,omitempty"`
	// Notifications are the notifications this step sent (or failed to).
	Notifications *Notifications `json:"notifications,omitempty"`
}

// StatusResult is the JSON of `step status`.
type StatusResult struct {
	report.Header
	View policy.View `json:"view"`
	// Lock is the lock as lib/lock reads it.
	Lock lockinfo.Info `json:"lock"`
	// Rollout is the failure budget, pacing and the admission as this
	// node would meet it now (docs/rollout.md).
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// RolloutStatus is the rollout at a glance.
type RolloutStatus struct {
	// Halted is the halt in effect (nil: none), with the failures it named.
	Halted *RolloutHalt `json:"halted"`
	// Failures are the failures the budget counts now, one per node.
	Failures []RolloutFailure `json:"failures"`
	// MaxFailures is the effective failure budget (0: off), in Scope
	// ("fleet" or "group") within FailureWindowSec.
	MaxFailures      int    `json:"max_failures"`
	FailureWindowSec int    `json:"failure_window_sec"`
	Scope            string `json:"scope"`
	// LastResume is the last operator's resume of a halt (nil: none).
	LastResume *RolloutResume `json:"last_resume,omitempty"`
	// MaxHolders and MaxTotal are the effective budgets for this node's
	// group and the fleet, GroupNodes and FleetNodes what percentages
	// were resolved against.
	MaxHolders int `json:"max_holders"`
	MaxTotal   int `json:"max_holders_total"`
	GroupNodes int `json:"group_nodes"`
	FleetNodes int `json:"fleet_nodes"`
	// StartsLastHour are the reboots started within the last hour.
	StartsLastHour int `json:"starts_last_hour"`
	// Next is what the admission would answer this node now: "admit", or
	// the rule that says no, with its reason and, for a wait, until when.
	Next RolloutNext `json:"next"`
	// Progress counts the nodes per wave and group (docs/rollout.md,
	// "Seeing the rollout").
	Progress []slotinfo.GroupProgress `json:"progress"`
	// ETA is the estimate of the rollout's end, with its inputs.
	ETA RolloutETA `json:"eta"`
}

// ETAIgnores says what the rollout's estimate does not know about.
const ETAIgnores = "maintenance windows, health gates, cluster policies, failures still to come, and nodes that will need a reboot later"

// RolloutETA is the estimate of when the nodes that need a reboot now will
// all have completed it: the remaining reboots replayed under the budgets,
// pacing and waves, each taking the median measured reboot (lib/slot
// Estimate).
type RolloutETA struct {
	// At is the estimated end (null: Unknown says why).
	At      *time.Time `json:"at"`
	Unknown string     `json:"unknown,omitempty"`
	// Remaining are the reboots left (Down of them in flight); Held nodes
	// need one but are held, and are left out.
	Remaining int `json:"remaining"`
	Down      int `json:"down"`
	Held      int `json:"held"`
	// MedianRebootMS is the median of Samples reboots completed within
	// the failure window, from the slot's take to its completion.
	MedianRebootMS int64 `json:"median_reboot_ms"`
	Samples        int   `json:"samples"`
	// Groups are each group's reboots left and its effective max_holders
	// and min_interval_sec; the fleet's rules follow (0: none).
	Groups           []slotinfo.GroupPlan `json:"groups"`
	MaxTotal         int                  `json:"max_holders_total"`
	MaxStartsPerHour int                  `json:"max_starts_per_hour"`
	WaveBakeSec      int                  `json:"wave_bake_sec"`
	// Ignores is ETAIgnores.
	Ignores string `json:"ignores"`
}

// ReportResult is the JSON of `step report`: one row per node the cluster
// knows (health records, slots, completions, failures), sorted by name.
type ReportResult struct {
	report.Header
	// ReadAt is when the rows were read (uptime_sec is computed for it).
	ReadAt time.Time   `json:"read_at"`
	Nodes  []ReportRow `json:"nodes"`
}

// ReportRow is one node for the compliance report (man clusterrebootd:
// REPORT COLUMNS). Every field is always present; null (empty in CSV) is
// unknown.
type ReportRow struct {
	Node  string `json:"node"`
	Group string `json:"group"`
	Wave  int    `json:"wave"`
	// Progress is where the node is in the rollout: down, waiting,
	// need_reboot, done, up_to_date or unknown (docs/rollout.md).
	Progress string `json:"progress"`
	// State is its live record's state ("" without one).
	State            string     `json:"state"`
	RebootRequired   *bool      `json:"reboot_required"`
	NeedsRebootSince *time.Time `json:"needs_reboot_since"`
	// LastReboot is when its last coordinated reboot completed, within
	// the failure window; LastRebootSec how long it took.
	LastReboot      *time.Time `json:"last_reboot"`
	LastRebootSec   *int64     `json:"last_reboot_sec"`
	KernelRunning   string     `json:"kernel_running"`
	KernelInstalled string     `json:"kernel_installed"`
	BootedAt        *time.Time `json:"booted_at"`
	UptimeSec       *int64     `json:"uptime_sec"`
	// Failures are the kinds of its failures within the failure window,
	// sorted, each once.
	Failures  []string   `json:"failures"`
	Held      bool       `json:"held"`
	LastCheck *time.Time `json:"last_check"`
	Version   string     `json:"version"`
	Reason    string     `json:"reason"`
}

// ReportColumns are the CSV columns of ReportRow, in order: its JSON
// names.
func ReportColumns() []string {
	return []string{"node", "group", "wave", "progress", "state", "reboot_required", "needs_reboot_since", "last_reboot", "last_reboot_sec",
		"kernel_running", "kernel_installed", "booted_at", "uptime_sec", "failures", "held", "last_check", "version", "reason"}
}

// Record is the row's fields in ReportColumns' order, as text: times in
// RFC 3339 (UTC), booleans true or false, failures joined by ";", unknown
// as "".
func (r ReportRow) Record() []string {
	t := func(p *time.Time) string {
		if p == nil {
			return ""
		}
		return p.UTC().Format(time.RFC3339)
	}
	n := func(p *int64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatInt(*p, 10)
	}
	req := ""
	if r.RebootRequired != nil {
		req = strconv.FormatBool(*r.RebootRequired)
	}
	return []string{r.Node, r.Group, strconv.Itoa(r.Wave), r.Progress, r.State, req, t(r.NeedsRebootSince), t(r.LastReboot), n(r.LastRebootSec),
		r.KernelRunning, r.KernelInstalled, t(r.BootedAt), n(r.UptimeSec), strings.Join(r.Failures, ";"), strconv.FormatBool(r.Held), t(r.LastCheck), r.Version, r.Reason}
}

// RolloutHalt is a recorded halt.
type RolloutHalt struct {
	Reason   string           `json:"reason"`
	Since    time.Time        `json:"since"`
	By       string           `json:"by"`
	Failures []RolloutFailure `json:"failures"`
}

// RolloutFailure is one failure: the node, its group and wave, the kind and
// what happened.
type RolloutFailure struct {
	Node   string    `json:"node"`
	Group  string    `json:"group,omitempty"`
	Wave   int       `json:"wave,omitempty"`
	Kind   string    `json:"kind"`
	Detail string    `json:"detail"`
	At     time.Time `json:"at"`
}

// RolloutNext is the admission's answer to this node now.
type RolloutNext struct {
	Rule   string     `json:"rule"`
	Reason string     `json:"reason,omitempty"`
	Wait   bool       `json:"wait,omitempty"`
	Until  *time.Time `json:"until,omitempty"`
}

// PauseResult is the JSON of `step pause` and `step resume`.
type PauseResult struct {
	report.Header
	// Paused is the pause now in effect (nil after resume).
	Paused *policy.Pause `json:"paused,omitempty"`
	// Changed is false when the key was already in the requested state.
	Changed bool `json:"changed"`
	// Rollout is what resume did to a halted rollout (nil: it was not
	// halted).
	Rollout *RolloutResume `json:"rollout,omitempty"`
	// Notifications are the notifications this step sent (or failed to).
	Notifications *Notifications `json:"notifications,omitempty"`
}
