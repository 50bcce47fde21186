package clusterrebootd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
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
