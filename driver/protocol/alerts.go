package protocol

import (
	"flag"

	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// AlertsArgs are the arguments of `crd-lock step alerts`.
type AlertsArgs struct {
	// Phase is the gate phase the checks run for (their phases: lists).
	Phase string `json:"phase"`
}

// Register adds the alerts flags to fs (the child side).
func (a *AlertsArgs) Register(fs *flag.FlagSet) {
	fs.StringVar(&a.Phase, "phase", gate.PhasePreLock, "gate `phase`: pre-lock, under-lock or post-reboot")
}

// AlertsResult is the JSON of `step alerts`: exit 0 when every check
// passed, 3 when one blocked.
type AlertsResult struct {
	report.Header
	Phase string `json:"phase"`
	// Checks are the alert and PromQL checks of the phase, in order.
	Checks []gate.CheckResult `json:"checks"`
}
