// Package crdgate implements crd-gate: does the cluster allow this node to
// reboot now? It runs the health script once and answers with its exit
// status.
//
// Synopsis:
//
//	crd-gate [--script PATH] [--health-timeout DURATION] [--phase pre-lock|under-lock|post-reboot]
//	         [--cluster-size N] [--fallback-set NODE,...] [--dry-run]
//	         [--no-login-sessions] [--inactive-unit UNIT]... [--root DIR]
//	         [--alertmanager-url URL | --prometheus-url URL] [--alert-match M]... [--alert-exclude M]...
//	         [--config FILE] [--node NAME] [--format json|text] [--log-level L] [--log-format F]
//
// Description:
//
// crd-gate checks that health_script (or --script) is safe to run as root
// (a regular executable file, not writable by anyone but root or its owner,
// in a directory likewise), then runs it without a shell, in the root
// directory, in its own process group, with a fixed environment that
// carries the node's view of the cluster (NODE_NAME, CLUSTER_SIZE,
// FALLBACK_SET, ETCD_ENDPOINTS, PHASE, LOCK_KEY, the cluster_policies,
// DRY_RUN, HEALTH_TIMEOUT_SEC, PATH, LC_ALL=C) and nothing else: no
// TLS material, no passwords, none of the caller's variables. After
// health_timeout_sec (or --health-timeout) the whole process group is terminated.
// stdout and stderr are captured up to 64 KiB each and reported.
//
// Before the script, in the pre-lock and under-lock phases, the opt-in
// built-in checks of the gate section run (or --no-login-sessions and
// --inactive-unit): no interactive login session in /run/utmp, none of the
// listed systemd units active (systemctl is-active). Each blocks with a
// reason naming the session or unit, and blocks when it cannot tell.
//
// Then, in every phase, the alert and PromQL checks (gate.alerts,
// gate.promql, or --alertmanager-url / --prometheus-url with --alert-match
// and --alert-exclude): no matching alert fires in Alertmanager (silenced
// and inhibited alerts do not count) or Prometheus, and each expression's
// value lies within its bounds. An unreachable server, a timeout or a bad
// answer blocks, naming the URL; a firing alert blocks, naming it.
//
// With no health_script configured, crd-gate blocks (fail closed); set
// health_script to /bin/true to reboot without a cluster health check.
//
// --cluster-size and --fallback-set are normally supplied by the daemon from
// its cluster view; they exist for manual runs. The script contract is
// docs/health-gate.md.
//
// Exit status:
//
//	0    healthy: the script exited 0
//	2    configuration: bad flag or config, script missing, not executable, or writable by others
//	3    blocked: a built-in, alert or PromQL check blocked, or the script exited non-zero, timed out, was killed, could not start, or none is configured
//	130  interrupted
//
// Example:
//
//	crd-gate --script /usr/local/bin/cluster-health-check.sh --health-timeout 20s --format text
package crdgate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/clusterrebootd/clusterrebootd/lib/alertgate"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// Tool is the command's name.
const Tool = "crd-gate"

// logTail bounds the script output copied into a log line.
const logTail = 4096

// Result is the JSON object crd-gate prints.
type Result struct {
	report.Header
	gate.Result
	// TimeoutMS is the timeout the script ran under, in milliseconds.
	TimeoutMS int64 `json:"timeout_ms"`
}

// Text renders the verdict on one line, then the script's output indented.
func (r *Result) Text(w io.Writer) error {
	switch {
	case r.Healthy:
		fmt.Fprintf(w, "healthy: %s may reboot (%s): %s in %dms\n", r.Node, r.Phase, r.Reason, r.DurationMS)
	case r.ExitCode == int(exitcode.HealthBlocked):
		fmt.Fprintf(w, "blocked: %s may not reboot (%s): %s\n", r.Node, r.Phase, r.Reason)
	default:
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
	for _, chk := range r.Checks {
		state := "passed"
		if !chk.Passed {
			state = "blocked"
		}
		fmt.Fprintf(w, "  %s: %s: %s\n", chk.Name, state, chk.Reason)
	}
	writeStream(w, "stdout", r.Stdout, r.StdoutTruncated)
	writeStream(w, "stderr", r.Stderr, r.StderrTruncated)
	return nil
}

func writeStream(w io.Writer, name, s string, truncated bool) {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return
	}
	fmt.Fprintf(w, "  %s:\n", name)
	for _, l := range strings.Split(s, "\n") {
		fmt.Fprintf(w, "    %s\n", l)
	}
	if truncated {
		fmt.Fprintf(w, "    [truncated at %d bytes]\n", gate.MaxOutput)
	}
}

// Run is the entry point of crd-gate: its command tree is one command.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return cli.Dispatch(ctx, Tree(stdout, stderr), args, stdout)
}

// Tree is crd-gate's command tree: a root without subcommands.
func Tree(stdout, stderr io.Writer) *ffcli.Command {
	o := newOptions(stdout)
	return &ffcli.Command{Name: Tool, ShortUsage: Tool + " [flags]", FlagSet: o.fs,
		Exec: func(ctx context.Context, args []string) error { return run(ctx, o, args, stdout, stderr) }}
}

// options are crd-gate's flags.
type options struct {
	fs                         *flag.FlagSet
	c                          cli.Common
	script, phase, fallbackSet *string
	root                       *string
	timeout                    *time.Duration
	clusterSize                *int
	dryRun, noLogins           *bool
	units                      unitList
	alerts                     alertFlags
}

func newOptions(stdout io.Writer) *options {
	o := &options{fs: flag.NewFlagSet(Tool, flag.ContinueOnError)}
	fs := o.fs
	fs.SetOutput(stdout) // --help and --version
	o.c.Register(fs)
	o.script = fs.String("script", "", "health script `path` (overrides health_script)")
	o.timeout = fs.Duration("health-timeout", 0, "kill the script's process group after this `duration`, e.g. 30s (overrides health_timeout_sec)")
	o.phase = fs.String("phase", gate.PhasePreLock, "`phase` passed as PHASE: pre-lock, under-lock or post-reboot")
	cli.Choices(fs, "phase", gate.PhasePreLock, gate.PhaseUnderLock, gate.PhasePostReboot)
	o.clusterSize = fs.Int("cluster-size", 0, "`number` of nodes passed as CLUSTER_SIZE (0: unknown, passed empty; normally set by the daemon)")
	o.fallbackSet = fs.String("fallback-set", "", "comma-separated fallback `nodes` passed as FALLBACK_SET (default cluster_policies.fallback_nodes)")
	o.dryRun = fs.Bool("dry-run", false, "tell the script no reboot follows (DRY_RUN=true; overrides dry_run)")
	o.noLogins = fs.Bool("no-login-sessions", false, "block while an interactive login session is open (overrides gate.no_login_sessions)")
	fs.Var(&o.units, "inactive-unit", "block while systemd `unit` is active (repeatable; replaces gate.inactive_units; '' for none)")
	o.root = fs.String("root", "/", "filesystem root `DIR` that /run/utmp and /proc are read under (for tests and containers)")
	o.alerts.register(fs)
	return o
}

// run is crd-gate with its flags declared.
func run(ctx context.Context, o *options, args []string, stdout, stderr io.Writer) error {
	fs, c := o.fs, &o.c
	script, timeout, phase, clusterSize, fallbackSet := o.script, o.timeout, o.phase, o.clusterSize, o.fallbackSet
	dryRun, noLogins, units, root := o.dryRun, o.noLogins, &o.units, o.root

	res := &Result{Header: report.Header{Tool: Tool}}
	res.Phase = *phase
	res.ExitStatus = -1
	if err := cli.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return emit(stdout, c, res, err)
	}
	res.Phase, res.Node = *phase, c.Node
	if fs.NArg() > 0 {
		return emit(stdout, c, res, exitcode.Errorf(exitcode.Config, "crd-gate: unexpected argument %q; see crd-gate --help", fs.Arg(0)))
	}
	if _, err := c.Output(stdout); err != nil {
		return emit(stdout, c, res, err)
	}
	logger, err := c.Logger(stderr, Tool)
	if err != nil {
		return emit(stdout, c, res, err)
	}
	if *clusterSize < 0 {
		return emit(stdout, c, res, exitcode.Errorf(exitcode.Config, "crd-gate: --cluster-size %d: must be 0 (unknown) or more", *clusterSize))
	}
	if cli.IsSet(fs, "script") && *script != "" && !filepath.IsAbs(*script) {
		abs, err := filepath.Abs(*script)
		if err != nil {
			return emit(stdout, c, res, exitcode.Errorf(exitcode.Config, "crd-gate: --script %s: %v", *script, err))
		}
		*script = abs
	}
	cfg, err := c.Load(fs, func(cfg *config.Config) {
		if cli.IsSet(fs, "script") {
			cfg.HealthScript = *script
		}
		if cli.IsSet(fs, "dry-run") {
			cfg.DryRun = *dryRun
		}
		if cli.IsSet(fs, "no-login-sessions") {
			cfg.Gate.NoLoginSessions = *noLogins
		}
		if cli.IsSet(fs, "inactive-unit") {
			cfg.Gate.InactiveUnits = *units
		}
		o.alerts.apply(fs, cfg)
	})
	res.Node = cfg.NodeName
	if err != nil {
		return emit(stdout, c, res, err)
	}
	gctx := gate.FromConfig(cfg, *phase)
	gctx.ClusterSize = *clusterSize
	gctx.Checks.Root = *root
	gctx.Checks.Remote = alertgate.Remote(cfg)
	if cli.IsSet(fs, "fallback-set") {
		gctx.FallbackSet = splitList(*fallbackSet)
	}
	limit := gate.Timeout(cfg)
	if cli.IsSet(fs, "health-timeout") {
		limit = *timeout
	}
	res.TimeoutMS = limit.Milliseconds()

	logger = logger.With("node", cfg.NodeName, "phase", *phase)
	logger.Debug("running health script", "script", cfg.HealthScript, "timeout", limit)
	res.Result = gate.Run(ctx, proc.Exec{}, cfg.HealthScript, limit, gctx)
	err = res.Result.Err()
	logResult(logger, res, err)
	return emit(stdout, c, res, err)
}

func logResult(l *slog.Logger, res *Result, err error) {
	kv := []any{"script", res.Script, "healthy", res.Healthy, "exit_status", res.ExitStatus,
		"timed_out", res.TimedOut, "duration_ms", res.DurationMS,
		"stdout", tail(res.Stdout), "stderr", tail(res.Stderr)}
	switch {
	case err == nil:
		l.Info("health gate passed", kv...)
	case exitcode.CodeOf(err) == exitcode.HealthBlocked:
		l.Warn("health gate blocked", append(kv, "reason", res.Reason)...)
	}
	// Config errors and interruptions are reported once, by cli.Exec.
}

func tail(s string) string {
	if len(s) <= logTail {
		return s
	}
	return "..." + strings.ToValidUTF8(s[len(s)-logTail:], "")
}

// unitList is a repeatable flag of unit names; an empty value adds none,
// so an empty --inactive-unit replaces the configured list with an empty one.
type unitList []string

func (u *unitList) String() string { return strings.Join(*u, ",") }

func (u *unitList) Set(v string) error {
	if v != "" {
		*u = append(*u, v)
	}
	return nil
}

// splitList splits "a, b,,c" into [a b c].
func splitList(s string) []string {
	out := []string{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// emit prints the one JSON (or text) object and returns err (cli.Emit).
func emit(stdout io.Writer, c *cli.Common, res *Result, err error) error {
	return cli.Emit(stdout, c, res, err)
}
