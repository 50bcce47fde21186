package clusterrebootd

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// unitService returns the [Service] settings of the shipped unit, each key's
// values in file order.
func unitService(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("../../../packaging/clusterrebootd.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	settings := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			settings[k] = append(settings[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return settings
}

// `systemctl reload` runs validate-config on the file ExecStart reads and
// signals the daemon only when it passes: systemd runs ExecReload= lines in
// order and stops at the first that fails, so a broken file fails the reload
// and the running configuration stays.
func TestUnitReloadValidatesFirst(t *testing.T) {
	s := unitService(t)
	start := strings.Fields(s["ExecStart"][0])
	i := strings.Index(s["ExecStart"][0], "--config ")
	if len(start) < 2 || i < 0 {
		t.Fatalf("ExecStart %q names no --config", s["ExecStart"][0])
	}
	configPath := strings.Fields(s["ExecStart"][0][i:])[1]
	reload := s["ExecReload"]
	if len(reload) != 2 {
		t.Fatalf("ExecReload %q: want validate-config, then the signal", reload)
	}
	validate := strings.Fields(reload[0])
	if len(validate) < 4 || validate[0] != start[0] || validate[1] != "validate-config" || !strings.Contains(reload[0], " --config "+configPath) {
		t.Errorf("first ExecReload %q: want %s validate-config --config %s", reload[0], start[0], configPath)
	}
	if !strings.Contains(reload[1], `kill -HUP "$MAINPID"`) {
		t.Errorf("second ExecReload %q does not send SIGHUP to the main process", reload[1])
	}

	// The first line, run as written against a scratch file in place of
	// the real one, fails on a broken configuration and passes a good one.
	dir := t.TempDir()
	tests := []struct {
		name, content string
		want          exitcode.Code
	}{
		{"valid", "check_interval_sec: 30\nreboot_required_detectors: [{type: file, path: /run/reboot-required}]\n", exitcode.OK},
		{"unknown key", "check_interval: 30\n", exitcode.Config},
		{"bad value", "check_interval_sec: -1\n", exitcode.Config},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, tt.name+".yaml")
			if err := os.WriteFile(file, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			args := strings.Fields(strings.Replace(reload[0], configPath, file, 1))[1:]
			var out bytes.Buffer
			err := Run(context.Background(), args, strings.NewReader(""), &out, io.Discard)
			if got := exitcode.CodeOf(err); got != tt.want {
				t.Errorf("%v: exit %d (%v), want %d\n%s", args, got, err, tt.want, out.String())
			}
		})
	}
}

// The writable paths validate-config checks against are the shipped unit's:
// StateDirectory= and RuntimeDirectory= (below /var/lib and /run) and every
// ReadWritePaths= entry, without its "-" (skip if missing) prefix.
func TestUnitWritablePaths(t *testing.T) {
	s := unitService(t)
	var fromUnit []string
	for _, v := range s["StateDirectory"] {
		fromUnit = append(fromUnit, "/var/lib/"+v)
	}
	for _, v := range s["RuntimeDirectory"] {
		fromUnit = append(fromUnit, "/run/"+v)
	}
	for _, v := range s["ReadWritePaths"] {
		for _, p := range strings.Fields(v) {
			fromUnit = append(fromUnit, strings.TrimLeft(p, "-+"))
		}
	}
	got := append([]string(nil), unitWritablePaths()...)
	sort.Strings(fromUnit)
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(fromUnit, " ") {
		t.Errorf("unitWritablePaths() = %q, the unit's writable paths are %q", got, fromUnit)
	}
	if s["ProtectSystem"][0] != "strict" {
		t.Errorf("ProtectSystem=%s: the list assumes strict", s["ProtectSystem"][0])
	}
}

// The unit's resource settings are there, with the values docs/decisions.md
// justifies; MemoryMax= is not (a hard limit would kill the daemon or a hook
// under the lock).
func TestUnitResources(t *testing.T) {
	s := unitService(t)
	for k, want := range map[string]string{"MemoryHigh": "256M", "CPUWeight": "20"} {
		if got := s[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s=%q, want %s", k, got, want)
		}
	}
	if v, ok := s["MemoryMax"]; ok {
		t.Errorf("MemoryMax=%q: the unit sets no hard memory limit", v)
	}
}

func TestSandboxWarnings(t *testing.T) {
	root := t.TempDir()
	dropIn := filepath.Join(root, "etc/systemd/system/clusterrebootd.service.d")
	if err := os.MkdirAll(dropIn, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dropIn, "10-textfile.conf"), []byte("[Service]\nReadWritePaths=-/srv/prom /srv/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                       string
		stateDir, runDir, textfile string
		root                       string
		want                       []string // fields warned about
	}{
		{"defaults", "/var/lib/clusterrebootd", "/run/clusterrebootd", "", root, nil},
		{"debian textfile directory", "/var/lib/clusterrebootd", "/run/clusterrebootd", "/var/lib/prometheus/node-exporter/clusterrebootd.prom", root, nil},
		{"below the state directory", "/var/lib/clusterrebootd/sub", "/run/clusterrebootd", "/var/lib/clusterrebootd/m.prom", root, nil},
		{"a prefix is not a parent", "/var/lib/clusterrebootd2", "/run/clusterrebootd", "", root, []string{"state_dir"}},
		{"read-only textfile directory", "/var/lib/clusterrebootd", "/run/clusterrebootd", "/srv/node/clusterrebootd.prom", root, []string{"metrics.textfile"}},
		{"a drop-in makes it writable", "/var/lib/clusterrebootd", "/run/clusterrebootd", "/srv/prom/clusterrebootd.prom", root, nil},
		{"without the drop-in", "/var/lib/clusterrebootd", "/run/clusterrebootd", "/srv/prom/clusterrebootd.prom", t.TempDir(), []string{"metrics.textfile"}},
		{"every path elsewhere", "/opt/crd/state", "/opt/crd/run", "/opt/crd/m.prom", root, []string{"state_dir", "run_dir", "metrics.textfile"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg config.Config
			cfg.StateDir, cfg.RunDir, cfg.Metrics.Textfile = tt.stateDir, tt.runDir, tt.textfile
			var got []string
			for _, w := range sandboxWarnings(&cfg, tt.root) {
				got = append(got, w.Field)
				if !strings.Contains(w.Message, "ReadWritePaths=") || !strings.Contains(w.Message, "read-only") {
					t.Errorf("warning %q does not say what to do", w.Message)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("warnings for %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDropInResetsReadWritePaths(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc/systemd/system/clusterrebootd.service.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "10-a.conf"), []byte("[Service]\nReadWritePaths=/a\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "20-b.conf"), []byte("[Unit]\nReadWritePaths=/not-service\n[Service]\nReadWritePaths=\nReadWritePaths=+/b\n"), 0o644)
	if got := dropInWritablePaths(root); strings.Join(got, " ") != "/b" {
		t.Errorf("dropInWritablePaths = %q, want [/b]", got)
	}
}
