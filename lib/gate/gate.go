// Package gate runs the cluster health gate: the operator's health_script,
// given the node's view of the cluster in its environment, decides whether
// this node may reboot now (exit 0) or not (anything else).
//
// The script runs without a shell, in a process group of its own, in the
// root directory, with a fixed environment (never the caller's, never TLS
// key material or passwords) and a timeout that terminates the whole group.
// Its stdout and stderr are captured up to 64 KiB each, head and tail (its
// last line, the verdict's reason, always survives). A script that
// cannot be trusted (see CheckScript) never runs. The contract for script
// authors is docs/health-gate.md.
//
// Before the script, in the pre-lock and under-lock phases, Run runs the
// opt-in built-in checks of the gate section (see Checks): no interactive
// login session, none of some systemd units active.
//
// The daemon calls Run for the pre-lock and post-reboot phases and runs the
// under-lock check as a child in the lock's context; crd-gate is the same
// call from the command line.
package gate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// The phases a health check runs in (PHASE).
const (
	PhasePreLock    = "pre-lock"
	PhaseUnderLock  = "under-lock"
	PhasePostReboot = "post-reboot"
)

// Phases lists the valid phases in the order a reboot cycle passes them.
func Phases() []string { return []string{PhasePreLock, PhaseUnderLock, PhasePostReboot} }

// Path is the PATH every health script gets, whatever the caller's.
const Path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// MaxOutput bounds each captured stream of the script.
const MaxOutput = proc.DefaultMaxOutput

// NoScriptReason is the reason given when no health_script is configured:
// the gate then blocks (fail closed).
const NoScriptReason = "no health_script configured: the gate blocks every reboot until one is set; set health_script to /bin/true to reboot without a cluster health check"

// Context is what the node knows about the cluster, handed to the script as
// environment variables (see Environ).
type Context struct {
	// Node is this node's name (NODE_NAME).
	Node string
	// ClusterSize is the number of nodes the daemon knows of; 0 means
	// unknown and is passed as an empty CLUSTER_SIZE.
	ClusterSize int
	// FallbackSet names the fallback nodes (FALLBACK_SET, comma-separated).
	FallbackSet []string
	// EtcdEndpoints are the etcd client URLs (ETCD_ENDPOINTS, comma-separated).
	EtcdEndpoints []string
	// Phase is pre-lock, under-lock or post-reboot (PHASE).
	Phase string
	// LockKey is the etcd lock key (LOCK_KEY).
	LockKey string
	// MinHealthyFraction, MinHealthyAbsolute and ForbidIfOnlyFallbackLeft
	// are the cluster_policies, for scripts that apply them to their own
	// view of the cluster.
	MinHealthyFraction       float64
	MinHealthyAbsolute       int
	ForbidIfOnlyFallbackLeft bool
	// DryRun tells the script no reboot will follow (DRY_RUN).
	DryRun bool
	// Checks are the built-in checks run before the script in the
	// pre-lock and under-lock phases; they are not passed to the script.
	Checks Checks
}

// Environ is the complete environment of the script: the context, a fixed
// PATH and LC_ALL=C. Every variable is always present (empty when unknown)
// so that scripts may run with `set -u`.
func (c Context) Environ() []string {
	size := ""
	if c.ClusterSize > 0 {
		size = strconv.Itoa(c.ClusterSize)
	}
	return []string{
		"PATH=" + Path,
		"LC_ALL=C",
		"NODE_NAME=" + c.Node,
		"CLUSTER_SIZE=" + size,
		"FALLBACK_SET=" + strings.Join(c.FallbackSet, ","),
		"ETCD_ENDPOINTS=" + strings.Join(c.EtcdEndpoints, ","),
		"PHASE=" + c.Phase,
		"LOCK_KEY=" + c.LockKey,
		"MIN_HEALTHY_FRACTION=" + strconv.FormatFloat(c.MinHealthyFraction, 'g', -1, 64),
		"MIN_HEALTHY_ABSOLUTE=" + strconv.Itoa(c.MinHealthyAbsolute),
		"FORBID_IF_ONLY_FALLBACK_LEFT=" + strconv.FormatBool(c.ForbidIfOnlyFallbackLeft),
		"DRY_RUN=" + strconv.FormatBool(c.DryRun),
	}
}

// Result is the outcome of one health check.
type Result struct {
	// Script is the path that was (or would have been) run.
	Script string `json:"script"`
	// Phase is the phase the check ran in.
	Phase string `json:"phase"`
	// Healthy is true only when the script ran and exited 0.
	Healthy bool `json:"healthy"`
	// ExitStatus is the script's exit status; -1 when it did not exit by
	// itself (signal, timeout, never started).
	ExitStatus int `json:"exit_status"`
	// Signal names the signal that ended the script (e.g. SIGKILL).
	Signal string `json:"signal,omitempty"`
	// TimedOut is set when the timeout expired and the group was killed.
	TimedOut bool `json:"timed_out"`
	// DurationMS is the script's wall time in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// Stdout and Stderr are the captured streams, each at most MaxOutput bytes.
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	// Reason is the one-line verdict.
	Reason string `json:"reason"`
	// Checks are the checks that ran before the script, in order: the
	// built-in ones (gate.no_login_sessions, gate.inactive_units; not after
	// the reboot), then the alert and PromQL checks (gate.alerts,
	// gate.promql); omitted when none ran.
	Checks []CheckResult `json:"checks,omitempty"`

	err error
}

// Err is nil when the check passed. Otherwise it carries the exit code:
// HealthBlocked for a script that failed, timed out, was killed or could
// not be started, and for a missing health_script; Config for a script
// that CheckScript refuses or bad arguments; Interrupted when ctx ended
// the run.
func (r Result) Err() error {
	if r.Healthy {
		return nil
	}
	if r.err != nil {
		return r.err
	}
	reason := r.Reason
	if reason == "" {
		reason = "health check did not pass"
	}
	return exitcode.Errorf(exitcode.HealthBlocked, "gate: %s", reason)
}

// Run checks script with CheckScript and runs it through runner with the
// environment of c, killing its process group after timeout. An empty
// script blocks (see NoScriptReason). Run never returns an error of its
// own: Result.Err says why the check did not pass.
func Run(ctx context.Context, runner proc.Runner, script string, timeout time.Duration, c Context) Result {
	res := Result{Script: script, Phase: c.Phase, ExitStatus: -1}
	fail := func(err error) Result {
		res.err = err
		res.Reason = strings.TrimPrefix(err.Error(), "gate: ")
		return res
	}
	if !validPhase(c.Phase) {
		return fail(exitcode.Errorf(exitcode.Config, "gate: phase %q: use one of %s", c.Phase, strings.Join(Phases(), ", ")))
	}
	if timeout <= 0 {
		return fail(exitcode.Errorf(exitcode.Config, "gate: health timeout %s: must be positive; set health_timeout_sec", timeout))
	}
	var passed []string
	checks, err := runPhaseChecks(ctx, runner, c, timeout)
	res.Checks = checks
	if err != nil {
		return fail(err)
	}
	var stopped []string
	for _, chk := range checks {
		if chk.Passed {
			passed = append(passed, chk.Reason)
		} else {
			stopped = append(stopped, chk.Reason)
		}
	}
	if len(stopped) > 0 {
		return fail(exitcode.Errorf(exitcode.HealthBlocked, "gate: %s", strings.Join(stopped, "; ")))
	}
	if script == "" {
		return fail(exitcode.Errorf(exitcode.HealthBlocked, "gate: %s", NoScriptReason))
	}
	if err := CheckScript(script); err != nil {
		return fail(err)
	}
	env := append(c.Environ(), "HEALTH_TIMEOUT_SEC="+strconv.FormatFloat(timeout.Seconds(), 'g', -1, 64))
	pr := runner.Run(ctx, proc.Spec{Argv: []string{script}, Env: env, Dir: "/", Timeout: timeout, MaxOutput: MaxOutput})

	res.ExitStatus = pr.ExitCode
	res.Signal = pr.Signal
	res.TimedOut = pr.TimedOut
	res.DurationMS = pr.Duration.Milliseconds()
	res.Stdout, res.Stderr = pr.Stdout, pr.Stderr
	res.StdoutTruncated, res.StderrTruncated = pr.StdoutTruncated, pr.StderrTruncated

	blocked := func(format string, args ...any) Result {
		return fail(exitcode.Errorf(exitcode.HealthBlocked, "gate: health script %s "+format, append([]any{script}, args...)...))
	}
	switch {
	case pr.StartErr != nil:
		return blocked("could not be started: %v", withoutPath(pr.StartErr))
	case pr.Canceled:
		return fail(exitcode.New(exitcode.Interrupted, fmt.Errorf("gate: health script %s stopped: the check was interrupted: %w", script, context.Canceled)))
	case pr.TimedOut:
		return blocked("timed out after %s%s", timeout, outputTail(pr))
	case pr.Signal != "":
		return blocked("killed by signal %s%s", res.Signal, outputTail(pr))
	case pr.ExitCode != 0:
		return blocked("exited %d%s", pr.ExitCode, outputTail(pr))
	}
	res.Healthy = true
	res.Reason = strings.Join(append(passed, fmt.Sprintf("health script %s exited 0", script)), "; ")
	return res
}

func validPhase(p string) bool {
	for _, v := range Phases() {
		if p == v {
			return true
		}
	}
	return false
}

// outputTail is ": <last line>" from stderr, else from stdout, or "".
func outputTail(pr proc.Result) string {
	for _, s := range []string{pr.Stderr, pr.Stdout} {
		if l := proc.LastLine(s); l != "" {
			return ": " + l
		}
	}
	return ""
}

// FromConfig builds the Context of cfg for phase. ClusterSize stays 0
// (unknown): only the daemon's cluster view knows it.
func FromConfig(cfg config.Config, phase string) Context {
	return Context{
		Node:                     cfg.NodeName,
		FallbackSet:              cfg.ClusterPolicies.FallbackNodes,
		EtcdEndpoints:            cfg.EtcdEndpoints,
		Phase:                    phase,
		LockKey:                  cfg.LockKeyForGroup(),
		MinHealthyFraction:       cfg.ClusterPolicies.MinHealthyFraction,
		MinHealthyAbsolute:       cfg.ClusterPolicies.MinHealthyAbsolute,
		ForbidIfOnlyFallbackLeft: cfg.ClusterPolicies.ForbidIfOnlyFallbackLeft,
		DryRun:                   cfg.DryRun,
		Checks:                   ChecksFromConfig(cfg),
	}
}

// Timeout is health_timeout_sec of cfg as a duration.
func Timeout(cfg config.Config) time.Duration {
	return time.Duration(cfg.HealthTimeoutSec) * time.Second
}
