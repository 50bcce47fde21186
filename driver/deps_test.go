package driver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// The real dependencies answer through the same libraries as the tools.
func TestRealDeps(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc/sys/kernel/random"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/sys/kernel/random/boot_id"), []byte("b-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := Deps{}.Real(root)
	if id, err := d.BootID(); err != nil || id != "b-1" {
		t.Fatalf("boot id %q %v", id, err)
	}
	cfg := config.Default()
	cfg.NodeName = "node-a"
	cfg.Detectors = []detectspec.Detector{{Type: "file", Path: "/run/reboot-required"}}
	if rep := d.Detect.Detect(context.Background(), cfg); rep.Err != nil || rep.RebootRequired {
		t.Errorf("detect %+v", rep)
	}
	cfg.Detectors = nil
	if rep := d.Detect.Detect(context.Background(), cfg); exitcode.CodeOf(rep.Err) != exitcode.Config {
		t.Errorf("no detectors: %v", rep.Err)
	}
	cfg.Windows = config.Windows{Deny: []string{"* 00:00-24:00"}, Timezone: "UTC"}
	if dec, err := d.Windows.At(cfg, time.Now()); err != nil || dec.Open {
		t.Errorf("window %+v %v", dec, err)
	}
	cfg.Windows.Timezone = "Mars/Olympus"
	if _, err := d.Windows.At(cfg, time.Now()); err == nil {
		t.Error("bad zone accepted")
	}
	cfg.Windows = config.Windows{Deny: []string{"Fooday 1-2"}}
	if _, err := d.Windows.At(cfg, time.Now()); err == nil {
		t.Error("bad window accepted")
	}
	cfg.HealthScript = "/bin/true"
	r := d.Gate.Check(context.Background(), cfg, "pre-lock", policy.Summary{ReadAt: time.Now(), ClusterSize: 2})
	if !r.Healthy {
		t.Errorf("gate %+v", r)
	}
	// The built-in checks run in the daemon's gate too, under its root: no
	// /run/utmp there blocks (fail closed) before the script.
	cfg.Gate.NoLoginSessions = true
	r = d.Gate.Check(context.Background(), cfg, "pre-lock", policy.Summary{ReadAt: time.Now()})
	if r.Healthy || !strings.HasPrefix(r.Reason, "login sessions unknown, so not rebooting: cannot read "+filepath.Join(root, "run", "utmp")) {
		t.Errorf("gate with no_login_sessions and no utmp: %+v", r)
	}
	cfg.Gate.NoLoginSessions = false
	if err := d.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Error(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Sleep(ctx, time.Hour); err == nil {
		t.Error("sleep ignored its context")
	}
}

func TestRealHooks(t *testing.T) {
	h := RealHooks{Runner: proc.Exec{}}
	out := filepath.Join(t.TempDir(), "out")
	cfg := config.Default()
	cfg.NodeName, cfg.EtcdEndpoints = "node-a", []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"}
	hooks := []config.Hook{
		{Name: "first", Cmd: []string{"/bin/sh", "-c", "echo first >> " + out}},
		{Cmd: []string{"/bin/sh", "-c", "echo 'drain failed: 3 pods left' >&2; exit 2"}},
		{Name: "never", Cmd: []string{"/bin/sh", "-c", "echo never >> " + out}},
	}
	err := h.Run(context.Background(), cfg, hooks)
	if exitcode.CodeOf(err) != exitcode.RebootFailed || !strings.Contains(err.Error(), "hook #2") || !strings.Contains(err.Error(), "exited 2: drain failed: 3 pods left") {
		t.Fatalf("err %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "first\n" {
		t.Errorf("ran %q", b)
	}
	tests := []struct {
		hook config.Hook
		want string
	}{
		{config.Hook{Name: "t", Cmd: []string{"/bin/sleep", "5"}, TimeoutSec: 1}, "timed out"},
		{config.Hook{Name: "m", Cmd: []string{"/nonexistent"}}, "could not be started"},
		{config.Hook{Name: "k", Cmd: []string{"/bin/sh", "-c", "kill -9 $$"}}, "killed by signal"},
	}
	for _, tt := range tests {
		if err := h.Run(context.Background(), cfg, []config.Hook{tt.hook}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.hook.Name, err, tt.want)
		}
	}
	// The environment: what a pre-reboot hook gets, less the lock's.
	envOut := filepath.Join(t.TempDir(), "env")
	if err := h.Run(context.Background(), cfg, []config.Hook{{Name: "env", Cmd: []string{"/bin/sh", "-c", "env > " + envOut}}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(envOut)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(b)), "\n")
	for _, want := range []string{"NODE_NAME=node-a", "PHASE=post-reboot", "ETCD_ENDPOINTS=https://10.0.0.1:2379,https://10.0.0.2:2379", "LC_ALL=C", "PATH=" + reboot.Path} {
		if !slices.Contains(got, want) {
			t.Errorf("post-reboot hook environment lacks %s: %q", want, got)
		}
	}
}

func TestStatusString(t *testing.T) {
	if (Status{State: "blocked", Reason: "window", Detail: "closed"}).String() != "blocked (window): closed" {
		t.Error("status string")
	}
	if oneLine("a\nb", 200) != "a b" || oneLine("abcdef", 3) != "abc..." {
		t.Error("oneLine")
	}
}
