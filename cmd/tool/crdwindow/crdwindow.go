// Package crdwindow implements crd-window: is a reboot allowed now by the
// maintenance (allow) and blackout (deny) windows?
//
// Synopsis:
//
//	crd-window [--at RFC3339] [--allow SPEC]... [--deny SPEC]... [--timezone ZONE]
//	           [--config FILE] [--format json|text] [--node NAME]
//	           [--log-level LEVEL] [--log-format FORMAT]
//
// Description:
//
// crd-window evaluates windows.allow, windows.deny and windows.timezone from
// the configuration (or the --allow, --deny and --timezone flags, which
// replace them) at the current time or at --at, and prints one JSON object:
// open, reason, window (the deciding specification), timezone, at, next_open,
// next_close, allow and deny, besides the common tool, exit_code, exit_name,
// node and error. Deny windows win over allow windows; when any allow window
// is set the instant must be inside one; without windows it is always open.
// The window syntax is described in docs/windows.md and lib/window.
//
// Exit status:
//
//	0   open: a reboot may start now
//	2   bad flag, configuration, window specification, --at or time zone
//	5   closed (window_closed): inside a deny window or outside every allow window
//	70  internal error (a bug)
//
// Example:
//
//	crd-window --timezone Europe/Berlin --deny 'Fri 18:00-Mon 08:00' \
//	    --allow 'Tue 22:00-23:00' --at 2026-12-01T22:30:00+01:00 --format text
//	open until 2026-12-01T23:00:00+01:00 (inside allow window "Tue 22:00-23:00")
//	evaluated at 2026-12-01T22:30:00+01:00 in Europe/Berlin
package crdwindow

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
	"github.com/clusterrebootd/clusterrebootd/lib/window"
)

const tool = "crd-window"

// Result is the one JSON object crd-window prints.
type Result struct {
	report.Header
	// Open reports whether a reboot may start at At.
	Open bool `json:"open"`
	// Reason says why (see window.Decision.Reason).
	Reason string `json:"reason"`
	// Window is the specification that decided, when a single one did.
	Window string `json:"window,omitempty"`
	// Timezone is the zone the windows were read in ("Local" is the host's).
	Timezone string `json:"timezone"`
	// At is the evaluated instant, RFC3339 in Timezone.
	At string `json:"at"`
	// NextOpen and NextClose are the next closed→open and open→closed
	// changes, RFC3339 in Timezone; omitted when there is none within the
	// horizon (15 days, 400 with a monthly or dated window).
	NextOpen  string `json:"next_open,omitempty"`
	NextClose string `json:"next_close,omitempty"`
	// Allow and Deny are the windows that were evaluated.
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
	// horizonDays is how far ahead NextOpen and NextClose were looked for.
	horizonDays int
}

// Text renders the result in a line or two for people.
func (r *Result) Text(w io.Writer) error {
	if r.ExitCode != int(exitcode.OK) && r.ExitCode != int(exitcode.WindowClosed) {
		_, err := fmt.Fprintf(w, "error: %s\n", r.Error)
		return err
	}
	state, next, change := "closed", r.NextOpen, "opening"
	if r.Open {
		state, next, change = "open", r.NextClose, "closing"
	}
	line := fmt.Sprintf("%s until %s (%s)", state, next, r.Reason)
	if next == "" {
		line = fmt.Sprintf("%s, with no %s in the next %d days (%s)", state, change, r.horizonDays, r.Reason)
	}
	_, err := fmt.Fprintf(w, "%s\nevaluated at %s in %s\n", line, r.At, r.Timezone)
	return err
}

// specList is a repeatable flag: each use adds one window specification.
// An empty value adds none, so an empty --deny replaces the configured list
// with an empty one.
type specList []string

func (l *specList) String() string { return strings.Join(*l, ", ") }

// Set adds a window; "none" adds none, so that --allow none replaces the
// configured windows with no window at all (an empty value is refused: it
// is what an unset shell variable gives).
func (l *specList) Set(s string) error {
	if strings.TrimSpace(s) != "" && s != noWindow {
		*l = append(*l, s)
	}
	return nil
}

// noWindow is the value of --allow and --deny that adds no window.
const noWindow = "none"

// Run is the entry point of crd-window; it evaluates at time.Now unless --at
// is given.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return run(args, stdout, stderr, time.Now)
}

// run is Run with the clock injected.
func run(args []string, stdout, stderr io.Writer, now func() time.Time) error {
	return cli.Dispatch(context.Background(), tree(stdout, stderr, now), args, stdout)
}

// Tree is crd-window's command tree: a root without subcommands.
func Tree(stdout, stderr io.Writer) *ffcli.Command { return tree(stdout, stderr, time.Now) }

func tree(stdout, stderr io.Writer, now func() time.Time) *ffcli.Command {
	fs := flag.NewFlagSet(tool, flag.ContinueOnError)
	fs.SetOutput(stdout) // --help and --version
	c, o := new(cli.Common), new(options)
	c.Register(fs)
	fs.StringVar(&o.at, "at", "", "evaluate at this `time` (RFC3339, e.g. 2026-12-01T22:30:00+01:00) instead of now")
	fs.Var(&o.allow, "allow", "allow window `spec` (repeatable; replaces windows.allow; none for no window)")
	fs.Var(&o.deny, "deny", "deny window `spec` (repeatable; replaces windows.deny; none for no window)")
	fs.StringVar(&o.timezone, "timezone", "", "IANA time `zone` the windows are read in (replaces windows.timezone; Local is the host's)")
	return &ffcli.Command{Name: tool, ShortUsage: tool + " [flags]", FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			return evaluateArgs(fs, c, o, args, stdout, stderr, now)
		}}
}

// evaluateArgs is crd-window with its flags declared.
func evaluateArgs(fs *flag.FlagSet, c *cli.Common, o *options, args []string, stdout, stderr io.Writer, now func() time.Time) error {

	res := &Result{Header: report.Header{Tool: tool}, Allow: []string{}, Deny: []string{}}
	format := report.JSON
	err := cli.Parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	if err == nil {
		format, err = c.Output(stdout)
		if err != nil {
			format = report.JSON
		}
	}
	if err == nil {
		err = evaluate(fs, c, o, res, stderr, now)
	}
	if res.Node == "" {
		res.Node = c.Node
	}
	return report.Finish(stdout, format, res, err)
}

// options are crd-window's own flags.
type options struct {
	at, timezone string
	allow, deny  specList
}

// evaluate checks the flags, loads the configuration, and fills res with the
// decision. A closed window is an exitcode.WindowClosed error.
func evaluate(fs *flag.FlagSet, c *cli.Common, o *options, res *Result, stderr io.Writer, now func() time.Time) error {
	if fs.NArg() > 0 {
		return exitcode.Errorf(exitcode.Config, "%s: unexpected argument %q: windows are given with --allow and --deny (see %s --help)", tool, fs.Arg(0), tool)
	}
	at := now()
	if o.at != "" {
		t, err := time.Parse(time.RFC3339, o.at)
		if err != nil {
			return exitcode.Errorf(exitcode.Config, "--at %q is not an RFC3339 time: write it like 2026-12-01T22:30:00+01:00 (or with Z for UTC)", o.at)
		}
		at = t
	}
	for _, f := range []struct {
		name  string
		specs specList
	}{{"allow", o.allow}, {"deny", o.deny}} {
		for _, spec := range f.specs {
			if err := window.Validate(spec); err != nil {
				return exitcode.Errorf(exitcode.Config, "--%s %v", f.name, err)
			}
		}
	}
	if o.timezone != "" {
		if _, err := window.LoadLocation(o.timezone); err != nil {
			return exitcode.Errorf(exitcode.Config, "--timezone: %v", err)
		}
	}
	logger, err := c.Logger(stderr, tool)
	if err != nil {
		return err
	}
	cfg, err := c.Load(fs, func(cfg *config.Config) {
		if cli.IsSet(fs, "allow") {
			cfg.Windows.Allow = o.allow
		}
		if cli.IsSet(fs, "deny") {
			cfg.Windows.Deny = o.deny
		}
		if o.timezone != "" {
			cfg.Windows.Timezone = o.timezone
		}
	})
	res.Node = cfg.NodeName
	if err != nil {
		return err
	}
	w := cfg.Windows
	res.Allow, res.Deny, res.Timezone = append(res.Allow, w.Allow...), append(res.Deny, w.Deny...), w.Timezone
	loc, err := window.LoadLocation(w.Timezone)
	if err != nil {
		return exitcode.Errorf(exitcode.Config, "config %s: windows.timezone: %v", c.ConfigPath, err)
	}
	res.Timezone = loc.String()
	res.At = at.In(loc).Format(time.RFC3339)
	// Configuration validation checks the specifications too; checking here
	// again keeps the field name in the message whatever validation ran.
	for _, f := range []struct {
		name  string
		specs []string
	}{{"allow", w.Allow}, {"deny", w.Deny}} {
		for i, spec := range f.specs {
			if err := window.Validate(spec); err != nil {
				return exitcode.Errorf(exitcode.Config, "config %s: windows.%s[%d]: %v", c.ConfigPath, f.name, i, err)
			}
		}
	}
	sched, err := window.New(w.Allow, w.Deny, loc)
	if err != nil {
		return err
	}
	d := sched.At(at)
	res.horizonDays = int(sched.Horizon() / (24 * time.Hour))
	res.Open, res.Reason, res.Window = d.Open, d.Reason, d.Window
	res.NextOpen, res.NextClose = rfc3339(d.NextOpen), rfc3339(d.NextClose)
	logger.Debug("window decision", "open", d.Open, "reason", d.Reason, "at", res.At, "timezone", res.Timezone)
	if d.Open {
		return nil
	}
	next := fmt.Sprintf("no opening within the next %d days", res.horizonDays)
	if res.NextOpen != "" {
		next = "opens at " + res.NextOpen
	}
	return exitcode.Errorf(exitcode.WindowClosed, "%s: closed at %s: %s; %s", tool, res.At, d.Reason, next)
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339)
}
