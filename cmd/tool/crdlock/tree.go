package crdlock

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/clusterrebootd/clusterrebootd/driver/cluster"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/groupguard"
	"github.com/clusterrebootd/clusterrebootd/lib/version"
)

// Run is the entry point of crd-lock: it runs the command of Tree that args
// name (cli.Dispatch).
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return cli.Dispatch(ctx, Tree(stdin, stdout, stderr), args, stdout)
}

// Tree is crd-lock's command tree: the shared flags on the root, one
// command per subcommand with its own FlagSet, the one its Exec parses.
// The internal commands (step, the guardian) and acquire are not in it:
// the root's Exec runs them, so no help and no completion offers them.
func Tree(stdin io.Reader, stdout, stderr io.Writer) *ffcli.Command {
	hold := newHoldOpts(stdout)
	status, release, complete := newStatusOpts(stdout), newReleaseOpts(stdout), newCompleteOpts(stdout)
	serve := newServeOpts(stdout)
	root := &ffcli.Command{
		Name:       tool,
		ShortUsage: "crd-lock SUBCOMMAND [flags]",
		FlagSet:    cli.SharedFlagSet(tool),
		Exec: func(ctx context.Context, args []string) error {
			return runRoot(ctx, args, stdin, stdout, stderr)
		},
	}
	root.Subcommands = []*ffcli.Command{
		{Name: "hold", ShortHelp: "take the lock, run COMMAND while it is held, release it when COMMAND ends", FlagSet: hold.fs,
			Exec: func(ctx context.Context, args []string) error { return runHold(ctx, hold, args, stdin, stdout, stderr) }},
		{Name: "status", ShortHelp: "who holds the lock and who waits", FlagSet: status.fs,
			Exec: func(ctx context.Context, args []string) error { return runStatus(ctx, status, args, stdout, stderr) }},
		{Name: "release", ShortHelp: "release this node's (or with --force another node's) lock entries", FlagSet: release.fs,
			Exec: func(ctx context.Context, args []string) error { return runRelease(ctx, release, args, stdout, stderr) }},
		{Name: "complete", ShortHelp: "free this node's reboot slot after it came back", FlagSet: complete.fs,
			Exec: func(ctx context.Context, args []string) error {
				return runComplete(ctx, complete, args, stdout, stderr)
			}},
		{Name: "serve", ShortHelp: "a server on this lock (fleetlock)", FlagSet: cli.SharedFlagSet(tool + " serve"),
			Exec: func(ctx context.Context, args []string) error { return runServe(ctx, serve, args, stdout, stderr) },
			Subcommands: []*ffcli.Command{{Name: "fleetlock", ShortHelp: "a FleetLock server for Fedora CoreOS and Flatcar nodes", FlagSet: serve.fs,
				Exec: func(ctx context.Context, args []string) error {
					return runServe(ctx, serve, append([]string{"fleetlock"}, args...), stdout, stderr)
				}}}},
		{Name: "help", ShortHelp: "this overview, or the help of SUBCOMMAND", FlagSet: flag.NewFlagSet(tool+" help", flag.ContinueOnError),
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

// runRoot is crd-lock without one of the tree's subcommands: --help,
// --version, the internal commands, acquire, or a usage error.
func runRoot(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "step":
			// The daemon's cluster steps (docs/cluster-protocol.md): the error is
			// in the JSON result the daemon reads, and stderr carries JSON log
			// lines only, so no plain one-line message there. An internal
			// protocol: it keeps its one order (no shared flags before it).
			return cli.Quiet(cluster.RunStep(ctx, args[1:], stdin, stdout, stderr))
		case guardMode:
			return groupguard.Serve(stdin, stdout, stderr)
		}
	}
	_, rest := cli.SplitShared(args)
	if len(rest) == 0 {
		// One line on stderr, as for every usage error: it says what to do.
		err := exitcode.Errorf(exitcode.Config, "crd-lock: a subcommand is required: hold, status, release, complete or serve (see crd-lock SUBCOMMAND --help, man crd-lock)")
		return writeUsageError(stdout, "", err)
	}
	sub := rest[0]
	if strings.HasPrefix(sub, "-") {
		// Only the shared flags move: `crd-lock --key K status` names --key.
		sub = args[0]
	}
	switch sub {
	case "-h", "--help", "-help":
		fmt.Fprint(stdout, commands)
		return flag.ErrHelp
	case "-V", "--version", "-version":
		fmt.Fprintln(stdout, version.Line(tool))
		return cli.ErrVersion
	case "acquire":
		err := exitcode.Errorf(exitcode.Config, "crd-lock: acquire is not supported: a lock held by no living process is exactly the stuck lock to avoid; wrap the work instead: crd-lock hold -- COMMAND (man crd-lock)")
		return writeUsageError(stdout, sub, err)
	default:
		err := exitcode.Errorf(exitcode.Config, "crd-lock: unknown subcommand %q: use hold, status, release, complete or serve", sub)
		return writeUsageError(stdout, "", err)
	}
}

// holdOpts are hold's flags.
type holdOpts struct {
	fs       *flag.FlagSet
	f        flags
	timeout  *time.Duration
	purpose  *string
	withSlot *bool
	grace    *time.Duration
}

func newHoldOpts(stdout io.Writer) *holdOpts {
	o := &holdOpts{fs: newFlagSet("hold", stdout), f: flags{synopsis: "crd-lock hold [flags] -- COMMAND [ARG...]"}}
	fs := o.fs
	o.f.register(fs)
	o.timeout = fs.Duration("timeout", 0, "give up (exit 4) when the lock is not held after this `duration`; 0 waits forever")
	o.purpose = fs.String("purpose", "", "free `text` stored with the lock entry, shown by status")
	o.withSlot = fs.Bool("reboot-slot", false, "take this node's reboot slot before COMMAND (waiting while max_holders nodes are down) and keep it after COMMAND succeeds, until `crd-lock complete` after the boot")
	o.grace = fs.Duration("kill-grace", 0, "after the lock is lost, how long COMMAND has between SIGTERM and SIGKILL: below a third of the TTL (default 10s, or a quarter of the TTL when that is less)")
	return o
}

// statusOpts are status's flags.
type statusOpts struct {
	fs *flag.FlagSet
	f  flags
}

func newStatusOpts(stdout io.Writer) *statusOpts {
	o := &statusOpts{fs: newFlagSet("status", stdout)}
	o.f.register(o.fs)
	return o
}

// releaseOpts are release's flags.
type releaseOpts struct {
	fs               *flag.FlagSet
	f                flags
	holder           *string
	force, leaseless *bool
}

func newReleaseOpts(stdout io.Writer) *releaseOpts {
	o := &releaseOpts{fs: newFlagSet("release", stdout)}
	fs := o.fs
	o.f.register(fs)
	o.holder = fs.String("holder", "", "`node` whose entries to release (default this node)")
	o.force = fs.Bool("force", false, "release entries of another node (the runbook's \"lock hangs\" case)")
	o.leaseless = fs.Bool("leaseless", false, "with --force: delete the entries that have no lease (they never expire and block the lock for ever), whoever wrote them")
	return o
}

// completeOpts are complete's flags.
type completeOpts struct {
	fs   *flag.FlagSet
	f    flags
	keep *bool
}

func newCompleteOpts(stdout io.Writer) *completeOpts {
	o := &completeOpts{fs: newFlagSet("complete", stdout)}
	fs := o.fs
	o.f.common.Register(fs)
	fs.StringVar(&o.f.endpoints, "endpoints", "", "etcd client `URLs`, comma-separated (overrides etcd_endpoints)")
	o.keep = fs.Bool("keep", false, "renew the slot instead of freeing it (the node is back but not yet healthy)")
	return o
}

// serveOpts are the flags of serve fleetlock.
type serveOpts struct {
	fs                                                          *flag.FlagSet
	f                                                           flags
	listen, certFile, keyFile, clientCA, defaultGroup, clientID *string
	seatTimeout, ticketTTL                                      *time.Duration
}

func newServeOpts(stdout io.Writer) *serveOpts {
	o := &serveOpts{fs: newFlagSet("serve fleetlock", stdout), f: flags{synopsis: "crd-lock serve fleetlock [flags]"}}
	fs, f := o.fs, &o.f
	f.common.Register(fs)
	fs.StringVar(&f.endpoints, "endpoints", "", "etcd client `URLs`, comma-separated (overrides etcd_endpoints)")
	fs.StringVar(&f.key, "key", "", "lock `key` (overrides lock_key)")
	fs.Func("max-holders", "how many nodes of a group may be down at once: `N` or a percentage such as 10% (overrides max_holders)", f.setMaxHolders)
	fs.IntVar(&f.ttl, "ttl", 0, "lease TTL of the short-lived seat in `seconds` (overrides lock_ttl_sec)")
	o.listen = fs.String("listen", DefaultFleetLockListen, "`host:port` to serve FleetLock on")
	o.certFile = fs.String("tls-cert", "", "serve HTTPS with this certificate `file` (PEM; with --tls-key)")
	o.keyFile = fs.String("tls-key", "", "the certificate's private key `file` (PEM)")
	o.clientCA = fs.String("tls-client-ca", "", "require client certificates signed by this CA `file` (PEM; needs --tls-cert)")
	o.defaultGroup = fs.String("default-group", "", "the lock `group` FleetLock's group \"default\" means (default: the ungrouped lock)")
	o.seatTimeout = fs.Duration("seat-timeout", 10*time.Second, "how long a pre-reboot waits for a seat of a busy line before it answers failed_lock_semaphore_full")
	o.clientID = fs.String("tls-client-id", "cn", "with --tls-client-ca, which name of the client certificate must equal client_params.id: `cn`, dns (a DNS SAN) or none")
	o.ticketTTL = fs.Duration("ticket-ttl", 10*time.Minute, "how long a client's place in the fleet's line (max_holders_total) outlives its last pre-reboot")
	return o
}

// newFlagSet is the FlagSet of subcommand sub; --help and --version print
// on stdout.
func newFlagSet(sub string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(tool+" "+sub, flag.ContinueOnError)
	fs.SetOutput(stdout)
	return fs
}
