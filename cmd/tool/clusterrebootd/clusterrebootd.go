// Package clusterrebootd implements clusterrebootd, the per-node daemon that
// reboots the node when it needs it, one node (or max_holders) at a time
// across the cluster, inside maintenance windows, only while the cluster is
// healthy.
//
// Synopsis:
//
//	clusterrebootd [run] [--config FILE] [--dry-run] [--once] [--crd-lock PATH]
//	clusterrebootd simulate [--config FILE] [--crd-lock PATH]
//	clusterrebootd status [--config FILE] [--format text|json]
//	clusterrebootd report [--config FILE] [--format json|csv|text]
//	clusterrebootd validate-config [--config FILE]
//	clusterrebootd version [--format text|json]
//	clusterrebootd pause --reason TEXT
//	clusterrebootd resume [--local]
//
// Description:
//
// run (the default) is the daemon: every check_interval_sec it runs the
// cycle of docs/architecture.md — post-reboot checks, kill switch, detect,
// window, built-in policies and the pre-lock health gate in this process,
// then `crd-lock step cycle` (lock, re-checks under the lock, reboot slot,
// hooks, reboot command) in a short-lived child. --once runs one cycle and
// exits with its result. simulate runs one cycle with dry_run forced and
// changes nothing, printing each step's decision. status shows the cluster
// from etcd and this node's local state, and the rollout: the nodes per
// wave and group and an estimate of its end. report lists every node the
// cluster knows, one row each, for compliance (JSON, CSV or text). pause/resume set and clear the
// cluster-wide kill switch; resume --local clears this node's reboot_loop
// block. Operations: docs/daemon.md.
//
// Exit status:
//
// run (daemon) 0 when stopped by SIGTERM/SIGINT, 2 on a configuration error.
// run --once and simulate: 0 a reboot was started (or would be, in a dry
// run), 1 no reboot needed, otherwise the code of the step that blocked: 3
// health or policy, 4 lock, 5 window, 6 kill switch or pause, 7 etcd, 8
// detector, 9 hook or reboot command, 10 reboot loop, 130 interrupted.
// validate-config: 0 valid, 2 invalid. status/report/pause/resume: 0, 2
// configuration or usage, or 7 etcd.
//
// Example:
//
//	clusterrebootd validate-config --config /etc/clusterrebootd/config.yaml
//	clusterrebootd simulate --format text
//	clusterrebootd pause --reason "change freeze until Monday (JIRA-42)"
package clusterrebootd

// Tool is the program's name in output.
const Tool = "clusterrebootd"

// commands is the overview printed by --help and `clusterrebootd help`, in
// the layout of every tool's help (lib/cli.Usage).
const commands = `Usage: clusterrebootd [COMMAND] [flags]

Commands:
  run              the daemon (the default command): a cycle every check_interval_sec
  simulate         one full cycle against the real cluster, reboot nothing, show each step's decision
  status           the cluster at a glance: lock holder and waiters, nodes, who is rebooting, pause,
                   the rollout per wave and group and an estimate of its end
  report           one row per node for compliance (--format json, csv or text): reboot needed since,
                   last reboot, running and installed kernel, uptime, state, failures
  validate-config  check the configuration and list every problem
  version          version, commit, Go version, build date
  pause, resume    set or clear the cluster-wide kill switch; resume --reason T also ends a rollout
                   that halted itself after failures (resume --local clears a reboot_loop block)
  hold NODE --reason T, release-hold NODE
                   keep one node from rebooting (the rest of the rollout goes on), or let it again
  request NODE --reason T [--now]
                   reboot one node at its next chance through the lock, windows and gates (consumed once
                   it rebooted); --now: an emergency reboot outside its windows, through every other rule
  help [COMMAND]   this overview, or the help of COMMAND

  -h, --help       this overview and the flags of run
  -V, --version    the version

The shared flags --config, --format, --node, --log-level and --log-format
may come before COMMAND too: clusterrebootd --config FILE status.

See clusterrebootd COMMAND --help, man clusterrebootd.
`
