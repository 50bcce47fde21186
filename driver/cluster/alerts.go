package cluster

import (
	"context"
	"log/slog"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/alertgate"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
)

// remoteChecks is the under-lock gate's alert and PromQL checks, run here
// in the child directly; nil when none is configured.
func remoteChecks(cfg config.Config) gate.Remote { return alertgate.Remote(cfg) }

// alerts runs `crd-lock step alerts --phase P`: the gate's alert and
// PromQL checks for the daemon, which links no HTTP client. It needs no
// etcd. Exit 0 when every check passed, 3 when one blocked.
func alerts(ctx context.Context, cfg config.Config, args protocol.AlertsArgs, res *protocol.AlertsResult, log *slog.Logger) error {
	res.Phase = args.Phase
	res.Checks = []gate.CheckResult{}
	switch args.Phase {
	case gate.PhasePreLock, gate.PhaseUnderLock, gate.PhasePostReboot:
	default:
		return exitcode.Errorf(exitcode.Config, "crd-lock step alerts: --phase %q: use one of %s", args.Phase, strings.Join(gate.Phases(), ", "))
	}
	checks, err := alertgate.New(cfg).Check(ctx, args.Phase)
	res.Checks = append(res.Checks, checks...)
	if err != nil {
		return err
	}
	var blocked []string
	for _, c := range checks {
		if c.Passed {
			log.Info("alert check passed", "check", c.Name, "url", c.URL, "phase", args.Phase, "reason", c.Reason)
			continue
		}
		log.Warn("alert check blocked", "check", c.Name, "url", c.URL, "phase", args.Phase, "reason", c.Reason, "blocking", c.Blocking)
		blocked = append(blocked, c.Reason)
	}
	if len(blocked) > 0 {
		return exitcode.Errorf(exitcode.HealthBlocked, "gate: %s", strings.Join(blocked, "; "))
	}
	return nil
}
