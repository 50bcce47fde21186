// Package crdlock implements crd-lock, the cluster lock as a command.
//
// Synopsis:
//
//	crd-lock hold [--key K] [--group G] [--max-holders N] [--ttl S] [--timeout D] [--purpose TEXT] [--kill-grace D] -- COMMAND [ARGS...]
//	crd-lock status [--key K] [--group G]
//	crd-lock release [--key K] [--group G] [--holder NODE] [--force]
//	crd-lock complete [--keep]
//	crd-lock release [--key K] [--group G] --leaseless --force
//	crd-lock serve fleetlock [--listen ADDR] [--tls-cert F --tls-key F [--tls-client-ca F]] [--default-group G] [--seat-timeout D]
//	crd-lock acquire   (not supported by design; see below)
//
// Description:
//
// hold waits for the etcd lock (lock_key, or lock_key/GROUP), runs COMMAND in
// its own process group with LOCK_KEY, FENCING_TOKEN, LEASE_ID and
// NODE_NAME in its environment, forwards SIGINT, SIGTERM and SIGHUP to it,
// releases the lock when it exits and exits with its status, like flock(1) and
// `etcdctl lock`. COMMAND inherits stdin, stdout and stderr; crd-lock prints
// nothing on stdout before COMMAND ends and then exactly one JSON line, so the
// result is always the last line of stdout. If the lock is lost while COMMAND
// runs (lease expired or revoked, entry deleted, etcd silent for two thirds of
// the TTL), the process group gets SIGTERM, SIGKILL after --kill-grace, and
// crd-lock exits 4. Should crd-lock die (SIGKILL, OOM), a guardian process
// that leads COMMAND's process group kills all of it at once, before the
// lease can expire; what COMMAND leaves in its group when it exits is killed
// before the lock is released.
//
// status prints the holders and the waiters in order; release revokes the
// lease of a stuck holder or evicts a waiter (another node's only with
// --force; an evicted hold stops with exit 4), or deletes entries that have
// no lease (--leaseless --force). serve fleetlock answers Fedora CoreOS
// (Zincati) and Flatcar nodes over the FleetLock protocol with reboot slots
// of this lock (lib/fleetlock, docs/fleetlock.md). acquire is not
// offered: a lock that outlives the process that took it is the stuck lock
// this tool exists to avoid; wrap the work with hold instead.
//
// Exit status:
//
//	0  done (hold: COMMAND exited 0; status: the query answered, held or not; release: done)
//	2  usage or configuration error, COMMAND not found, or acquire
//	4  hold: not acquired within --timeout, or lost while COMMAND ran;
//	   release: held by another node, no --force
//	7  etcd unreachable, TLS or authentication failure
//	130 interrupted while waiting for the lock
//	other: COMMAND's own exit status (128+N when killed by signal N)
//
// Example:
//
//	crd-lock hold --timeout 10m --purpose "kernel update" -- apt-get -y dist-upgrade
//	crd-lock status --group rack1
//	crd-lock release --holder node-7 --force
package crdlock

import (
	"context"
	"flag"
	"io"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"log/slog"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/etcd"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

const tool = "crd-lock"

// commands is the overview printed by --help and `crd-lock help`, in the
// layout of every tool's help (lib/cli.Usage).
const commands = `Usage: crd-lock SUBCOMMAND [flags]

Subcommands:
  hold [flags] -- COMMAND [ARG...]
                 take the lock, run COMMAND while it is held, release it when COMMAND ends
  status         who holds the lock and who waits (exit 0 when answered)
  release        release this node's (or with --force another node's) lock entries
  complete       free this node's reboot slot after it came back
  serve fleetlock
                 a FleetLock server for Fedora CoreOS and Flatcar nodes on this lock
  help [SUBCOMMAND]
                 this overview, or the help of SUBCOMMAND

  -h, --help     this overview
  -V, --version  the version

The shared flags --config, --format, --node, --log-level and --log-format
may come before SUBCOMMAND too: crd-lock --config FILE status.

See crd-lock SUBCOMMAND --help, man crd-lock.
`

// writeUsageError prints the JSON result of a run that never got to its
// subcommand (the format is not known yet, so JSON).
func writeUsageError(stdout io.Writer, sub string, err error) error {
	return finishResult(stdout, report.JSON, &base{Header: report.Header{Tool: tool}, Subcommand: sub}, err)
}

// finishResult ends a subcommand with report.Finish, but returns err
// whatever the write did: hold's exit status is COMMAND's, and a result
// written to a closed stdout does not change what was done.
func finishResult(stdout io.Writer, format report.Format, res report.Settler, err error) error {
	_ = report.Finish(stdout, format, res, err)
	return err
}

// base is the part of every crd-lock result after the common header.
type base struct {
	report.Header
	Subcommand string `json:"subcommand"`
	Key        string `json:"key,omitempty"`
}

// flags are the options every subcommand shares.
type flags struct {
	// synopsis is the first line of --help (default "crd-lock SUB [flags]").
	synopsis   string
	common     cli.Common
	endpoints  string
	key        string
	group      string
	maxHolders config.Budget
	ttl        int
}

// parse parses args (and CRD_* variables) into fs and resolves --format into
// *format, which keeps its JSON default when parsing fails: every subcommand
// answers a usage error with one JSON object.
func (f *flags) parse(fs *flag.FlagSet, args []string, stdout io.Writer, format *report.Format) error {
	synopsis := f.synopsis
	if synopsis == "" {
		synopsis = fs.Name() + " [flags]"
	}
	if err := cli.ParseSynopsis(fs, args, synopsis); err != nil {
		return err
	}
	out, err := f.common.Output(stdout)
	if err != nil {
		return err
	}
	*format = out
	return nil
}

// setup is every subcommand's start without a COMMAND: parse the flags
// (flag.ErrHelp comes back as it is), refuse a stray argument, load the
// configuration and work out the key. sub names the subcommand in errors.
func (f *flags) setup(fs *flag.FlagSet, args []string, stdout io.Writer, format *report.Format, sub string) (config.Config, string, error) {
	if err := f.parse(fs, args, stdout, format); err != nil {
		return config.Config{}, "", err
	}
	if fs.NArg() > 0 {
		return config.Config{}, "", exitcode.Errorf(exitcode.Config, "crd-lock: %s: unexpected argument %q", sub, fs.Arg(0))
	}
	return f.load(fs)
}

func (f *flags) register(fs *flag.FlagSet) {
	f.common.Register(fs)
	fs.StringVar(&f.endpoints, "endpoints", "", "etcd client `URLs`, comma-separated (overrides etcd_endpoints)")
	fs.StringVar(&f.key, "key", "", "lock `key` (overrides lock_key)")
	fs.StringVar(&f.group, "group", "", "lock `group`: the key becomes KEY/GROUP (overrides group)")
	fs.Func("max-holders", "how many may hold the lock at once: `N` or a percentage such as 10% (overrides max_holders)", f.setMaxHolders)
	fs.IntVar(&f.ttl, "ttl", 0, "lease TTL in `seconds` (overrides lock_ttl_sec)")
}

// load reads the configuration with the flags applied and works out the key.
func (f *flags) load(fs *flag.FlagSet) (config.Config, string, error) {
	cfg, err := f.common.Load(fs, func(c *config.Config) {
		if f.endpoints != "" {
			c.EtcdEndpoints = splitList(f.endpoints)
		}
		if f.key != "" {
			c.LockKey = f.key
		}
		if cli.IsSet(fs, "group") {
			c.Group = f.group
		}
		// Given, a flag counts whatever its value: --ttl 0 is refused by
		// validation like lock_ttl_sec: 0, not taken as "the default".
		if cli.IsSet(fs, "max-holders") {
			c.MaxHolders = f.maxHolders
		}
		if cli.IsSet(fs, "ttl") {
			c.LockTTLSec = f.ttl
		}
	})
	if err != nil {
		return cfg, "", err
	}
	if !config.ValidGroup(cfg.Group) {
		return cfg, "", exitcode.Errorf(exitcode.Config, "crd-lock: group %q: use letters, digits, '.', '_' and '-' only (at most 63)", cfg.Group)
	}
	key := cfg.LockKeyForGroup()
	if err := etcd.CheckKey(etcd.Namespace(cfg), key, f.common.ConfigPath); err != nil {
		return cfg, key, err
	}
	return cfg, key, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// connect opens the etcd client; errors are exit 2 or 7.
func (f *flags) connect(ctx context.Context, cfg config.Config) (*clientv3.Client, error) {
	return etcd.Connect(ctx, cfg, f.common.ConfigPath)
}

// lockOptions is lock.FromConfig, the one builder the daemon's cluster step
// uses too, with this tool's purpose and log lines.
// setMaxHolders parses --max-holders: a count or a percentage.
func (f *flags) setMaxHolders(s string) error {
	b, err := config.ParseBudget(s)
	if err != nil {
		return err
	}
	f.maxHolders = b
	return nil
}

func lockOptions(cfg config.Config, purpose, bootID, machineID string, logger *slog.Logger) lock.Options {
	o := lock.FromConfig(cfg, bootID, machineID)
	o.Purpose = purpose
	o.OnRetry = func(attempt int, err error, wait time.Duration) {
		logger.Warn("etcd failed while acquiring; retrying", "key", o.Key, "attempt", attempt, "wait", wait.Round(time.Millisecond), "err", err)
	}
	o.OnRequeued = func(attempt int, err error, wait time.Duration) {
		logger.Warn("our place in line expired (lease gone or entry deleted); queuing again", "key", o.Key, "attempt", attempt, "wait", wait.Round(time.Millisecond), "err", err)
	}
	o.OnQueued = func(position int) {
		logger.Info("lock is busy; waiting in line", "key", o.Key, "position", position)
	}
	return o
}
