// Package crddetect implements crd-detect: is a reboot needed on this node?
//
// Synopsis:
//
//	crd-detect [--detector auto|kernel|file:PATH|command:ARGV]... [--detector-file PATH]...
//	           [--detector-cmd ARGV]... [--detector-timeout SEC] [--root DIR]
//	           [--running-kernel RELEASE] [--config FILE] [--node NAME]
//	           [--format json|text|nagios|prom] [--log-level L] [--log-format F]
//
// Description:
//
// crd-detect runs the detectors of reboot_required_detectors (or those given
// with --detector, --detector-file and --detector-cmd, which replace them) and
// answers through its exit status and one JSON object on stdout:
// reboot_required and, per detector, name, type, required, detail or error,
// duration_ms. A reboot is required only when a detector says so and no
// detector failed; a failed detector (missing program, timeout, an exit code
// outside the declared lists, an unreadable path) makes the answer exit 8,
// never "needed" and never "not needed". See docs/detectors.md.
//
// --format nagios prints one Nagios plugin status line (with perfdata and a
// line per detector) and exits with Nagios's codes; --format prom prints the
// node_exporter textfile format and keeps the table below.
//
// Exit status:
//
//	0  a reboot is required (nagios: 0 OK, no reboot required)
//	1  no reboot is required (nagios: 1 WARNING, a reboot is required)
//	2  bad usage, bad flag, invalid configuration (nagios: 3 UNKNOWN)
//	8  a detector failed; no answer (nagios: 3 UNKNOWN)
//	130 interrupted (nagios: 3 UNKNOWN)
//
// Example:
//
//	crd-detect --detector-file /var/run/reboot-required && echo "reboot needed"
//	crd-detect --detector auto --detector kernel --format text
//	crd-detect --format prom > /var/lib/node_exporter/crd.prom.$$; mv /var/lib/node_exporter/crd.prom.$$ /var/lib/node_exporter/crd.prom
package crddetect

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/detect"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// Tool is the name in output and messages.
const Tool = "crd-detect"

// Formats crd-detect accepts besides json and text.
const (
	Nagios report.Format = "nagios"
	Prom   report.Format = "prom"
)

// Result is the JSON object crd-detect prints.
type Result struct {
	report.Header
	// RebootRequired is true exactly when exit_code is 0.
	RebootRequired bool `json:"reboot_required"`
	// Detectors holds each detector's answer, in configuration order.
	Detectors []detect.Result `json:"detectors"`
	// DurationMS is how long the whole check took.
	DurationMS int64 `json:"duration_ms"`
}

// Run is the entry point of crd-detect: its command tree is one command.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return cli.Dispatch(ctx, Tree(stdout, stderr), args, stdout)
}

// Tree is crd-detect's command tree: a root without subcommands.
func Tree(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet(Tool, flag.ContinueOnError)
	fs.SetOutput(stdout) // --help and --version
	c, o := new(cli.Common), new(options)
	c.Register(fs)
	fs.Lookup("format").Usage = "output `format`: json (default when stdout is not a terminal), text, nagios (a Nagios/Icinga plugin's line and exit code) or prom (node_exporter textfile exposition)"
	cli.Choices(fs, "format", string(report.JSON), string(report.Text), string(Nagios), string(Prom))
	o.register(fs)
	return &ffcli.Command{Name: Tool, ShortUsage: Tool + " [flags]", FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error { return run(ctx, fs, c, o, args, stdout, stderr) }}
}

// run is crd-detect with its flags declared.
func run(ctx context.Context, fs *flag.FlagSet, c *cli.Common, o *options, args []string, stdout, stderr io.Writer) error {
	start := time.Now()
	res := &Result{Header: report.Header{Tool: Tool}, Detectors: []detect.Result{}}
	if err := cli.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		res.Node = c.Node
		return finish(stdout, formatAfterUsageError(c.Format), res, err, start)
	}
	res.Node = c.Node
	format, err := c.Output(stdout, Nagios, Prom)
	if err != nil {
		return finish(stdout, report.JSON, res, err, start)
	}
	if fs.NArg() > 0 {
		return finish(stdout, format, res, exitcode.Errorf(exitcode.Config, "%s: unexpected argument %q: detectors are given with "+
			"--detector, --detector-file or --detector-cmd (see %s --help)", Tool, fs.Arg(0), Tool), start)
	}
	if o.timeoutSec < 0 {
		return finish(stdout, format, res, exitcode.Errorf(exitcode.Config, "%s: --detector-timeout %d: must be a positive number of seconds (0: timeout_sec of each detector)", Tool, o.timeoutSec), start)
	}
	logger, err := c.Logger(stderr, Tool)
	if err != nil {
		return finish(stdout, format, res, err, start)
	}
	cfg, err := c.Load(fs, o.apply)
	if cfg.NodeName != "" {
		res.Node = cfg.NodeName
	}
	if err != nil {
		return finish(stdout, format, res, err, start)
	}
	env := detect.Env{Root: o.root}
	if o.runningKernel != "" {
		release := o.runningKernel
		env.Uname = func() (string, error) { return release, nil }
	}
	ds, err := detect.New(cfg.Detectors, env)
	if err != nil {
		return finish(stdout, format, res, err, start)
	}
	rep := detect.Check(ctx, ds)
	for _, r := range rep.Detectors {
		logger.Debug("detector", "detector", r.Name, "type", r.Type, "required", r.Required, "detail", r.Detail, "error", r.Err, "duration_ms", r.DurationMS)
	}
	res.Detectors = rep.Detectors
	res.RebootRequired = rep.RebootRequired
	return finish(stdout, format, res, verdict(rep), start)
}

// verdict turns a report into Run's error: nil when a reboot is required,
// exit code 1 when not, the report's error otherwise.
func verdict(rep detect.Report) error {
	if rep.Err != nil {
		return rep.Err
	}
	if !rep.RebootRequired {
		return exitcode.Errorf(exitcode.No, "%s: no reboot required", Tool)
	}
	return nil
}

// formatAfterUsageError picks the output of a run whose flags did not
// parse: nagios and prom when asked for (a monitoring system reads them),
// text when asked for, JSON otherwise.
func formatAfterUsageError(f string) report.Format {
	switch report.Format(f) {
	case Nagios, Prom, report.Text:
		return report.Format(f)
	}
	return report.JSON
}

// Settle fills the header from err; "no reboot required" (exit 1) is an
// answer, not an error, so it leaves no error text.
func (r *Result) Settle(err error) {
	r.Header.Settle(err)
	if exitcode.CodeOf(err) == exitcode.No {
		r.Error = ""
	}
}

// finish prints res in format and returns the error Run ends with: err,
// except in nagios mode, where the exit codes are Nagios's. JSON and text
// end as every tool's result does (report.Finish).
func finish(stdout io.Writer, format report.Format, res *Result, err error, start time.Time) error {
	if res.Node == "" {
		// Before the configuration is loaded: the name it would default to.
		res.Node, _ = os.Hostname()
	}
	res.DurationMS = time.Since(start).Milliseconds()
	switch format {
	case Nagios:
		res.Settle(err)
		if werr := writeNagios(stdout, res); werr != nil {
			return exitcode.New(nagiosUnknown, werr)
		}
		return nagiosError(err)
	case Prom:
		res.Settle(err)
		if werr := writeProm(stdout, res, time.Now()); werr != nil && err == nil {
			return exitcode.Errorf(exitcode.Internal, "%s: write metrics: %w", Tool, werr)
		}
		return err
	default:
		return report.Finish(stdout, format, res, err)
	}
}
