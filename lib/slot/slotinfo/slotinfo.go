// Package slotinfo is what lib/slot's admission answers and reads, without
// etcd code: its Verdict (Refusal as an error), the rollout's failures, its
// pacing marks, and the rollout's progress per wave and group and its
// groups' plans. The daemon, which links no etcd code, decodes them from
// its cycle and status steps' results (driver/protocol's CycleResult and
// RolloutStatus).
package slotinfo

import (
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// Verdict is the admission's answer to one count.
type Verdict struct {
	// Admit: every rule allows the slot now.
	Admit bool `json:"admit"`
	// Wait, when not admitted: the rule will allow it later without anyone
	// acting (a slot freed, a pacing record's lease ended); else the rule
	// refuses until something changes (an operator, a lower wave, health).
	Wait bool `json:"wait,omitempty"`
	// Yield, when not admitted: FleetLock clients that asked first need
	// the lock seat this node holds to take their turn; the node gives the
	// seat up and asks again later (a daemon on its next cycle, a pipeline
	// after a pause, within its --timeout).
	Yield bool `json:"yield,omitempty"`
	// Rule is the rule that said no, Reason one line saying why and what
	// lets it go on.
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Code is the exit code of a refusal.
	Code exitcode.Code `json:"-"`
	// Rules are the effective rules: this entry point's and the live
	// records' and slots', the strictest of each, percentages resolved.
	Rules policy.Effective `json:"rules"`
	// GroupNodes and FleetNodes are the node counts the percentages were
	// resolved against.
	GroupNodes int `json:"group_nodes"`
	FleetNodes int `json:"fleet_nodes"`
	// Policy is the built-in policies' decision on the count's view.
	Policy *policy.Decision `json:"policy,omitempty"`
	// Failures are the failures counted against the budget.
	Failures []Failure `json:"failures,omitempty"`
	// HaltNew: the budget is spent and no halt is recorded yet: the
	// admission records it.
	HaltNew bool `json:"-"`
	// Ticket: this node waits for a budget and keeps a ticket of
	// TicketKind (lib/slot TicketFleet, TicketGroup).
	Ticket     bool   `json:"-"`
	TicketKind string `json:"-"`
	// Marks are the pacing records a paced node waits for (Until from
	// their leases).
	Marks []Mark `json:"-"`
	// Until is when the wait ends by itself (zero: on the next change).
	Until time.Time `json:"until,omitzero"`
}

// Refusal is a verdict that is not an admission, as an error: its Rule,
// and the error with the exit code (exitcode.CodeOf finds it).
type Refusal struct {
	Verdict
	err error
}

func (r *Refusal) Error() string { return r.err.Error() }
func (r *Refusal) Unwrap() error { return r.err }

// Err is the verdict as an error (nil when admitted).
func (v Verdict) Err() error {
	if v.Admit {
		return nil
	}
	code := v.Code
	if code == 0 {
		code = exitcode.HealthBlocked
	}
	return &Refusal{Verdict: v, err: exitcode.Errorf(code, "%s", v.Reason)}
}

// Failure is one failure: recorded (a failure record), or seen (an
// in-flight record without its slot).
type Failure struct {
	Node   string    `json:"node"`
	Group  string    `json:"group"`
	Wave   int       `json:"wave,omitempty"`
	Kind   string    `json:"kind"`
	Detail string    `json:"detail"`
	At     time.Time `json:"at"`
	// By is who recorded it ("" for one seen, not recorded).
	By string `json:"by,omitempty"`
	// ID names it for an acknowledgement ("node/id", lib/slot FailureID):
	// a reboot's loss is named by its slot's lease, the same whether seen
	// from its in-flight record or recorded later.
	ID string `json:"id,omitempty"`
	// Key and CreateRevision are the record as read; Recorded is false for
	// a failure seen from an in-flight record.
	Key            string `json:"key,omitempty"`
	CreateRevision int64  `json:"-"`
	Recorded       bool   `json:"recorded"`
}

// Mark is a pacing, start or wave-completion record: its lease times it.
type Mark struct {
	Node  string    `json:"node"`
	Group string    `json:"group"`
	Wave  int       `json:"wave,omitempty"`
	Since time.Time `json:"since"`
	// Key and Lease are the record as read.
	Key   string `json:"-"`
	Lease int64  `json:"-"`
}

// GroupProgress counts the nodes of one wave of one group. NeedReboot
// includes Waiting; NeedReboot, Down, Done and the nodes up to date or
// unknown make up Nodes; Failed counts the nodes with a failure within the
// failure window, whatever their progress.
type GroupProgress struct {
	Wave       int    `json:"wave"`
	Group      string `json:"group"`
	Nodes      int    `json:"nodes"`
	NeedReboot int    `json:"need_reboot"`
	Waiting    int    `json:"waiting"`
	Down       int    `json:"down"`
	Done       int    `json:"done"`
	Failed     int    `json:"failed"`
}

// GroupPlan is one group's remaining reboots and the rules that pace them.
type GroupPlan struct {
	Group          string `json:"group"`
	Remaining      int    `json:"remaining"`
	MaxHolders     int    `json:"max_holders"`
	MinIntervalSec int    `json:"min_interval_sec"`
}
