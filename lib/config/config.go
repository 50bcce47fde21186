// Package config loads, merges and validates the clusterrebootd YAML
// configuration shared by the daemon and every crd-* tool.
//
// Field names follow the PRD schema exactly. Defaults live in Default() and
// are documented in docs/configuration.md and packaging/config.yaml.
package config

import (
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
)

// DefaultPath is where the packages install the configuration.
const DefaultPath = "/etc/clusterrebootd/config.yaml"

// Config is the whole configuration file.
type Config struct {
	NodeName                 string                `yaml:"node_name" json:"node_name"`
	Detectors                []detectspec.Detector `yaml:"reboot_required_detectors" json:"reboot_required_detectors"`
	HealthScript             string                `yaml:"health_script" json:"health_script"`
	HealthTimeoutSec         int                   `yaml:"health_timeout_sec" json:"health_timeout_sec"`
	HealthPublishIntervalSec int                   `yaml:"health_publish_interval_sec" json:"health_publish_interval_sec"`
	CheckIntervalSec         int                   `yaml:"check_interval_sec" json:"check_interval_sec"`
	BackoffMinSec            int                   `yaml:"backoff_min_sec" json:"backoff_min_sec"`
	BackoffMaxSec            int                   `yaml:"backoff_max_sec" json:"backoff_max_sec"`

	LockKey    string `yaml:"lock_key" json:"lock_key"`
	LockTTLSec int    `yaml:"lock_ttl_sec" json:"lock_ttl_sec"`
	// MaxHolders bounds the nodes of this node's group down at once: a
	// count or a percentage of the group's nodes.
	MaxHolders Budget `yaml:"max_holders" json:"max_holders"`
	// MaxHoldersTotal bounds the nodes rebooting at once across every group
	// of the lock (0: no bound beyond max_holders per group).
	MaxHoldersTotal Budget `yaml:"max_holders_total" json:"max_holders_total"`
	Group           string `yaml:"group" json:"group"`
	// Rollout are the fleet's rules beyond the budgets: the failure budget,
	// pacing and waves (docs/rollout.md).
	Rollout Rollout `yaml:"rollout" json:"rollout"`
	// FleetLock is what `crd-lock serve fleetlock` applies to its clients'
	// groups (docs/fleetlock.md).
	FleetLock FleetLock `yaml:"fleetlock" json:"fleetlock"`

	EtcdEndpoints      []string `yaml:"etcd_endpoints" json:"etcd_endpoints"`
	EtcdTLS            TLS      `yaml:"etcd_tls" json:"etcd_tls"`
	EtcdUsername       string   `yaml:"etcd_username" json:"etcd_username"`
	EtcdPasswordFile   string   `yaml:"etcd_password_file" json:"etcd_password_file"`
	EtcdDialTimeoutSec int      `yaml:"etcd_dial_timeout_sec" json:"etcd_dial_timeout_sec"`
	// EtcdNamespace is the key prefix everything the product writes lives
	// under, ending in "/". Default: the directory of lock_key plus "/".
	EtcdNamespace string `yaml:"etcd_namespace" json:"etcd_namespace"`

	RebootCommand   []string   `yaml:"reboot_command" json:"reboot_command"`
	ClusterPolicies Policies   `yaml:"cluster_policies" json:"cluster_policies"`
	Gate            GateChecks `yaml:"gate" json:"gate"`
	Windows         Windows    `yaml:"windows" json:"windows"`
	KillSwitchFile  string     `yaml:"kill_switch_file" json:"kill_switch_file"`
	Metrics         Metrics    `yaml:"metrics" json:"metrics"`
	// Silences: the Alertmanager silence of a rebooting node.
	Silences Silences `yaml:"silences" json:"silences"`
	DryRun   bool     `yaml:"dry_run" json:"dry_run"`
	// StateDir survives reboots: the reboot marker and the reboot counter.
	StateDir string `yaml:"state_dir" json:"state_dir"`
	// RunDir is cleared at boot: the post-reboot timestamp (FR-SD-3).
	RunDir string `yaml:"run_dir" json:"run_dir"`

	// Daemon cycle (clusterrebootd).
	RebootSlotTTLSec int    `yaml:"reboot_slot_ttl_sec" json:"reboot_slot_ttl_sec"`
	PreRebootHooks   []Hook `yaml:"pre_reboot_hooks" json:"pre_reboot_hooks"`
	PostRebootHooks  []Hook `yaml:"post_reboot_hooks" json:"post_reboot_hooks"`
	// AbortHooks undo the pre-reboot hooks (e.g. uncordon after a drain)
	// when a reboot is aborted after one of them started.
	AbortHooks       []Hook `yaml:"abort_hooks" json:"abort_hooks"`
	SettleSec        int    `yaml:"settle_sec" json:"settle_sec"`
	MaxRebootsPerDay int    `yaml:"max_reboots_per_day" json:"max_reboots_per_day"`

	// Notifications are messages about reboots, sent by the cluster child
	// (docs/notifications.md).
	Notifications Notifications `yaml:"notifications" json:"notifications"`

	// origin remembers which file and line set each field, for messages.
	origin origins
	// sources lists the files read, in order.
	sources []string
	// problems are the files' schema problems (unknown keys, wrong types),
	// which Validate lists before its own.
	problems []Problem
}

// Sources lists the files this configuration was read from, in merge order
// (empty when only defaults apply).
func (c *Config) Sources() []string { return append([]string(nil), c.sources...) }

// Where is "file:line" of the file that set field (a YAML path such as
// "health_script"), or "" when a default or a flag set it.
func (c *Config) Where(field string) string { return c.origin.where(field) }

// Namespace is the etcd key prefix everything the product writes lives
// under, always ending in "/": etcd_namespace, or the directory of lock_key.
func (c *Config) Namespace() string {
	ns := c.EtcdNamespace
	if ns == "" {
		ns = c.LockKey
		if i := strings.LastIndex(ns, "/"); i >= 0 {
			ns = ns[:i]
		}
	}
	if !strings.HasSuffix(ns, "/") {
		ns += "/"
	}
	return ns
}

// LockKeyForGroup is the lock key of this node's group: lock_key, or
// lock_key + "/" + group when a group is set.
func (c *Config) LockKeyForGroup() string { return GroupLockKey(c.LockKey, c.Group) }

// GroupLockKey is the one way to build a group's lock key: lockKey (without a
// trailing "/") for no group, else lockKey/group.
func GroupLockKey(lockKey, group string) string {
	lockKey = strings.TrimSuffix(lockKey, "/")
	if group == "" {
		return lockKey
	}
	return lockKey + "/" + group
}

// Rollout are the fleet's rules of docs/rollout.md that are not budgets.
type Rollout struct {
	// Wave is this node's wave: 0 for canaries, then 1, 2, ...
	Wave int `yaml:"wave" json:"wave"`
	// MaxFailures is the failure budget: the failures within the window at
	// which no further slot is admitted (a count or a percentage; 0: off).
	MaxFailures Budget `yaml:"max_failures" json:"max_failures"`
	// FailureWindowSec is how long a failure counts.
	FailureWindowSec int `yaml:"failure_window_sec" json:"failure_window_sec"`
	// FailureScope is "fleet" or "group": what a failure halts.
	FailureScope string `yaml:"failure_scope" json:"failure_scope"`
	// PostRebootTimeoutSec is how long a node back from its reboot may fail
	// its post-reboot checks before that is a failure.
	PostRebootTimeoutSec int `yaml:"post_reboot_timeout_sec" json:"post_reboot_timeout_sec"`
	// MinIntervalSec is the bake time between two reboots starting in a group.
	MinIntervalSec int `yaml:"min_interval_sec" json:"min_interval_sec"`
	// MaxStartsPerHour bounds the reboots starting across the fleet per hour (0: no bound).
	MaxStartsPerHour int `yaml:"max_starts_per_hour" json:"max_starts_per_hour"`
	// WaveBakeSec is how long after a lower wave's last completion the next wave waits.
	WaveBakeSec int `yaml:"wave_bake_sec" json:"wave_bake_sec"`
	// WaveTimeoutSec is how long a lower-wave node that needs a reboot holds
	// back the later waves.
	WaveTimeoutSec int `yaml:"wave_timeout_sec" json:"wave_timeout_sec"`
}

// Failure scopes.
const (
	ScopeFleet = "fleet"
	ScopeGroup = "group"
)

// DefaultRollout is the failure budget on (one failure halts the fleet),
// no pacing, one wave.
func DefaultRollout() Rollout {
	return Rollout{MaxFailures: Count(1), FailureWindowSec: 86400, FailureScope: ScopeFleet,
		PostRebootTimeoutSec: 1800, WaveTimeoutSec: 86400}
}

// FleetLock is what the FleetLock server applies to its clients, which it
// cannot look inside: per-group budgets, waves and windows.
type FleetLock struct {
	// Windows apply to every group without windows of its own (none: no
	// window is checked).
	Windows *Windows `yaml:"windows" json:"windows"`
	// Groups are per FleetLock group (after --default-group mapping: the
	// lock group's name, "" for the ungrouped lock).
	Groups map[string]FleetLockGroup `yaml:"groups" json:"groups"`
}

// FleetLockGroup is one lock group's settings for its FleetLock clients.
type FleetLockGroup struct {
	// MaxHolders, when set, is the group's budget (else max_holders).
	MaxHolders *Budget `yaml:"max_holders" json:"max_holders"`
	// Wave is the clients' wave.
	Wave int `yaml:"wave" json:"wave"`
	// Windows, when set, replace fleetlock.windows for this group.
	Windows *Windows `yaml:"windows" json:"windows"`
}

// TLS configures mutual TLS towards etcd.
type TLS struct {
	Enabled  bool   `yaml:"enabled" json:"enabled"`
	CAFile   string `yaml:"ca_file" json:"ca_file"`
	CertFile string `yaml:"cert_file" json:"cert_file"`
	KeyFile  string `yaml:"key_file" json:"key_file"`
}

// GateChecks are the opt-in built-in checks of this node, run beside the
// health script in the pre-lock and under-lock phases (lib/gate).
type GateChecks struct {
	// NoLoginSessions blocks while an interactive login session is open
	// (a USER_PROCESS entry of /run/utmp with a live process).
	NoLoginSessions bool `yaml:"no_login_sessions" json:"no_login_sessions"`
	// InactiveUnits blocks while any of these systemd units is active.
	InactiveUnits []string `yaml:"inactive_units" json:"inactive_units"`
	// Alerts block while a matching alert fires in Alertmanager or
	// Prometheus (lib/alertgate; every phase).
	Alerts []AlertCheck `yaml:"alerts" json:"alerts"`
	// PromQL block while an expression's value leaves its bounds.
	PromQL []PromQLCheck `yaml:"promql" json:"promql"`
}

// Policies are the built-in cluster policies, checked before the health script.
type Policies struct {
	MinHealthyFraction       float64  `yaml:"min_healthy_fraction" json:"min_healthy_fraction"`
	MinHealthyAbsolute       int      `yaml:"min_healthy_absolute" json:"min_healthy_absolute"`
	ForbidIfOnlyFallbackLeft bool     `yaml:"forbid_if_only_fallback_left" json:"forbid_if_only_fallback_left"`
	FallbackNodes            []string `yaml:"fallback_nodes" json:"fallback_nodes"`
}

// Windows are maintenance (allow) and blackout (deny) windows.
type Windows struct {
	Deny  []string `yaml:"deny" json:"deny"`
	Allow []string `yaml:"allow" json:"allow"`
	// Timezone is an IANA name; "Local" (the default) is the host's zone.
	Timezone string `yaml:"timezone" json:"timezone"`
}

// Metrics configures Prometheus exposition.
type Metrics struct {
	Enabled bool   `yaml:"enabled" json:"enabled"`
	Listen  string `yaml:"listen" json:"listen"`
	// Textfile, when set, is a node_exporter textfile-collector path written
	// instead of (or besides) serving HTTP: the lean alternative.
	Textfile string `yaml:"textfile" json:"textfile"`
}

// Hook is a command run before or after a coordinated reboot.
type Hook struct {
	Name       string   `yaml:"name" json:"name"`
	Cmd        []string `yaml:"cmd" json:"cmd"`
	TimeoutSec int      `yaml:"timeout_sec" json:"timeout_sec"`
	// OnTimeout is, for a pre-reboot hook only, what its timeout means:
	// "abort" (the default, as "") or "continue" (the reboot goes on).
	OnTimeout string `yaml:"on_timeout" json:"on_timeout"`
}

// DefaultHookTimeout bounds a hook without timeout_sec.
const DefaultHookTimeout = 300 * time.Second

// Timeout is how long the hook may run: timeout_sec, or DefaultHookTimeout.
func (h Hook) Timeout() time.Duration {
	if h.TimeoutSec > 0 {
		return time.Duration(h.TimeoutSec) * time.Second
	}
	return DefaultHookTimeout
}

// Values of Hook.OnTimeout.
const (
	OnTimeoutAbort    = "abort"
	OnTimeoutContinue = "continue"
)

// Default returns the configuration used where neither the file nor a flag
// says otherwise. NodeName stays empty: callers fill in the hostname.
func Default() Config {
	return Config{
		Detectors:                []detectspec.Detector{{Type: "auto"}},
		HealthTimeoutSec:         30,
		HealthPublishIntervalSec: 60,
		CheckIntervalSec:         60,
		BackoffMinSec:            5,
		BackoffMaxSec:            60,
		LockKey:                  "/cluster/clusterrebootd/lock",
		LockTTLSec:               90,
		MaxHolders:               Count(1),
		Rollout:                  DefaultRollout(),
		EtcdEndpoints:            []string{"http://127.0.0.1:2379"},
		EtcdDialTimeoutSec:       5,
		RebootCommand:            []string{"/usr/bin/systemctl", "reboot"},
		Windows:                  Windows{Timezone: "Local"},
		KillSwitchFile:           "/etc/clusterrebootd/disable",
		Metrics:                  Metrics{Listen: "127.0.0.1:10190"},
		Silences:                 Silences{TimeoutSec: 10},
		Notifications:            Notifications{TimeoutSec: 5, BlockedAfterSec: 3600},
		StateDir:                 "/var/lib/clusterrebootd",
		RunDir:                   "/run/clusterrebootd",
		RebootSlotTTLSec:         1800,
		MaxRebootsPerDay:         2,
	}
}
