// Package crdreboot implements crd-reboot: reboot this node, safely.
//
// Synopsis:
//
//	crd-reboot [--dry-run] [--state-dir DIR] [--kill-switch-file FILE]
//	           [--config FILE] [--node NAME] [--format json|text] [--log-level L] [--log-format F]
//	           [-- COMMAND [ARG...]]
//
// Description:
//
// crd-reboot checks the kill switch (kill_switch_file, by default
// /etc/clusterrebootd/disable: while it exists no reboot happens, and its
// first line is reported as the reason), refuses while a package manager is
// mid-transaction (dpkg/apt, rpm/dnf, zypper: their locks, or a dpkg run
// that was interrupted; docs/detectors.md), reads the boot id, writes the
// reboot marker state_dir/reboot-marker.json atomically (node, boot id,
// time, command), and only then runs reboot_command (or the COMMAND after
// --) without a shell, bounded by 60 seconds. If the marker cannot be
// written, the command never runs. If the command fails, the marker is
// removed again.
//
// With --dry-run (or dry_run: true, or CRD_DRY_RUN=true) crd-reboot checks
// the kill switch, the package managers, the boot id and that state_dir is
// writable, reports the
// command it would run, and changes nothing: no marker, no command.
//
// Exit status:
//
//	0    the reboot command ran and exited 0 (in a dry run: it would have run)
//	2    configuration: bad flag, bad config, empty command or state_dir
//	6    the kill switch is set (or cannot be checked)
//	9    reboot failed: the marker could not be written (or, in a dry run,
//	     state_dir is not writable), the boot id is unreadable, or the command
//	     failed, timed out or could not start
//	11   a package manager is mid-transaction (or was interrupted, or its
//	     lock cannot be checked): nothing was written or run; try again
//	     once it has finished
//
// Example:
//
//	crd-lock hold -- crd-reboot
//	crd-reboot --dry-run --format text
package crdreboot

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// Tool is the command's name.
const Tool = "crd-reboot"

// Result is the JSON object crd-reboot prints.
type Result struct {
	report.Header
	reboot.Result
}

// Text renders the outcome on one line.
func (r *Result) Text(w io.Writer) error {
	cmd := strings.Join(r.Command, " ")
	switch {
	case r.ExitCode == 0 && r.DryRun:
		fmt.Fprintf(w, "dry run: %s would run %q (marker %s, boot id %s)\n", r.Node, cmd, r.Marker, r.BootID)
	case r.ExitCode == 0:
		fmt.Fprintf(w, "reboot requested: %s ran %q (marker %s, boot id %s)\n", r.Node, cmd, r.Marker, r.BootID)
	case r.KillSwitch:
		fmt.Fprintf(w, "kill switch: %s does not reboot: %s\n", r.Node, r.KillSwitchReason)
	case len(r.PackageManagerBusy) > 0:
		fmt.Fprintf(w, "package manager busy: %s does not reboot: %s\n", r.Node, r.Error)
	default:
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
	return nil
}

// Run is the entry point of crd-reboot: its command tree is one command.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return cli.Dispatch(ctx, Tree(stdout, stderr), args, stdout)
}

// Tree is crd-reboot's command tree: a root without subcommands.
func Tree(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet(Tool, flag.ContinueOnError)
	fs.SetOutput(stdout) // --help and --version
	c := new(cli.Common)
	c.Register(fs)
	dryRun := fs.Bool("dry-run", false, "report what would be run; write no marker, run nothing (overrides dry_run)")
	stateDir := fs.String("state-dir", "", "`directory` for the reboot marker (overrides state_dir)")
	killSwitch := fs.String("kill-switch-file", "", "reboots are disabled while this `file` exists (overrides kill_switch_file)")
	return &ffcli.Command{Name: Tool, ShortUsage: Tool + " [flags] [--] [REBOOT-COMMAND...]", FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			return run(ctx, fs, c, dryRun, stateDir, killSwitch, args, stdout, stderr)
		}}
}

// run is crd-reboot with its flags declared.
func run(ctx context.Context, fs *flag.FlagSet, c *cli.Common, dryRun *bool, stateDir, killSwitch *string, args []string, stdout, stderr io.Writer) error {

	res := &Result{Header: report.Header{Tool: Tool}}
	if err := cli.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return emit(stdout, c, res, err)
	}
	res.Node = c.Node
	if _, err := c.Output(stdout); err != nil {
		return emit(stdout, c, res, err)
	}
	logger, err := c.Logger(stderr, Tool)
	if err != nil {
		return emit(stdout, c, res, err)
	}
	cfg, err := c.Load(fs, func(cfg *config.Config) {
		if cli.IsSet(fs, "dry-run") {
			cfg.DryRun = *dryRun
		}
		if cli.IsSet(fs, "state-dir") {
			cfg.StateDir = *stateDir
		}
		if cli.IsSet(fs, "kill-switch-file") {
			cfg.KillSwitchFile = *killSwitch
		}
		if fs.NArg() > 0 {
			cfg.RebootCommand = fs.Args()
		}
	})
	res.Node = cfg.NodeName
	res.DryRun, res.Command = cfg.DryRun, cfg.RebootCommand
	if err != nil {
		return emit(stdout, c, res, err)
	}

	opts := reboot.FromConfig(cfg)
	opts.Runner = proc.Exec{}
	if gate := os.Getenv(reboot.EnvStartFDs); gate != "" {
		// Under `crd-lock hold --reboot-slot`: the slot's holder has the
		// last word, right before the command (lib/reboot AskStart).
		opts.Commit = func(ctx context.Context) error {
			err := reboot.AskStart(ctx, gate)
			if err != nil {
				logger.Warn("the reboot slot's holder says the reboot command may not start", "error", err.Error())
			}
			return err
		}
	}
	logger = logger.With("node", cfg.NodeName, "dry_run", cfg.DryRun)
	opts.Starting = func() {
		logger.Info("rebooting: writing marker, then running the reboot command", "command", cfg.RebootCommand, "marker", reboot.MarkerPath(cfg.StateDir))
	}
	res.Result, err = reboot.Do(ctx, opts)
	switch code := exitcode.CodeOf(err); {
	case err == nil && cfg.DryRun:
		logger.Info("dry run: would reboot", "command", cfg.RebootCommand)
	case err == nil:
		logger.Info("reboot requested", "marker", res.Marker, "boot_id", res.BootID)
	case code == exitcode.KillSwitch:
		logger.Warn("reboot disabled by the kill switch", "file", cfg.KillSwitchFile, "reason", res.KillSwitchReason)
	case code == exitcode.PackageManagerBusy:
		logger.Warn("no reboot while a package manager is mid-transaction", "detail", err.Error())
	case code == exitcode.RebootFailed && res.CommandStderr != "":
		logger.Error("reboot command failed", "stderr", res.CommandStderr)
	}
	return emit(stdout, c, res, err)
}

// emit prints the one JSON (or text) object and returns err (cli.Emit).
func emit(stdout io.Writer, c *cli.Common, res *Result, err error) error {
	return cli.Emit(stdout, c, res, err)
}
