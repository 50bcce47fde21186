package clusterrebootd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Run is the entry point of clusterrebootd: it runs the command of Tree
// that args name (cli.Dispatch).
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return cli.Dispatch(ctx, Tree(stdin, stdout, stderr), args, stdout)
}

// Tree is clusterrebootd's command tree. The root is run, the default
// command, with its flags; each command has its own FlagSet, the one its
// Exec parses.
func Tree(stdin io.Reader, stdout, stderr io.Writer) *ffcli.Command {
	run := newRunBase("run", stdout)
	simulate := newRunBase("simulate", stdout)
	status := newBase("status", stdout, true)
	rep := newReportBase(stdout)
	validate := newBase("validate-config", stdout, true)
	ver := newBase("version", stdout, false)
	pause, resume := newPauseBase(stdout, true), newPauseBase(stdout, false)
	hold, releaseHold, request := newOverrideBase(protocol.StepHold, stdout), newOverrideBase(protocol.StepReleaseHold, stdout), newOverrideBase(protocol.StepRequest, stdout)
	override := func(b *base) func(context.Context, []string) error {
		return func(ctx context.Context, args []string) error { return overrideCmd(ctx, b, args, stdout, stderr) }
	}
	root := &ffcli.Command{
		Name:       Tool,
		ShortUsage: "clusterrebootd [COMMAND] [flags]",
		FlagSet:    run.fs,
		Exec: func(ctx context.Context, args []string) error {
			return runRoot(ctx, run, args, stdout, stderr)
		},
	}
	root.Subcommands = []*ffcli.Command{
		{Name: "run", ShortHelp: "the daemon (the default command)", FlagSet: run.fs,
			Exec: func(ctx context.Context, args []string) error { return runCmd(ctx, run, args, stdout, stderr, false) }},
		{Name: "simulate", ShortHelp: "one full cycle against the real cluster, reboot nothing", FlagSet: simulate.fs,
			Exec: func(ctx context.Context, args []string) error {
				return runCmd(ctx, simulate, args, stdout, stderr, true)
			}},
		{Name: "status", ShortHelp: "the cluster at a glance", FlagSet: status.fs,
			Exec: func(ctx context.Context, args []string) error { return statusCmd(ctx, status, args, stdout, stderr) }},
		{Name: "report", ShortHelp: "one row per node for compliance: reboot needed since, last reboot, kernels, uptime, failures", FlagSet: rep.fs,
			Exec: func(ctx context.Context, args []string) error { return reportCmd(ctx, rep, args, stdout, stderr) }},
		{Name: "validate-config", ShortHelp: "check the configuration and list every problem", FlagSet: validate.fs,
			Exec: func(ctx context.Context, args []string) error { return validateCmd(validate, args, stdout, stderr) }},
		{Name: "version", ShortHelp: "version, commit, Go version, build date", FlagSet: ver.fs,
			Exec: func(ctx context.Context, args []string) error { return versionCmd(ver, args, stdout, stderr) }},
		{Name: "pause", ShortHelp: "set the cluster-wide kill switch", FlagSet: pause.fs,
			Exec: func(ctx context.Context, args []string) error {
				return pauseCmd(ctx, pause, args, stdout, stderr, true)
			}},
		{Name: "resume", ShortHelp: "clear the cluster-wide kill switch and a halted rollout (--local: this node's reboot_loop block)", FlagSet: resume.fs,
			Exec: func(ctx context.Context, args []string) error {
				return pauseCmd(ctx, resume, args, stdout, stderr, false)
			}},
		{Name: "hold", ShortHelp: "keep one node from rebooting", FlagSet: hold.fs, Exec: override(hold)},
		{Name: "release-hold", ShortHelp: "let a held node reboot again", FlagSet: releaseHold.fs, Exec: override(releaseHold)},
		{Name: "request", ShortHelp: "reboot one node at its next chance", FlagSet: request.fs, Exec: override(request)},
		{Name: "help", ShortHelp: "this overview, or the help of COMMAND", FlagSet: flag.NewFlagSet(Tool+" help", flag.ContinueOnError),
			Exec: func(ctx context.Context, args []string) error {
				// Shared flags around `help` change nothing in the help.
				if _, rest := cli.SplitShared(args); len(rest) > 0 && rest[0] != "help" {
					return Run(ctx, []string{rest[0], "--help"}, stdin, stdout, stderr)
				}
				fmt.Fprint(stdout, commands)
				return nil
			}},
	}
	return root
}

// runRoot is clusterrebootd without a command's name: run, or an unknown
// command.
func runRoot(ctx context.Context, run *base, args []string, stdout, stderr io.Writer) error {
	if _, rest := cli.SplitShared(args); len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		err := exitcode.Errorf(exitcode.Config, "clusterrebootd: unknown command %q; use run, simulate, status, report, validate-config, version, pause, resume, hold, release-hold or request", rest[0])
		writeError(stdout, err)
		return err
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		// Plain --help: name every command before run's own flags.
		fmt.Fprint(stdout, commands)
	}
	return runCmd(ctx, run, args, stdout, stderr, false)
}

// newRunBase is the base of run and simulate; run has --dry-run, --once and
// --no-memtrim besides.
func newRunBase(sub string, stdout io.Writer) *base {
	b := newBase(sub, stdout, true)
	if sub == "run" {
		b.fs.BoolVar(&b.dryRun, "dry-run", false, "decide and log everything; run no hook and no reboot command (dry_run: true)")
		b.fs.BoolVar(&b.once, "once", false, "run one cycle and exit with its result")
		b.fs.BoolVar(&b.noMemTrim, "no-memtrim", false, "keep the executable's read-only pages resident (for measurements; docs/performance.md)")
	}
	return b
}

// newPauseBase is the base of pause (--reason) or resume (--local).
func newPauseBase(stdout io.Writer, pause bool) *base {
	if pause {
		b := newBase("pause", stdout, true)
		b.fs.StringVar(&b.reason, "reason", "", "why reboots are paused (`text`, required; shown in status and logs)")
		return b
	}
	b := newBase("resume", stdout, true)
	b.fs.BoolVar(&b.local, "local", false, "clear this node's reboot_loop block (and its reboot counter) instead of the cluster pause")
	b.fs.StringVar(&b.reason, "reason", "", "why a halted rollout may go on (`text`; required while the rollout is halted, recorded with who and when)")
	b.fs.Func("group", "end this group's halt alone (`name`; failure_scope group): only its failures are acknowledged, other groups stay halted; the pause is lifted as by every resume", func(v string) error { b.group = &v; return nil })
	return b
}

// newOverrideBase is the base of hold, release-hold and request; all but
// release-hold take --reason.
func newOverrideBase(sub string, stdout io.Writer) *base {
	b := newBase(sub, stdout, true)
	if sub != protocol.StepReleaseHold {
		b.fs.StringVar(&b.reason, "reason", "", "why (`text`, required; shown in status and the node's logs)")
		b.fs.BoolVar(&b.force, "force", false, "also for a node nothing in etcd knows yet (no health record, no slot); else that is refused as a typo")
	}
	if sub == protocol.StepRequest {
		b.fs.BoolVar(&b.now, "now", false, "an emergency reboot: outside the node's windows, still through the lock, the slot, the pause, the hold, the failure budget and the gates")
	}
	return b
}
