package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

func writeFile(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func load(t *testing.T, body string) (Config, error) {
	t.Helper()
	dir := t.TempDir()
	p := writeFile(t, dir, "config.yaml", body, 0o644)
	cfg, err := Load(p, true)
	if err != nil {
		return cfg, err
	}
	if cfg.NodeName == "" {
		cfg.NodeName = "node-1"
	}
	return cfg, Validate(&cfg, p, func(s string) error {
		if strings.Contains(s, "bogus") {
			return errors.New("cannot parse")
		}
		return nil
	})
}

func TestDefaultsAreValid(t *testing.T) {
	cfg := Default()
	cfg.NodeName = "n1"
	if err := Validate(&cfg, "defaults", nil); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Namespace(); got != "/cluster/clusterrebootd/" {
		t.Errorf("Namespace() = %q", got)
	}
}

func TestPRDExampleLoads(t *testing.T) {
	dir := t.TempDir()
	key := writeFile(t, dir, "client-key.pem", "k", 0o600)
	body := `
node_name: "node-1"
reboot_required_detectors:
  - type: file
    path: "/var/run/reboot-required"
  - type: command
    cmd: ["/usr/bin/needs-restarting", "-r"]
    success_exit_codes: [1]
health_script: "/usr/local/bin/cluster-health-check.sh"
health_timeout_sec: 30
check_interval_sec: 60
backoff_min_sec: 5
backoff_max_sec: 60
lock_key: "/cluster/clusterrebootd/lock"
lock_ttl_sec: 90
etcd_endpoints: ["https://etcd-1:2379","https://etcd-2:2379","https://etcd-3:2379"]
etcd_tls:
  enabled: true
  ca_file: "/etc/ssl/etcd/ca.pem"
  cert_file: "/etc/ssl/etcd/client.pem"
  key_file: "` + key + `"
reboot_command: ["/sbin/shutdown","-r","now","coordinated kernel reboot"]
cluster_policies:
  min_healthy_fraction: 0.6
  min_healthy_absolute: 3
  forbid_if_only_fallback_left: true
  fallback_nodes: ["lb-1","lb-2"]
windows:
  deny: ["Fri 18:00-Mon 08:00", "* 23:00-06:00"]
  allow: ["Tue 22:00-23:00"]
kill_switch_file: "/etc/clusterrebootd/disable"
metrics:
  enabled: false
  listen: "127.0.0.1:9090"
`
	cfg, err := load(t, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Detectors) != 2 || cfg.Detectors[1].SuccessExitCodes[0] != 1 || cfg.ClusterPolicies.MinHealthyAbsolute != 3 {
		t.Errorf("fields not decoded: %+v", cfg)
	}
	if cfg.StateDir != "/var/lib/clusterrebootd" {
		t.Errorf("defaults must fill unset fields, state_dir = %q", cfg.StateDir)
	}
}

func TestValidationErrors(t *testing.T) {
	emptySecret := writeFile(t, t.TempDir(), "pw", "", 0o600)
	tests := []struct {
		name string
		body string
		want string // substring of the error
	}{
		{"unknown key with line", "node_name: a\nbogus_key: 1\n", "config.yaml:2: bogus_key: unknown field; check its spelling"},
		{"wrong type", "check_interval_sec: soon\n", `config.yaml:1: check_interval_sec: wrong type: a string "soon" where an integer is expected`},
		{"nested unknown key", "windows:\n  allow: []\n  bogus: 1\n", "config.yaml:3: windows.bogus: unknown field"},
		{"list where a string is expected", "node_name: [a, b]\n", "config.yaml:1: node_name: wrong type: a list where a string is expected"},
		{"every schema problem counted", "bogus: 1\ndry_run: maybe\nlock_ttl_sec: x\n", "(and 2 more; see clusterrebootd validate-config)"},
		{"zero interval", "check_interval_sec: 0\n", "config.yaml:1: check_interval_sec: must be a positive number"},
		{"negative interval", "health_publish_interval_sec: -5\n", "health_publish_interval_sec: must be a positive"},
		{"ttl not above health timeout", "health_script: /bin/true\nhealth_timeout_sec: 90\nlock_ttl_sec: 90\n", "lock_ttl_sec: 90 must be greater than health_timeout_sec (90)"},
		{"empty reboot command", "reboot_command: []\n", "reboot_command: must not be empty"},
		{"relative reboot command", "reboot_command: [shutdown, -r]\n", "reboot_command[0]: \"shutdown\" must be an absolute path"},
		{"bad window with line", "windows:\n  deny:\n    - \"* 23:00-06:00\"\n    - \"bogus\"\n", "config.yaml:4: windows.deny[1]: cannot parse"},
		{"bad timezone", "windows:\n  timezone: Mars/Olympus\n", "windows.timezone: \"Mars/Olympus\" is not a known IANA time zone"},
		{"backoff order", "backoff_min_sec: 30\nbackoff_max_sec: 10\n", "backoff_max_sec: 10 is below backoff_min_sec (30)"},
		{"detector type", "reboot_required_detectors:\n  - type: magic\n", "reboot_required_detectors[0].type: \"magic\" is not a detector type"},
		{"detector missing type", "reboot_required_detectors:\n  - path: /x\n", "reboot_required_detectors[0].type: is missing"},
		{"file detector relative", "reboot_required_detectors:\n  - type: file\n    path: x\n", "reboot_required_detectors[0].path: \"x\" is not an absolute path"},
		{"command detector empty", "reboot_required_detectors:\n  - type: command\n", "reboot_required_detectors[0].cmd: a command detector needs cmd"},
		{"overlapping codes", "reboot_required_detectors:\n  - type: command\n    cmd: [/bin/x]\n    success_exit_codes: [1]\n    not_needed_exit_codes: [1]\n", "exit code 1 is in both"},
		// The default not_needed_exit_codes [0]: validate-config accepted this
		// while every detection refused it (the rules were written twice).
		{"overlapping the default codes", "reboot_required_detectors:\n  - type: command\n    cmd: [/bin/x]\n    success_exit_codes: [0]\n", "exit code 0 is in both success_exit_codes and not_needed_exit_codes (defaults [1] and [0])"},
		{"a name taken by a derived one", "reboot_required_detectors:\n  - {type: auto}\n  - {type: kernel, name: auto}\n", "reboot_required_detectors[1].name: \"auto\" is used by another detector"},
		{"codes on file detector", "reboot_required_detectors:\n  - type: file\n    path: /x\n    success_exit_codes: [1]\n", "apply to type command only"},
		{"exit code range", "reboot_required_detectors:\n  - type: command\n    cmd: [/bin/x]\n    success_exit_codes: [300]\n", "success_exit_codes: 300 is not an exit code"},
		{"127 is not an answer", "reboot_required_detectors:\n  - type: command\n    cmd: [/bin/x]\n    not_needed_exit_codes: [0, 127]\n", "not_needed_exit_codes: 127 means the program could not be run"},
		{"reserved name", "reboot_required_detectors:\n  - {type: auto, name: any}\n", "\"any\" is reserved"},
		{"file with cmd", "reboot_required_detectors:\n  - {type: file, path: /x, cmd: [/bin/y]}\n", "type file takes path, not cmd"},
		{"command with path", "reboot_required_detectors:\n  - {type: command, path: /x, cmd: [/bin/y]}\n", "type command takes cmd, not path"},
		{"no detectors", "reboot_required_detectors: []\n", "reboot_required_detectors: is empty"},
		{"gate unit without suffix", "gate:\n  inactive_units: [backup]\n", "config.yaml:2: gate.inactive_units[0]: \"backup\" has no unit type suffix"},
		{"gate unit like an option", "gate:\n  inactive_units: [backup.service, \"--all\"]\n", "gate.inactive_units[1]: \"--all\" starts with \"-\""},
		{"gate unit with a blank", "gate:\n  inactive_units: [\"my backup.service\"]\n", "gate.inactive_units[0]: \"my backup.service\" has ' '"},
		{"max_uptime without days", "reboot_required_detectors:\n  - type: max_uptime\n", "config.yaml:2: reboot_required_detectors[0].days: 0 must be from 1 to 3650"},
		{"max_uptime days too many", "reboot_required_detectors:\n  - {type: auto}\n  - {type: max_uptime, days: 99999}\n", "reboot_required_detectors[1].days: 99999 must be from 1 to 3650"},
		{"max_uptime with a path", "reboot_required_detectors:\n  - {type: max_uptime, days: 30, path: /proc/uptime}\n", "type max_uptime takes days only"},
		{"days on a kernel detector", "reboot_required_detectors:\n  - {type: kernel, days: 30}\n", "reboot_required_detectors[0].days: applies to type max_uptime only"},
		{"duplicate detector names", "reboot_required_detectors:\n  - {type: auto, name: a}\n  - {type: kernel, name: a}\n", "names must be unique"},
		{"fraction", "cluster_policies:\n  min_healthy_fraction: 1.5\n", "min_healthy_fraction: 1.5 must be between 0 and 1"},
		{"fallback without nodes", "cluster_policies:\n  forbid_if_only_fallback_left: true\n", "cluster_policies.fallback_nodes: is empty"},
		{"password in an endpoint is not printed", "etcd_endpoints: [\"http://crd:s3cret@e:2379\"]\n", `etcd_endpoints[0]: "http://crd:***@e:2379" is not`},
		{"endpoint not url", "etcd_endpoints: [\"etcd-1:2379\"]\n", "etcd_endpoints[0]: \"etcd-1:2379\" is not an http:// or https:// URL"},
		{"http with tls", "etcd_endpoints: [\"http://e:2379\"]\netcd_tls: {enabled: true, ca_file: /ca.pem}\n", "plain http while etcd_tls.enabled"},
		{"cert without key", "etcd_endpoints: [\"https://e:2379\"]\netcd_tls: {enabled: true, ca_file: /ca.pem, cert_file: /c.pem}\n", "cert_file and key_file go together"},
		{"missing key file", "etcd_endpoints: [\"https://e:2379\"]\netcd_tls: {enabled: true, ca_file: /ca.pem, cert_file: /c.pem, key_file: /nonexistent/k.pem}\n", "etcd_tls.key_file: cannot read /nonexistent/k.pem"},
		{"user without password", "etcd_username: crd\n", "etcd_password_file: must be set"},
		{"empty password file", "etcd_username: crd\netcd_password_file: " + emptySecret + "\n", "etcd_password_file: " + emptySecret + " is empty: write the secret into it"},
		{"node name", "node_name: \"a/b\"\n", "node_name: \"a/b\" is not a valid node name"},
		{"lock key trailing slash", "lock_key: /cluster/lock/\n", "lock_key: \"/cluster/lock/\" must start with '/'"},
		{"lock key outside namespace", "etcd_namespace: /prod/\nlock_key: /other/lock\n", "is outside etcd_namespace"},
		{"lock key in the slots' directory", "etcd_namespace: /c/\nlock_key: /c/rebooting/lock\n", `lock_key: "/c/rebooting/lock" collides with /c/rebooting`},
		{"lock key is the slots' directory", "lock_key: /c/rebooting\n", `lock_key: "/c/rebooting" collides with /c/rebooting`},
		{"lock key in the records' directory", "etcd_namespace: /c/\nlock_key: /c/nodes/lock\n", `collides with /c/nodes`},
		{"lock key is the pause key", "lock_key: /c/disable\n", `collides with /c/disable`},
		{"lock key in the holds' directory", "etcd_namespace: /c/\nlock_key: /c/holds/lock\n", `collides with /c/holds`},
		{"lock key is the requests' directory", "lock_key: /c/requests\n", `collides with /c/requests`},
		{"post-reboot steps outlast the slot", "reboot_slot_ttl_sec: 600\nsettle_sec: 400\npost_reboot_hooks:\n  - {cmd: [/bin/x], timeout_sec: 300}\n",
			"settle_sec (400) plus the post-reboot hooks' timeouts (300) reach reboot_slot_ttl_sec (600)"},
		{"namespace form", "etcd_namespace: prod\n", "etcd_namespace: \"prod\" must start and end with '/'"},
		{"max holders", "max_holders: 0\n", "max_holders: 0 must be at least 1"},
		{"group", "group: \"rack 1\"\n", "group: \"rack 1\" must be letters"},
		{"ttl too short", "lock_ttl_sec: 2\nhealth_timeout_sec: 1\n", "lock_ttl_sec: 2 is too short"},
		{"relative kill switch", "kill_switch_file: disable\n", "kill_switch_file: \"disable\" is not an absolute path"},
		{"metrics listen", "metrics: {enabled: true, listen: nine}\n", "metrics.listen: \"nine\" is not host:port"},
		{"textfile suffix", "metrics: {textfile: /var/lib/node_exporter/crd.txt}\n", "must end in .prom"},
		{"slot ttl", "reboot_slot_ttl_sec: 10\n", "reboot_slot_ttl_sec: 10 is too short"},
		{"reboots per day", "max_reboots_per_day: 0\n", "max_reboots_per_day: 0 must be at least 1"},
		{"hook empty", "pre_reboot_hooks:\n  - name: drain\n", "pre_reboot_hooks[0].cmd: must not be empty"},
		{"hook relative", "post_reboot_hooks:\n  - cmd: [uncordon]\n", "post_reboot_hooks[0].cmd[0]: \"uncordon\" must be an absolute path"},
		{"abort hook relative", "pre_reboot_hooks:\n  - cmd: [/bin/drain]\nabort_hooks:\n  - cmd: [uncordon]\n", "config.yaml:4: abort_hooks[0].cmd[0]: \"uncordon\" must be an absolute path"},
		{"abort hooks without pre-reboot hooks", "abort_hooks:\n  - cmd: [/bin/uncordon]\n", "abort_hooks: is set but pre_reboot_hooks is empty"},
		{"on_timeout unknown", "pre_reboot_hooks:\n  - {cmd: [/bin/drain], on_timeout: force}\n", "config.yaml:2: pre_reboot_hooks[0].on_timeout: \"force\" is not abort or continue"},
		{"on_timeout on a post-reboot hook", "post_reboot_hooks:\n  - {cmd: [/bin/x], on_timeout: continue}\n", "post_reboot_hooks[0].on_timeout: only pre_reboot_hooks take on_timeout"},
		{"on_timeout on an abort hook", "pre_reboot_hooks:\n  - cmd: [/bin/drain]\nabort_hooks:\n  - {cmd: [/bin/x], on_timeout: abort}\n", "abort_hooks[0].on_timeout: only pre_reboot_hooks take on_timeout"},
		{"abort hook timeout beyond a year", "pre_reboot_hooks:\n  - cmd: [/bin/drain]\nabort_hooks:\n  - {cmd: [/bin/x], timeout_sec: 40000000}\n", "abort_hooks[0].timeout_sec: 40000000 is more than a year"},
		{"settle", "settle_sec: -1\n", "settle_sec: -1 must not be negative"},
		{"health script relative", "health_script: check.sh\n", "health_script: \"check.sh\" is not an absolute path"},
		// A few digits too many would overflow time.Duration (or etcd's
		// lease TTL limit) and leave a node busy-looping or never holding
		// its lock; every *_sec field is at most a year.
		{"lock ttl beyond a year", "lock_ttl_sec: 99999999999\n", "config.yaml:1: lock_ttl_sec: 99999999999 is more than a year (31622400 s)"},
		{"interval beyond a year", "check_interval_sec: 10000000000\n", "check_interval_sec: 10000000000 is more than a year"},
		{"publish interval beyond a year", "health_publish_interval_sec: 31622401\n", "health_publish_interval_sec: 31622401 is more than a year"},
		{"health timeout beyond a year", "health_timeout_sec: 10000000000\n", "health_timeout_sec: 10000000000 is more than a year"},
		{"backoff beyond a year", "backoff_max_sec: 40000000\n", "backoff_max_sec: 40000000 is more than a year"},
		{"dial timeout beyond a year", "etcd_dial_timeout_sec: 40000000\n", "etcd_dial_timeout_sec: 40000000 is more than a year"},
		{"slot ttl beyond a year", "reboot_slot_ttl_sec: 40000000\n", "reboot_slot_ttl_sec: 40000000 is more than a year"},
		{"settle beyond a year", "settle_sec: 40000000\n", "settle_sec: 40000000 is more than a year"},
		{"detector timeout beyond a year", "reboot_required_detectors:\n  - {type: command, cmd: [/bin/x], timeout_sec: 40000000}\n", "reboot_required_detectors[0].timeout_sec: 40000000 is more than a year"},
		{"hook timeout beyond a year", "post_reboot_hooks:\n  - {cmd: [/bin/x], timeout_sec: 40000000}\n", "post_reboot_hooks[0].timeout_sec: 40000000 is more than a year"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.body)
			if err == nil {
				t.Fatalf("want an error containing %q", tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error prints the password: %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\n does not contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error must be one line: %q", err)
			}
			if exitcode.From(err) != 2 {
				t.Errorf("exit code %d, want 2", exitcode.From(err))
			}
		})
	}
}

// Without a health script nothing runs under the lock, so an ad-hoc
// crd-lock hold --ttl 10 needs no health_timeout_sec change.
func TestShortTTLWithoutScript(t *testing.T) {
	if _, err := load(t, "lock_ttl_sec: 10\n"); err != nil {
		t.Fatal(err)
	}
}

func TestAllProblemsCounted(t *testing.T) {
	_, err := load(t, "check_interval_sec: 0\nsettle_sec: -1\nmax_holders: 0\n")
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 3 {
		t.Fatalf("want 3 problems, got %v", err)
	}
	if !strings.Contains(err.Error(), "(and 2 more") {
		t.Errorf("summary missing: %v", err)
	}
}

func TestSecretFileModes(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o640, false}, {0o644, false}, {0o604, false}} {
		p := writeFile(t, dir, "pw", "secret", 0o600)
		if err := os.Chmod(p, tt.mode); err != nil {
			t.Fatal(err)
		}
		_, err := load(t, "etcd_username: crd\netcd_password_file: "+p+"\n")
		if (err == nil) != tt.ok {
			t.Errorf("mode %04o: err = %v, want ok=%v", tt.mode, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("message must say what to do: %v", err)
		}
	}
}

func TestDropInsMergeInLexicalOrder(t *testing.T) {
	dir := t.TempDir()
	main := writeFile(t, dir, "config.yaml", "node_name: base\ncheck_interval_sec: 60\nwindows:\n  allow: [\"Tue 22:00-23:00\"]\n  deny: [\"Fri 18:00-Mon 08:00\"]\n", 0o644)
	writeFile(t, dir, "config.d/20-late.yaml", "check_interval_sec: 30\n", 0o644)
	writeFile(t, dir, "config.d/10-early.yaml", "check_interval_sec: 10\nnode_name: dropin\nwindows:\n  deny: []\n", 0o644)
	writeFile(t, dir, "config.d/99-ignored.yml.disabled", "check_interval_sec: 1\n", 0o644)
	cfg, err := Load(main, true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CheckIntervalSec != 30 {
		t.Errorf("check_interval_sec = %d, want 30 from the lexically last drop-in", cfg.CheckIntervalSec)
	}
	if cfg.NodeName != "dropin" {
		t.Errorf("node_name = %q", cfg.NodeName)
	}
	if len(cfg.Windows.Deny) != 0 || len(cfg.Windows.Allow) != 1 {
		t.Errorf("a drop-in replaces the keys it names and keeps the rest: %+v", cfg.Windows)
	}
	if got := cfg.Sources(); len(got) != 3 || !strings.HasSuffix(got[2], "20-late.yaml") {
		t.Errorf("Sources() = %v", got)
	}
	// A bad drop-in names its own file.
	writeFile(t, dir, "config.d/30-bad.yaml", "check_interval_sec: 0\n", 0o644)
	cfg, err = Load(main, true)
	if err != nil {
		t.Fatal(err)
	}
	err = Validate(&cfg, main, nil)
	if err == nil || !strings.Contains(err.Error(), "30-bad.yaml:1: check_interval_sec") {
		t.Errorf("want the drop-in's file and line, got %v", err)
	}
}

// A config.d that is a file or cannot be read is an error (exit 2), never a
// silent skip: a drop-in may hold the setting that keeps this node from
// rebooting. A symlink loop stands in for an unreadable directory, since the
// tests run as root.
func TestDropInsDirectory(t *testing.T) {
	dir := t.TempDir()
	main := writeFile(t, dir, "config.yaml", "node_name: base\n", 0o644)
	writeFile(t, dir, "config.d", "not a directory\n", 0o644)
	if _, err := Load(main, true); err == nil || exitcode.From(err) != 2 || !strings.Contains(err.Error(), "config.d is not a directory") {
		t.Errorf("config.d as a file must be exit 2, got %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "config.d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("config.d", filepath.Join(dir, "config.d")); err != nil {
		t.Fatal(err)
	}
	_, err := Load(main, true)
	if err == nil || exitcode.From(err) != 2 || !strings.Contains(err.Error(), "config.d") {
		t.Errorf("an unreadable config.d must be exit 2 naming it, got %v", err)
	}
	// A directory named like a drop-in is an error too, as it was with
	// os.ReadFile.
	if err := os.Remove(filepath.Join(dir, "config.d")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "config.d/10-a.yaml", "check_interval_sec: 10\n", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "config.d", "20-dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Load(main, true)
	if err == nil || !strings.Contains(err.Error(), "20-dir.yaml") {
		t.Errorf("a directory named *.yaml in config.d must be reported, got %v", err)
	}
}

// A configuration that is not a small file (a device, a runaway file) is
// exit 2 naming it, not an unbounded read.
func TestFileTooLarge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge.yaml")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, maxFileSize+1); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, true)
	if err == nil || exitcode.From(err) != 2 || !strings.Contains(err.Error(), "huge.yaml") || !strings.Contains(err.Error(), "larger than 4 MiB") {
		t.Errorf("want exit 2 naming the file and its size, got %v", err)
	}
	if _, err := Load("/dev/zero", true); err == nil || exitcode.From(err) != 2 || !strings.Contains(err.Error(), "a device, not a YAML file") {
		t.Errorf("/dev/zero: want exit 2 saying it is a device, got %v", err)
	}
}

// What would otherwise hang or drop a setting without a word is exit 2,
// naming the path: a FIFO as the file or a drop-in (read, it would block
// every tool until someone writes to it), a file where config.d should be
// (`cp x.yaml config.d` before the directory exists), a drop-in named *.yml.
func TestConfigPathsThatAreNotFiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"config is a FIFO", func(t *testing.T, dir string) {
			mkfifo(t, filepath.Join(dir, "config.yaml"))
		}, "config.yaml: a FIFO, not a YAML file"},
		{"drop-in is a FIFO", func(t *testing.T, dir string) {
			writeFile(t, dir, "config.yaml", "check_interval_sec: 10\n", 0o644)
			writeFile(t, dir, "config.d/10-a.yaml", "check_interval_sec: 20\n", 0o644)
			mkfifo(t, filepath.Join(dir, "config.d", "20-fifo.yaml"))
		}, "20-fifo.yaml: a FIFO, not a YAML file"},
		{"config is a directory", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "config.yaml"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "config.yaml: a directory, not a YAML file"},
		{"config.d is a file", func(t *testing.T, dir string) {
			writeFile(t, dir, "config.yaml", "check_interval_sec: 10\n", 0o644)
			writeFile(t, dir, "config.d", "windows:\n  deny: [\"* 00:00-24:00\"]\n", 0o644)
		}, "config.d is not a directory"},
		{"drop-in named .yml", func(t *testing.T, dir string) {
			writeFile(t, dir, "config.yaml", "check_interval_sec: 10\n", 0o644)
			writeFile(t, dir, "config.d/50-freeze.yml", "windows:\n  deny: [\"* 00:00-24:00\"]\n", 0o644)
		}, "50-freeze.yml: drop-ins must end in .yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			_, err := Load(filepath.Join(dir, "config.yaml"), true)
			if err == nil || exitcode.From(err) != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want exit 2 with %q, got %v", tc.want, err)
			}
		})
	}
	// Other names in config.d (a README, a package manager's backup) are
	// not drop-ins and are left alone.
	dir := t.TempDir()
	writeFile(t, dir, "config.yaml", "check_interval_sec: 10\n", 0o644)
	writeFile(t, dir, "config.d/README", "drop-ins go here\n", 0o644)
	writeFile(t, dir, "config.d/10-a.yaml.dpkg-old", "bogus: [\n", 0o644)
	if cfg, err := Load(filepath.Join(dir, "config.yaml"), true); err != nil || cfg.CheckIntervalSec != 10 {
		t.Errorf("other names in config.d must be ignored: %v", err)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope.yaml")
	if _, err := Load(p, false); err != nil {
		t.Errorf("a missing default file means defaults, got %v", err)
	}
	_, err := Load(p, true)
	if err == nil || exitcode.From(err) != 2 || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("an explicit missing file is exit 2, got %v", err)
	}
}

func TestParseAndEmpty(t *testing.T) {
	cfg, err := Parse("stdin", []byte(""))
	if err != nil || cfg.LockTTLSec != 90 {
		t.Fatalf("empty document must give defaults: %v %+v", err, cfg)
	}
	if _, err := Parse("stdin", []byte("lock_ttl_sec: [")); err == nil || exitcode.From(err) != 2 {
		t.Errorf("syntax error must be exit 2, got %v", err)
	}
}

func TestNamespaceAndGroupKey(t *testing.T) {
	cfg := Default()
	cfg.EtcdNamespace = "/prod/crd/"
	cfg.LockKey = "/prod/crd/lock"
	cfg.Group = "rack-1"
	if cfg.Namespace() != "/prod/crd/" || cfg.LockKeyForGroup() != "/prod/crd/lock/rack-1" {
		t.Errorf("%q %q", cfg.Namespace(), cfg.LockKeyForGroup())
	}
}

func TestRestartOnlyChanges(t *testing.T) {
	old := Default()
	old.NodeName = "a"
	next := old
	next.CheckIntervalSec = 5
	next.Windows.Deny = []string{"* 00:00-01:00"}
	if got := RestartOnlyChanges(&old, &next); len(got) != 0 {
		t.Errorf("hot fields reported as restart-only: %v", got)
	}
	next.NodeName = "b"
	next.Metrics.Listen = "0.0.0.0:1"
	got := RestartOnlyChanges(&old, &next)
	if len(got) != 2 || got[0] != "node_name" || got[1] != "metrics.listen" {
		t.Errorf("got %v", got)
	}
	KeepRestartOnly(&old, &next)
	if len(RestartOnlyChanges(&old, &next)) != 0 || next.CheckIntervalSec != 5 {
		t.Errorf("KeepRestartOnly: %+v", next)
	}
	if len(RestartOnlyFields()) != len(restartOnly) {
		t.Error("RestartOnlyFields")
	}
}

func TestNamesAndListen(t *testing.T) {
	for _, tt := range []struct {
		s     string
		max   int
		first bool
		ok    bool
	}{
		{"node-1", 253, true, true}, {"a.b_c", 253, true, true}, {"-x", 253, true, false}, {"", 253, true, false},
		{"a/b", 253, true, false}, {"é", 253, true, false}, {strings.Repeat("a", 254), 253, true, false},
		{"-rack", 63, false, true}, {"rack 1", 63, false, false},
	} {
		if got := validName(tt.s, tt.max, tt.first); got != tt.ok {
			t.Errorf("validName(%q) = %v", tt.s, got)
		}
	}
	for _, tt := range []struct {
		s  string
		ok bool
	}{
		{"127.0.0.1:9090", true}, {":9090", true}, {"[::1]:9090", true}, {"localhost:1", true},
		{"nine", false}, {"::1:9090", false}, {"[::1:9090", false}, {"h:0", false}, {"h:70000", false}, {"h:x", false},
	} {
		if err := splitHostPort(tt.s); (err == nil) != tt.ok {
			t.Errorf("splitHostPort(%q) = %v", tt.s, err)
		}
	}
	for _, tt := range []struct {
		s, scheme string // scheme "" means refused
	}{
		{"https://etcd-1:2379", "https"}, {"http://127.0.0.1:2379/", "http"}, {"HTTPS://[::1]:2379", "https"},
		{"http://[fe80::1]:2379", "http"}, {"https://etcd.example.com:443", "https"},
		{"etcd-1:2379", ""}, {"unix://sock:1", ""}, {"https://etcd-1", ""}, {"https://:2379", ""},
		{"https://[::1]", ""}, {"https://[]:2379", ""}, {"https://u:p@etcd-1:2379", ""}, {"https://e:2379/v3", ""},
		{"https://e:2379?x=1", ""}, {"https://e:0", ""}, {"https://e:99999", ""}, {"https://e:port", ""},
		{"https://::1:2379", ""}, {"https://e 1:2379", ""}, {"", ""}, {"https://", ""},
	} {
		scheme, err := checkEndpoint(tt.s)
		if (err == nil) != (tt.scheme != "") || scheme != tt.scheme && err == nil {
			t.Errorf("checkEndpoint(%q) = %q, %v; want scheme %q", tt.s, scheme, err, tt.scheme)
		}
	}
}

func TestGroupLockKey(t *testing.T) {
	for _, tc := range []struct{ name, key, group, want string }{
		{"no group", "/cluster/clusterrebootd/lock", "", "/cluster/clusterrebootd/lock"},
		{"group", "/cluster/clusterrebootd/lock", "rack1", "/cluster/clusterrebootd/lock/rack1"},
		{"trailing slash", "/c/lock/", "a", "/c/lock/a"},
		{"trailing slash, no group", "/c/lock/", "", "/c/lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := GroupLockKey(tc.key, tc.group); got != tc.want {
				t.Errorf("GroupLockKey(%q, %q) = %q, want %q", tc.key, tc.group, got, tc.want)
			}
			c := Config{LockKey: tc.key, Group: tc.group}
			if got := c.LockKeyForGroup(); got != tc.want {
				t.Errorf("LockKeyForGroup() = %q, want %q", got, tc.want)
			}
		})
	}
}
