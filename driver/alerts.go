package driver

import (
	"context"
	"fmt"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
)

// childRemote runs the gate's alert and PromQL checks through `crd-lock
// step alerts`: the daemon links no HTTP client (docs/architecture.md).
type childRemote struct {
	child Child
	cfg   config.Config
}

// remoteChecks is the gate.Remote of cfg: nil (no child, no cost) when no
// alert or PromQL check is configured.
func remoteChecks(child Child, cfg config.Config) gate.Remote {
	if child == nil || !cfg.Gate.HasMonitorChecks() {
		return nil
	}
	return childRemote{child: child, cfg: cfg}
}

// Check implements gate.Remote. A child that fails or answers no result
// blocks (fail closed); an interruption is an error.
func (r childRemote) Check(ctx context.Context, phase string) ([]gate.CheckResult, error) {
	var res protocol.AlertsResult
	code, err := r.child.Run(ctx, protocol.StepAlerts, protocol.AlertsArgs{Phase: phase}, r.cfg, &res)
	if code == exitcode.Interrupted || ctx.Err() != nil {
		return nil, exitcode.Errorf(exitcode.Interrupted, "gate: the alert checks were interrupted")
	}
	if err == nil && (code == exitcode.OK || code == exitcode.HealthBlocked) {
		return res.Checks, nil
	}
	why := res.Error
	if err != nil {
		why = err.Error()
	}
	return []gate.CheckResult{{Name: gate.CheckAlerts,
		Reason: fmt.Sprintf("alert checks unknown, so not rebooting: crd-lock step alerts exited %d: %s", int(code), why)}}, nil
}
