package clusterrebootd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// A history that cannot be read (a user without access to state_dir, here a
// directory in its place) is "unknown" with the reason, never "0 of max":
// 0 would say the node is far from max_reboots_per_day.
func TestStatusLocalHistory(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, stateDir string)
		want    string
		notWant string
	}{
		{"no history yet", func(*testing.T, string) {}, "0 of max 2", "unknown"},
		{"unreadable history", func(t *testing.T, stateDir string) {
			if err := os.Mkdir(driver.HistoryPath(stateDir), 0o700); err != nil {
				t.Fatal(err)
			}
		}, "unknown of max 2: driver: read reboot history", "0 of max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.StateDir, cfg.RunDir = t.TempDir(), t.TempDir()
			cfg.KillSwitchFile = filepath.Join(t.TempDir(), "disable")
			cfg.MaxRebootsPerDay = 2
			tt.setup(t, cfg.StateDir)
			l := readLocal(cfg, time.Now())
			var b bytes.Buffer
			if err := (statusResult{Local: l}).Text(&b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tt.want) || strings.Contains(b.String(), tt.notWant) {
				t.Errorf("status text:\n%s\nwant %q, not %q", b.String(), tt.want, tt.notWant)
			}
			if (l.RebootsLastDay == nil) != (l.HistoryError != "") || l.RebootLoop != nil {
				t.Errorf("local state %+v", l)
			}
		})
	}
}

// The rollout's progress and estimate in text: the table per wave and
// group, the estimate with its inputs, or "unknown" with why.
func TestStatusRolloutText(t *testing.T) {
	readAt := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := readAt.Add(80 * time.Minute)
	ro := &protocol.RolloutStatus{
		Progress: []slotinfo.GroupProgress{{Wave: 0, Nodes: 3, NeedReboot: 2, Waiting: 1, Done: 1}, {Wave: 1, Group: "db", Nodes: 2, Down: 1, Failed: 1}},
		ETA: protocol.RolloutETA{At: &at, Remaining: 3, Down: 1, Held: 1, MedianRebootMS: 600000, Samples: 3, MaxTotal: 2, WaveBakeSec: 1800, Ignores: protocol.ETAIgnores,
			Groups: []slotinfo.GroupPlan{{Group: "", Remaining: 2, MaxHolders: 1}, {Group: "db", Remaining: 1, MaxHolders: 2, MinIntervalSec: 900}}},
	}
	var b bytes.Buffer
	rolloutText(&b, ro, &policy.View{ReadAt: readAt})
	for _, want := range []string{
		"WAVE  GROUP", "(ungrouped)", "db",
		"estimated end:   about 2026-12-01T13:20:00Z (in 1h20m0s); 3 reboot(s) left, 1 of them down now; 1 held node(s) left out until released",
		"median reboot 10m0s of 3 completed within the failure window; (ungrouped): 2 left, max_holders 1; db: 1 left, max_holders 2, min_interval_sec 900; max_holders_total 2, max_starts_per_hour none, wave_bake_sec 1800",
		"  ignores:       maintenance windows",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	ro.ETA = protocol.RolloutETA{Unknown: "the rollout halted itself after failures", Remaining: 2, Ignores: protocol.ETAIgnores}
	b.Reset()
	rolloutText(&b, ro, nil)
	if !strings.Contains(b.String(), "estimated end:   unknown: the rollout halted itself after failures; 2 reboot(s) left") || !strings.Contains(b.String(), "no reboot measured yet") {
		t.Errorf("unknown estimate:\n%s", b.String())
	}
}
