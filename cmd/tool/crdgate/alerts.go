package crdgate

import (
	"flag"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

// alertFlags are crd-gate's alert-check flags: one check from the command
// line, replacing gate.alerts.
type alertFlags struct {
	alertmanager, prometheus string
	match, exclude           listFlag
	pending                  bool
}

func (a *alertFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.alertmanager, "alertmanager-url", "", "block while a matching alert fires in the Alertmanager at `URL` (replaces gate.alerts)")
	fs.StringVar(&a.prometheus, "prometheus-url", "", "block while a matching alert fires in the Prometheus at `URL` (replaces gate.alerts)")
	fs.Var(&a.match, "alert-match", "only alerts matching `matcher`, e.g. 'severity=\"critical\"' (repeatable; all must match)")
	fs.Var(&a.exclude, "alert-exclude", "ignore alerts matching `matcher`, e.g. 'alertname=\"Watchdog\"' (repeatable)")
	fs.BoolVar(&a.pending, "alert-pending", false, "with --prometheus-url: pending alerts block too")
}

// apply replaces gate.alerts with the check the flags describe, if any;
// config validation then checks the URL and the matchers.
func (a *alertFlags) apply(fs *flag.FlagSet, cfg *config.Config) {
	var checks []config.AlertCheck
	if cli.IsSet(fs, "alertmanager-url") {
		checks = append(checks, config.AlertCheck{URL: a.alertmanager, Source: config.SourceAlertmanager, Match: a.match, Exclude: a.exclude})
	}
	if cli.IsSet(fs, "prometheus-url") {
		checks = append(checks, config.AlertCheck{URL: a.prometheus, Source: config.SourcePrometheus, Match: a.match, Exclude: a.exclude, IncludePending: a.pending})
	}
	if checks != nil {
		cfg.Gate.Alerts = checks
	}
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, " ") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}
