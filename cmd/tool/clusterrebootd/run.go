package clusterrebootd

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
	"github.com/clusterrebootd/clusterrebootd/lib/version"
)

// runResult is the JSON of run and simulate.
type runResult struct {
	report.Header
	Command string `json:"command"`
	DryRun  bool   `json:"dry_run"`
	*driver.Outcome
	// Cycles is how many cycles the daemon ran (run without --once).
	Cycles int           `json:"cycles,omitempty"`
	Status driver.Status `json:"status"`
}

// Text renders the steps for people.
func (r runResult) Text(w io.Writer) error {
	if r.Outcome == nil {
		report.Line(w, "cycles", r.Cycles)
		report.Line(w, "state", r.Status.String())
		if r.Error != "" {
			report.Line(w, "error", r.Error)
		}
		return nil
	}
	for _, s := range r.Steps {
		line := fmt.Sprintf("step %d %-19s %-5s", s.Step, s.Name, s.Decision)
		if s.Reason != "" {
			line += " [" + s.Reason + "]"
		}
		if s.Detail != "" {
			line += " " + s.Detail
		}
		fmt.Fprintln(w, line)
	}
	verdict := r.Action
	if r.Reason != "" {
		verdict += " (" + r.Reason + ")"
	}
	report.Line(w, "result", verdict)
	if r.Detail != "" {
		report.Line(w, "why", r.Detail)
	}
	report.Line(w, "exit", fmt.Sprintf("%d %s", r.ExitCode, r.ExitName))
	return nil
}

// runCmd is run (the daemon, or one cycle with --once) and simulate; the
// steps are in runsteps.go.
func runCmd(ctx context.Context, b *base, args []string, stdout, stderr io.Writer, simulate bool) error {
	if err := b.parse(args, stdout); err != nil {
		return err
	}
	res := runResult{Command: b.sub, Header: report.Header{Node: b.c.Node}}
	if !simulate && !b.once && !cli.IsSet(b.fs, "log-format") {
		b.c.LogFormat = "json"
	}
	log, err := b.c.Logger(stderr, Tool)
	if err != nil {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	override := func(c *config.Config) {
		if b.dryRun || simulate {
			c.DryRun = true
		}
	}
	cfg, err := b.load(override)
	res.Node = cfg.NodeName
	if err != nil {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	res.DryRun = cfg.DryRun
	if !simulate {
		lf, err := claimStateDir(cfg)
		if err != nil {
			return finish(stdout, b.format, &res.Header, &res, err)
		}
		defer lf.Close()
	}
	child, err := b.checkedChild(ctx, stderr, cfg)
	if err != nil {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	deps := driver.Deps{Child: child}.Real(b.root)
	m := driver.NewMetrics(version.Get().Version)
	drv := driver.New(cfg, deps, log, m, nil)
	if simulate || b.once {
		return finish(stdout, b.format, &res.Header, &res, cycleOnce(ctx, drv, m, cfg, log, simulate, &res))
	}
	d, stop := newDaemon(daemonSetup{drv: drv, metrics: m, cfg: cfg, log: log, child: child, stderr: stderr,
		load: b.checkedLoad(ctx, override, child), noMemTrim: b.noMemTrim, getenv: os.Getenv})
	defer stop()
	err = d.Run(ctx)
	res.Cycles = d.Cycles()
	res.Status = drv.Status()
	return finish(stdout, b.format, &res.Header, &res, err)
}
