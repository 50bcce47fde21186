package clusterrebootd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/detect"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
	"github.com/clusterrebootd/clusterrebootd/lib/trust"
	"github.com/clusterrebootd/clusterrebootd/lib/version"
)

// versionResult is the JSON of version.
type versionResult struct {
	report.Header
	version.Info
}

func (r versionResult) Text(w io.Writer) error {
	_, err := fmt.Fprintln(w, version.Line(Tool))
	return err
}

func versionCmd(b *base, args []string, stdout, stderr io.Writer) error {
	if err := b.parse(args, stdout); err != nil {
		return err
	}
	res := versionResult{Info: version.Get()}
	return finish(stdout, b.format, &res.Header, &res, nil)
}

// validateResult is the JSON of validate-config.
type validateResult struct {
	report.Header
	Config   string           `json:"config"`
	Sources  []string         `json:"sources"`
	Valid    bool             `json:"valid"`
	Problems []config.Problem `json:"problems"`
	// Warnings do not make the file invalid: a path the daemon writes that
	// the shipped unit's sandbox keeps read-only.
	Warnings []config.Problem `json:"warnings"`
}

func (r validateResult) Text(w io.Writer) error {
	if r.Valid {
		fmt.Fprintf(w, "%s: valid (%s)\n", r.Config, strings.Join(r.Sources, ", "))
	} else {
		fmt.Fprintf(w, "%s: %d problem(s)\n", r.Config, len(r.Problems))
		for _, p := range r.Problems {
			fmt.Fprintln(w, "  "+p.String())
		}
	}
	for _, p := range r.Warnings {
		fmt.Fprintln(w, "warning: "+p.String())
	}
	return nil
}

func validateCmd(b *base, args []string, stdout, stderr io.Writer) error {
	if err := b.parse(args, stdout); err != nil {
		return err
	}
	res := validateResult{Config: b.c.ConfigPath, Problems: []config.Problem{}, Sources: []string{}, Warnings: []config.Problem{}}
	cfg, err := b.load(nil)
	res.Node = cfg.NodeName
	if s := cfg.Sources(); s != nil {
		res.Sources = s
	}
	var ve *config.ValidationError
	switch {
	case errors.As(err, &ve):
		res.Problems = append(res.Problems, ve.Problems...)
	case err != nil:
		// The file could not be read as YAML at all: nothing else to check.
		res.Problems = append(res.Problems, config.Problem{Message: err.Error()})
		res.Valid = false
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	// Every stage runs, so that one run lists every problem: the
	// detectors' own checks (lib/detect) find what the schema cannot, and
	// the gate's check of the health script (it exists, is executable, and
	// nobody but root or the daemon's user can change it or its
	// directories) what every cycle would block on. The script is not part
	// of loading, which every tool does: crd-detect has no business failing
	// over a health script. A stage whose field has a problem already is
	// skipped, so that nothing is listed twice.
	if !hasProblem(res.Problems, "reboot_required_detectors") {
		if _, derr := detect.New(cfg.Detectors, detect.Env{}); derr != nil {
			res.Problems = append(res.Problems, config.Problem{Field: "reboot_required_detectors", Message: derr.Error()})
		}
	}
	if cfg.HealthScript != "" && !hasProblem(res.Problems, "health_script") {
		if gerr := gate.CheckScript(cfg.HealthScript); gerr != nil {
			res.Problems = append(res.Problems, config.Problem{Field: "health_script", Where: cfg.Where("health_script"),
				Message: strings.TrimPrefix(gerr.Error(), "gate: ")})
		}
	}
	res.Problems = append(res.Problems, untrustedCommands(&cfg, res.Problems)...)
	res.Problems = append(res.Problems, b.notificationProblems(cfg, res.Problems, stderr)...)
	res.Warnings = append(res.Warnings, sandboxWarnings(&cfg, b.root)...)
	if len(res.Problems) > 0 {
		err = exitcode.Errorf(exitcode.Config, "config %s: %d problem(s), the first: %s", b.c.ConfigPath, len(res.Problems), res.Problems[0])
	}
	res.Valid = err == nil
	return finish(stdout, b.format, &res.Header, &res, err)
}

// untrustedCommands checks every program the daemon would run as root
// (detector commands, hooks, the reboot command) as the runner will
// (lib/trust): one that someone other than root or this user could change
// would be refused at run time, so it is a problem now. A program that does
// not exist yet is not one: it may be installed later, and running it says so.
func untrustedCommands(cfg *config.Config, known []config.Problem) []config.Problem {
	var cmds [][2]string
	for i, d := range cfg.Detectors {
		if d.Type == "command" && len(d.Cmd) > 0 {
			cmds = append(cmds, [2]string{fmt.Sprintf("reboot_required_detectors[%d].cmd[0]", i), d.Cmd[0]})
		}
	}
	for _, h := range []struct {
		field string
		hooks []config.Hook
	}{{"pre_reboot_hooks", cfg.PreRebootHooks}, {"post_reboot_hooks", cfg.PostRebootHooks}, {"abort_hooks", cfg.AbortHooks}} {
		for i, hk := range h.hooks {
			if len(hk.Cmd) > 0 {
				cmds = append(cmds, [2]string{fmt.Sprintf("%s[%d].cmd[0]", h.field, i), hk.Cmd[0]})
			}
		}
	}
	if len(cfg.RebootCommand) > 0 {
		cmds = append(cmds, [2]string{"reboot_command[0]", cfg.RebootCommand[0]})
	}
	var probs []config.Problem
	for _, c := range cmds {
		if !filepath.IsAbs(c[1]) || hasProblem(known, c[0]) {
			continue
		}
		if err := trust.Check(c[1], os.Geteuid()); trust.IsUntrusted(err) {
			probs = append(probs, config.Problem{Field: c[0], Where: cfg.Where(c[0]),
				Message: fmt.Sprintf("%s would be refused: %v", c[1], err)})
		}
	}
	return probs
}

// hasProblem reports whether a problem concerns field or an element or
// member of it.
func hasProblem(probs []config.Problem, field string) bool {
	for _, p := range probs {
		if p.Field == field || strings.HasPrefix(p.Field, field+"[") || strings.HasPrefix(p.Field, field+".") {
			return true
		}
	}
	return false
}

// localState is what this node knows without etcd.
type localState struct {
	KillSwitch       bool              `json:"kill_switch"`
	KillSwitchReason string            `json:"kill_switch_reason,omitempty"`
	Marker           *reboot.Marker    `json:"marker,omitempty"`
	RebootLoop       *driver.LoopBlock `json:"reboot_loop,omitempty"`
	// RebootsLastDay is null when the history cannot be read (HistoryError).
	RebootsLastDay *int   `json:"reboots_last_day"`
	HistoryError   string `json:"history_error,omitempty"`
	// MarkerError says why the reboot marker could not be read.
	MarkerError      string `json:"marker_error,omitempty"`
	MaxRebootsPerDay int    `json:"max_reboots_per_day"`
	LastReboot       string `json:"last_reboot,omitempty"`
	// Monitoring: the alert checks, silences and notifications configured,
	// and this node's current silences (statusmonitoring.go).
	Monitoring *monitoringState `json:"monitoring,omitempty"`
}

func readLocal(cfg config.Config, now time.Time) localState {
	var l localState
	l.KillSwitch, l.KillSwitchReason, _ = reboot.KillSwitch(cfg.KillSwitchFile)
	if m, err := reboot.ReadMarker(cfg.StateDir); err == nil {
		l.Marker = &m
	} else if !errors.Is(err, fs.ErrNotExist) {
		l.MarkerError = localReadError(err)
	}
	if h, err := driver.ReadHistory(cfg.StateDir); err == nil {
		l.RebootLoop = h.Block
		n := h.InLastDay(now)
		l.RebootsLastDay = &n
	} else {
		// Unknown, not 0: a count of 0 would say the node may reboot.
		l.HistoryError = localReadError(err)
	}
	l.MaxRebootsPerDay = cfg.MaxRebootsPerDay
	if b, err := os.ReadFile(filepath.Join(cfg.RunDir, driver.LastRebootFile)); err == nil {
		l.LastReboot = strings.TrimSpace(string(b))
	}
	l.Monitoring = readMonitoring(cfg)
	return l
}

// localReadError is err, with what to do when it is a permission problem
// (state_dir is root's, mode 0750).
func localReadError(err error) string {
	if errors.Is(err, fs.ErrPermission) {
		return err.Error() + "; run status as root (sudo clusterrebootd status)"
	}
	return err.Error()
}

// statusResult is the JSON of status.
type statusResult struct {
	report.Header
	Local localState     `json:"local"`
	View  *policy.View   `json:"view,omitempty"`
	Lock  *lockinfo.Info `json:"lock,omitempty"`
	// Rollout is the failure budget, the budgets and the admission's next
	// answer for this node (docs/rollout.md).
	Rollout *protocol.RolloutStatus `json:"rollout,omitempty"`
}

func (r statusResult) Text(w io.Writer) error {
	report.Line(w, "node", r.Node)
	ks := "not set"
	if r.Local.KillSwitch {
		ks = "SET: " + r.Local.KillSwitchReason
	}
	report.Line(w, "kill switch", ks)
	if r.Local.RebootLoop != nil {
		report.Line(w, "reboot loop", r.Local.RebootLoop.Detail)
	}
	if r.Local.RebootsLastDay != nil {
		report.Line(w, "reboots (24 h)", fmt.Sprintf("%d of max %d", *r.Local.RebootsLastDay, r.Local.MaxRebootsPerDay))
	} else {
		report.Line(w, "reboots (24 h)", fmt.Sprintf("unknown of max %d: %s", r.Local.MaxRebootsPerDay, r.Local.HistoryError))
	}
	if r.Local.MarkerError != "" {
		report.Line(w, "marker", "unknown: "+r.Local.MarkerError)
	}
	if r.Local.Marker != nil {
		report.Line(w, "marker", "reboot requested at "+r.Local.Marker.RequestedAt.UTC().Format(time.RFC3339))
	}
	if r.Local.LastReboot != "" {
		report.Line(w, "last reboot", r.Local.LastReboot)
	}
	r.Local.Monitoring.text(w)
	if r.View != nil {
		paused := "no"
		if p := r.View.Paused; p != nil {
			paused = fmt.Sprintf("yes, by %s since %s: %s", report.Field(p.By), p.Since.UTC().Format(time.RFC3339), report.Field(p.Reason))
		}
		report.Line(w, "cluster paused", paused)
		for _, h := range r.View.Holds {
			report.Line(w, "held", fmt.Sprintf("%s, by %s since %s: %s", report.Field(h.Node), report.Field(h.By), h.Since.UTC().Format(time.RFC3339), report.Field(h.Reason)))
		}
		for _, q := range r.View.Requests {
			report.Line(w, "reboot requested", fmt.Sprintf("%s, by %s since %s: %s", report.Field(q.Node), report.Field(q.By), q.Since.UTC().Format(time.RFC3339), report.Field(q.Reason)))
		}
		for _, s := range r.View.Rebooting {
			report.Line(w, "rebooting", fmt.Sprintf("%s since %s (slot ttl %ds)", s.Node, s.Since.UTC().Format(time.RFC3339), s.TTLSec))
		}
		fmt.Fprintf(w, "%-24s %-14s %-8s %-20s %s\n", "NODE", "STATE", "REBOOT", "LAST CHECK", "REASON")
		for _, n := range r.View.Nodes {
			// Every node writes its own entry: what it says is shown, escaped and bounded.
			fmt.Fprintf(w, "%-24s %-14s %-8v %-20s %s\n", report.Field(n.Node), report.Field(n.State), n.RebootRequired,
				n.LastCheck.UTC().Format(time.RFC3339), report.Field(n.Reason))
		}
	}
	if ro := r.Rollout; ro != nil {
		halted := "no"
		if h := ro.Halted; h != nil {
			halted = fmt.Sprintf("YES, since %s: %s (run clusterrebootd resume --reason TEXT once you looked)", h.Since.UTC().Format(time.RFC3339), report.Field(h.Reason))
		}
		report.Line(w, "rollout halted", halted)
		budget := "off (rollout.max_failures: 0)"
		if ro.MaxFailures > 0 {
			budget = fmt.Sprintf("%d of %d used (%s, within %s)", len(ro.Failures), ro.MaxFailures, ro.Scope, time.Duration(ro.FailureWindowSec)*time.Second)
		}
		report.Line(w, "failure budget", budget)
		for _, f := range ro.Failures {
			report.Line(w, "  failure", fmt.Sprintf("%s (%s) at %s: %s", report.Field(f.Node), f.Kind, f.At.UTC().Format(time.RFC3339), report.Field(f.Detail)))
		}
		total := "none"
		if ro.MaxTotal > 0 {
			total = fmt.Sprint(ro.MaxTotal)
		}
		report.Line(w, "budgets", fmt.Sprintf("max_holders %d of %d nodes in this group, max_holders_total %s of %d; %d reboot(s) started in the last hour",
			ro.MaxHolders, ro.GroupNodes, total, ro.FleetNodes, ro.StartsLastHour))
		next := "admitted (if this node needs a reboot and its local checks pass)"
		if ro.Next.Rule != "admit" {
			next = ro.Next.Rule + ": " + report.Field(ro.Next.Reason)
			if ro.Next.Until != nil {
				next += " (until " + ro.Next.Until.UTC().Format(time.RFC3339) + ")"
			}
		}
		report.Line(w, "next admission", next)
		rolloutText(w, ro, r.View)
	}
	if r.Lock != nil {
		report.Line(w, "lock", r.Lock.Key)
		for _, e := range r.Lock.Holders {
			report.Line(w, "  holder", fmt.Sprintf("%s lease %s", e.Node, e.LeaseID))
		}
		for _, e := range r.Lock.Waiters {
			report.Line(w, "  waiter", fmt.Sprintf("%s lease %s", e.Node, e.LeaseID))
		}
	}
	if r.Error != "" {
		report.Line(w, "error", r.Error)
	}
	return nil
}

func statusCmd(ctx context.Context, b *base, args []string, stdout, stderr io.Writer) error {
	if err := b.parse(args, stdout); err != nil {
		return err
	}
	res := statusResult{}
	cfg, err := b.load(nil)
	res.Node = cfg.NodeName
	if err != nil {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	res.Local = readLocal(cfg, time.Now())
	child, err := b.child(stderr, true)
	if err != nil {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	var cr protocol.StatusResult
	code, err := child.Run(ctx, protocol.StepStatus, nil, cfg, &cr)
	if err == nil {
		res.View, res.Lock, res.Rollout = &cr.View, &cr.Lock, cr.Rollout
		if code != exitcode.OK {
			err = exitcode.Errorf(code, "%s", cr.Error)
		}
	} else {
		err = exitcode.New(code, err)
	}
	return finish(stdout, b.format, &res.Header, &res, err)
}

// pauseResult is the JSON of pause and resume.
type pauseResult struct {
	report.Header
	Paused  *policy.Pause `json:"paused,omitempty"`
	Changed bool          `json:"changed"`
	// Rollout is set when resume ended a halted rollout.
	Rollout *protocol.RolloutResume `json:"rollout,omitempty"`
	// Local is set by resume --local.
	Local *localClear `json:"local,omitempty"`
}

type localClear struct {
	LoopCleared   bool `json:"loop_cleared"`
	MarkerRemoved bool `json:"marker_removed"`
	SlotFreed     bool `json:"slot_freed"`
	// SlotError says why this node's slot could not be looked at or freed
	// (etcd unreachable): it then expires with its lease.
	SlotError string `json:"slot_error,omitempty"`
}

func (r pauseResult) Text(w io.Writer) error {
	switch {
	case r.Local != nil:
		report.Line(w, "reboot loop", fmt.Sprintf("cleared: %v, stale marker removed: %v, slot freed: %v", r.Local.LoopCleared, r.Local.MarkerRemoved, r.Local.SlotFreed))
		if r.Local.SlotError != "" {
			report.Line(w, "slot", r.Local.SlotError)
		}
	case r.Rollout != nil:
		what := "resumed"
		if g, ok := strings.CutPrefix(r.Rollout.Scope, "group:"); ok {
			what = fmt.Sprintf("group %q resumed", g)
		}
		report.Line(w, "rollout", fmt.Sprintf("%s by %s at %s (%s); failures acknowledged: %s", what, report.Field(r.Rollout.By),
			r.Rollout.Since.UTC().Format(time.RFC3339), report.Field(r.Rollout.Reason), report.Field(strings.Join(r.Rollout.Failures, ", "))))
		if len(r.Rollout.StillHalted) > 0 {
			report.Line(w, "still halted", strings.Join(r.Rollout.StillHalted, ", "))
		}
	case r.Paused != nil:
		report.Line(w, "paused", fmt.Sprintf("by %s since %s: %s", report.Field(r.Paused.By), r.Paused.Since.UTC().Format(time.RFC3339), report.Field(r.Paused.Reason)))
	case r.Error == "":
		report.Line(w, "paused", "no (reboots allowed)")
	}
	if r.Error != "" {
		report.Line(w, "error", r.Error)
	}
	return nil
}

func pauseCmd(ctx context.Context, b *base, args []string, stdout, stderr io.Writer, pause bool) error {
	if err := b.parse(args, stdout); err != nil {
		return err
	}
	reason, local := b.reason, b.local
	res := pauseResult{}
	cfg, err := b.load(nil)
	res.Node = cfg.NodeName
	if err != nil {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	if pause && strings.TrimSpace(reason) == "" {
		return finish(stdout, b.format, &res.Header, &res, exitcode.Errorf(exitcode.Config, "clusterrebootd pause: --reason is required: say why, e.g. --reason \"change freeze until Monday\""))
	}
	if err := report.CheckField("--reason", reason); err != nil {
		return finish(stdout, b.format, &res.Header, &res, fmt.Errorf("clusterrebootd %s: %w", b.sub, err))
	}
	if local && b.group != nil {
		return finish(stdout, b.format, &res.Header, &res, exitcode.Errorf(exitcode.Config, "clusterrebootd resume: --local and --group exclude each other: --local clears this node's reboot_loop block, --group ends one group's halt"))
	}
	child, err := b.child(stderr, true)
	if local {
		res.Local, err = resumeLocal(ctx, cfg, b.root, child, err)
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	if err != nil {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	step := protocol.StepResume
	if pause {
		step = protocol.StepPause
	}
	var cr protocol.PauseResult
	code, err := child.Run(ctx, step, protocol.PauseArgs{Reason: reason, Group: b.group}, cfg, &cr)
	if err == nil {
		res.Paused, res.Changed, res.Rollout = cr.Paused, cr.Changed, cr.Rollout
		if code != exitcode.OK {
			err = exitcode.Errorf(code, "%s", cr.Error)
		}
	} else {
		err = exitcode.New(code, err)
	}
	return finish(stdout, b.format, &res.Header, &res, err)
}

// resumeLocal clears a reboot_loop block: the history's block and counter,
// a marker left by an earlier boot, and (best effort) this node's slot.
func resumeLocal(ctx context.Context, cfg config.Config, root string, child driver.Child, childErr error) (*localClear, error) {
	lc := &localClear{}
	had, err := driver.ClearLoop(cfg.StateDir)
	if err != nil {
		return lc, exitcode.Errorf(exitcode.RebootLoop, "clusterrebootd resume --local: %v", err)
	}
	lc.LoopCleared = had
	m, merr := reboot.ReadMarker(cfg.StateDir)
	if merr == nil || !errors.Is(merr, fs.ErrNotExist) {
		boot, berr := reboot.BootID(root)
		if merr != nil || berr != nil || m.BootID != boot {
			if err := reboot.RemoveMarker(cfg.StateDir); err != nil {
				return lc, exitcode.Errorf(exitcode.RebootLoop, "clusterrebootd resume --local: %v", err)
			}
			lc.MarkerRemoved = true
		}
	}
	slotErr := func(why string) {
		lc.SlotError = "this node's reboot slot was not checked (" + why + "); if it has one, it expires with its lease within reboot_slot_ttl_sec"
	}
	if childErr != nil {
		slotErr(childErr.Error())
		return lc, nil
	}
	var cr protocol.CompleteResult
	switch code, err := child.Run(ctx, protocol.StepComplete, nil, cfg, &cr); {
	case err != nil:
		slotErr(err.Error())
	case code != exitcode.OK:
		slotErr(cr.Error)
	default:
		lc.SlotFreed = cr.Freed
	}
	return lc, nil
}
