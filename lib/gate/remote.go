package gate

import (
	"context"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// Names of the alert and PromQL checks in Result.Checks.
const (
	CheckAlerts = "alerts"
	CheckPromQL = "promql"
)

// Remote runs the gate's alert and PromQL checks (gate.alerts, gate.promql)
// for a phase. lib/alertgate implements it over HTTP; the daemon runs that
// in a crd-lock child, so that lib/gate, which the daemon links, needs no
// HTTP client. Each result fails closed (an unreachable server blocks); the
// error is only for an interruption (exitcode.Interrupted).
type Remote interface {
	Check(ctx context.Context, phase string) ([]CheckResult, error)
}

// runPhaseChecks runs the built-in checks (not after the reboot), then the
// remote ones (in every phase the configuration names).
func runPhaseChecks(ctx context.Context, runner proc.Runner, c Context, timeout time.Duration) ([]CheckResult, error) {
	var out []CheckResult
	if c.Phase != PhasePostReboot {
		r, err := runChecks(ctx, runner, c.Checks, timeout)
		out = append(out, r...)
		if err != nil {
			return out, err
		}
	}
	if c.Checks.Remote == nil {
		return out, nil
	}
	r, err := c.Checks.Remote.Check(ctx, c.Phase)
	return append(out, r...), err
}
