package driver

import (
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Actions: what a cycle ended with.
const (
	// ActionIdle: no reboot is needed (exit 1).
	ActionIdle = "idle"
	// ActionBlocked: a reboot is needed but a step said "not now" (Reason).
	ActionBlocked = "blocked"
	// ActionRebooting: the reboot command ran (exit 0).
	ActionRebooting = "rebooting"
	// ActionDryRun: every check passed; nothing ran (exit 0).
	ActionDryRun = "dry_run"
)

// Step decisions in Outcome.Steps.
const (
	DecisionPass  = "pass"
	DecisionBlock = "block"
	DecisionSkip  = "skip"
	DecisionDone  = "done"
)

// StepResult is one step's decision, as `clusterrebootd simulate` prints it.
type StepResult struct {
	Step     int    `json:"step"`
	Name     string `json:"name"`
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// Outcome is the result of one cycle.
type Outcome struct {
	Action string `json:"action"`
	// Reason is the reason token when blocked or idle.
	Reason string `json:"reason,omitempty"`
	// Detail says why, one line.
	Detail string `json:"detail,omitempty"`
	// Step is the number of the step that decided.
	Step  int          `json:"step"`
	Steps []StepResult `json:"steps"`
	// Cycle is the cluster child's answer when it ran.
	Cycle *protocol.CycleResult `json:"cycle,omitempty"`
	// Attempt counts the cycles this reboot has been tried by the child.
	Attempt int `json:"attempt,omitempty"`
	// Detectors names the detectors that said a reboot is needed.
	Detectors []string `json:"detectors,omitempty"`

	// backoff is set when the cycle got past step 4 and was blocked.
	backoff bool
}

// Code is the exit code the outcome maps to: 0 rebooting or dry run, 1 not
// needed, otherwise the blocked reason's code.
func (o Outcome) Code() exitcode.Code {
	switch o.Action {
	case ActionRebooting, ActionDryRun:
		return exitcode.OK
	case ActionIdle:
		return exitcode.No
	}
	return protocol.ReasonCode(o.Reason)
}

// Err is the outcome as an error for the exit status (nil for 0).
func (o Outcome) Err() error {
	c := o.Code()
	if c == exitcode.OK {
		return nil
	}
	if o.Action == ActionIdle {
		return exitcode.Errorf(c, "no reboot needed")
	}
	return exitcode.Errorf(c, "clusterrebootd: step %d blocked (%s): %s", o.Step, o.Reason, o.Detail)
}

// CycleStep is one check of the cycle, as docs/architecture.md numbers
// and names it: StepResult's step and name.
type CycleStep struct {
	N    int
	Name string
}

// The cycle's steps. Step 0 is the post-reboot part (step 8 of the last
// cycle, finished after the boot).
var (
	CyclePostReboot       = CycleStep{0, "post_reboot"}
	CyclePostRebootHooks  = CycleStep{0, "post_reboot_hooks"}
	CyclePostRebootDetect = CycleStep{0, "post_reboot_detect"}
	CyclePostRebootHealth = CycleStep{0, "post_reboot_health"}
	CycleSettle           = CycleStep{0, "settle"}
	CycleComplete         = CycleStep{0, "complete"}
	CycleKillSwitch       = CycleStep{1, "kill_switch"}
	CycleDetect           = CycleStep{2, "detect"}
	CyclePackageManager   = CycleStep{2, "package_manager"}
	CycleWindow           = CycleStep{3, "window"}
	CyclePolicy           = CycleStep{4, "policy"}
	CycleHealth           = CycleStep{4, "health"}
	CycleCluster          = CycleStep{5, "cluster"}
	// CycleReboot is where a cycle that reached its reboot (or dry run)
	// ends: the child took the slot and ran the reboot command.
	CycleReboot = CycleStep{7, "reboot"}
)

func (o *Outcome) step(s CycleStep, decision, reason, detail string) {
	o.Steps = append(o.Steps, StepResult{Step: s.N, Name: s.Name, Decision: decision, Reason: reason, Detail: detail})
}

func (o *Outcome) block(s CycleStep, reason, detail string) {
	o.step(s, DecisionBlock, reason, detail)
	o.Action, o.Reason, o.Detail, o.Step = ActionBlocked, reason, detail, s.N
}

// Status is what the node says about itself: published as its health
// record, sent to systemd as STATUS=, shown by `clusterrebootd status`.
type Status struct {
	State          string    `json:"state"`
	Reason         string    `json:"reason,omitempty"`
	Detail         string    `json:"detail,omitempty"`
	RebootRequired bool      `json:"reboot_required"`
	LastCheck      time.Time `json:"last_check"`
}

// String is the one-line STATUS= text.
func (s Status) String() string {
	t := s.State
	if s.Reason != "" {
		t += " (" + s.Reason + ")"
	}
	if s.Detail != "" {
		t += ": " + s.Detail
	}
	return t
}

// Mode changes how a cycle acts.
type Mode struct {
	// Simulate changes nothing on the node or in the cluster: no marker,
	// history or slot is written or deleted, no hook runs, no settle wait.
	// The configuration's dry_run must be set too (the child then runs no
	// hook and no reboot command). It does not wait in line either: a lock
	// or reboot slot held by others is its answer (lock_busy,
	// reboot_in_progress).
	Simulate bool
}
