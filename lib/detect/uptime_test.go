package detect

import (
	"context"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

func TestMaxUptimeDetector(t *testing.T) {
	tests := []struct {
		name         string
		files        map[string]string
		days         int
		wantRequired bool
		wantDetail   string
		wantErr      string
	}{
		{"up longer than the limit", map[string]string{"proc/uptime": "3553200.25 7000000.10\n"}, 30, true, "up 41 days 3 h, more than the limit of 30 days", ""},
		{"up less than the limit", map[string]string{"proc/uptime": "90000.00 100.00\n"}, 30, false, "up 1 days 1 h, within the limit of 30 days", ""},
		{"exactly the limit is not more", map[string]string{"proc/uptime": "2592000.00 1.00\n"}, 30, false, "within the limit", ""},
		{"a second more than the limit", map[string]string{"proc/uptime": "2592001.00 1.00\n"}, 30, true, "more than the limit", ""},
		{"one day", map[string]string{"proc/uptime": "86400.5 0\n"}, 1, true, "up 1 days 0 h", ""},
		{"missing /proc/uptime", map[string]string{"proc/": ""}, 30, false, "", "cannot read the uptime"},
		{"empty", map[string]string{"proc/uptime": ""}, 30, false, "", "/proc/uptime under root"},
		{"garbage", map[string]string{"proc/uptime": "soon 1.0\n"}, 30, false, "", `"soon" is not an uptime in seconds`},
		{"negative", map[string]string{"proc/uptime": "-5 1.0\n"}, 30, false, "", "is not an uptime in seconds"},
		{"NaN", map[string]string{"proc/uptime": "NaN 1.0\n"}, 30, false, "", "is not an uptime in seconds"},
		{"a directory", map[string]string{"proc/uptime/": ""}, 30, false, "", "cannot read the uptime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := testsupport.Tree(t, tt.files)
			ds, err := New([]detectspec.Detector{{Type: detectspec.TypeMaxUptime, Days: tt.days}}, Env{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			r := ds[0].Detect(context.Background())
			if r.Name != "max_uptime" || r.Type != detectspec.TypeMaxUptime {
				t.Errorf("name %q type %q", r.Name, r.Type)
			}
			if tt.wantErr != "" {
				if !strings.Contains(r.Err, tt.wantErr) || r.Required {
					t.Fatalf("result %+v, want error containing %q", r, tt.wantErr)
				}
				return
			}
			if r.Err != "" || r.Required != tt.wantRequired || !strings.Contains(r.Detail, tt.wantDetail) {
				t.Fatalf("result %+v, want required %v and detail containing %q", r, tt.wantRequired, tt.wantDetail)
			}
		})
	}
}

func TestMaxUptimeConfig(t *testing.T) {
	tests := []struct {
		name string
		spec detectspec.Detector
		want string
	}{
		{"days missing", detectspec.Detector{Type: detectspec.TypeMaxUptime}, "reboot_required_detectors[0].days: 0 must be from 1 to 3650"},
		{"days negative", detectspec.Detector{Type: detectspec.TypeMaxUptime, Days: -1}, "days: -1 must be from 1 to 3650"},
		{"days too many", detectspec.Detector{Type: detectspec.TypeMaxUptime, Days: 3651}, "days: 3651 must be from 1 to 3650"},
		{"with a path", detectspec.Detector{Type: detectspec.TypeMaxUptime, Days: 30, Path: "/proc/uptime"}, "takes days only"},
		{"with a timeout", detectspec.Detector{Type: detectspec.TypeMaxUptime, Days: 30, TimeoutSec: 5}, "takes days only"},
		{"days on another type", detectspec.Detector{Type: detectspec.TypeKernel, Days: 30}, "reboot_required_detectors[0].days: applies to type max_uptime only"},
		{"unknown type lists it", detectspec.Detector{Type: "uptime"}, "use file, command, auto, kernel or max_uptime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New([]detectspec.Detector{tt.spec}, Env{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || exitcode.CodeOf(err) != exitcode.Config {
				t.Fatalf("New = %v, want a config error containing %q", err, tt.want)
			}
		})
	}
}
