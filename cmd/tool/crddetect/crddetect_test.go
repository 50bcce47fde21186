package crddetect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/detect"
	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestParseDetector(t *testing.T) {
	tests := []struct {
		spec    string
		want    detectspec.Detector
		wantErr string
	}{
		{"auto", detectspec.Detector{Type: "auto"}, ""},
		{"kernel", detectspec.Detector{Type: "kernel"}, ""},
		{"file:/run/x", detectspec.Detector{Type: "file", Path: "/run/x"}, ""},
		{"command:needs-restarting  -r", detectspec.Detector{Type: "command", Cmd: []string{"needs-restarting", "-r"}}, ""},
		{"command:a:b", detectspec.Detector{Type: "command", Cmd: []string{"a:b"}}, ""},
		{"kernel:6.1", detectspec.Detector{}, "takes no argument"},
		{"file:", detectspec.Detector{}, "absolute path"},
		{"file:run/x", detectspec.Detector{}, "absolute path"},
		{"command: ", detectspec.Detector{}, "needs a command"},
		{"", detectspec.Detector{}, "unknown detector"},
		{"magic:x", detectspec.Detector{}, `unknown detector "magic:x"`},
		{"max_uptime:30", detectspec.Detector{Type: "max_uptime", Days: 30}, ""},
		{"max_uptime", detectspec.Detector{}, "needs a number of days"},
		{"max_uptime:0", detectspec.Detector{}, "needs a number of days"},
		{"max_uptime:30d", detectspec.Detector{}, "needs a number of days"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := parseDetector(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Type != tt.want.Type || got.Path != tt.want.Path || got.Days != tt.want.Days || strings.Join(got.Cmd, "|") != strings.Join(tt.want.Cmd, "|") {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestFlagsKeepOrderAndApply(t *testing.T) {
	var o options
	for _, f := range []detectorFlag{{&o.detectors, "command"}, {&o.detectors, ""}, {&o.detectors, "file"}} {
		arg := map[string]string{"command": "a b", "": "kernel", "file": "/x"}[f.kind]
		if err := f.Set(arg); err != nil {
			t.Fatal(err)
		}
	}
	o.timeoutSec = 5
	cfg := config.Default()
	o.apply(&cfg)
	var types []string
	for _, d := range cfg.Detectors {
		types = append(types, d.Type)
		if d.TimeoutSec != 5 {
			t.Errorf("%s: timeout %d, want 5", d.Type, d.TimeoutSec)
		}
	}
	if strings.Join(types, ",") != "command,kernel,file" {
		t.Errorf("types %v", types)
	}
	if (detectorFlag{}).String() != "" {
		t.Error("String() not empty")
	}
}

func TestNagiosStatus(t *testing.T) {
	pkgs := []string{"a", "b", "c", "d", "e", "f", "g"}
	tests := []struct {
		name     string
		res      Result
		wantLine string
		wantCode exitcode.Code
	}{
		{
			"warning lists at most five packages",
			Result{Detectors: []detect.Result{{Name: "f", Type: "file", Required: true, Packages: pkgs, Detail: "x"}}},
			"REBOOT WARNING - reboot required by f (packages: a, b, c, d, e, 2 more) | detectors=1;;;0 required=1;;;0 errors=0;;;0 duration=0ms;;;0",
			1,
		},
		{
			"ok",
			Result{Detectors: []detect.Result{{Name: "f", Type: "file", Detail: "absent"}}},
			"REBOOT OK - no reboot required | detectors=1;;;0 required=0;;;0 errors=0;;;0 duration=0ms;;;0",
			0,
		},
		{
			"unknown keeps the message on one line",
			Result{Detectors: []detect.Result{{Name: "c", Type: "command", Err: "x|y\nz"}}},
			"REBOOT UNKNOWN - detect: c | detectors=1;;;0 required=0;;;0 errors=1;;;0 duration=0ms;;;0",
			3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			switch tt.wantCode {
			case 0:
				err = exitcode.Errorf(exitcode.No, "no")
			case 3:
				err = exitcode.Errorf(exitcode.DetectorError, "detect: c")
			}
			tt.res.Settle(err)
			var b bytes.Buffer
			if werr := writeNagios(&b, &tt.res); werr != nil {
				t.Fatal(werr)
			}
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if lines[0] != tt.wantLine {
				t.Errorf("status line\n got %q\nwant %q", lines[0], tt.wantLine)
			}
			if len(lines) != 1+len(tt.res.Detectors) || strings.Contains(lines[1], "|") || strings.Contains(lines[1], "\n") {
				t.Errorf("detector lines %q", lines[1:])
			}
			if got := exitcode.CodeOf(nagiosError(err)); got != tt.wantCode {
				t.Errorf("exit %d, want %d", got, tt.wantCode)
			}
		})
	}
}

func TestWriteProm(t *testing.T) {
	tests := []struct {
		name string
		res  Result
		want map[string]string // series (name and labels as expfmt reads them) => value
		none []string          // families that must be absent
	}{
		{
			name: "one detector fires",
			res:  Result{Detectors: []detect.Result{{Name: `a"b\c` + "\n", Required: true, DurationMS: 1500}}, RebootRequired: true},
			want: map[string]string{
				"clusterrebootd_detect_reboot_required":                          "1",
				"clusterrebootd_detect_error":                                    "0",
				`clusterrebootd_detector_reboot_required{detector="a\"b\\c\n"}`:  "1",
				`clusterrebootd_detector_error{detector="a\"b\\c\n"}`:            "0",
				`clusterrebootd_detector_duration_seconds{detector="a\"b\\c\n"}`: "1.5",
				"clusterrebootd_detect_exit_code":                                "0",
				"clusterrebootd_detect_timestamp_seconds":                        "1.70000000025e+09",
			},
		},
		{
			name: "configuration error: no per-detector families",
			res:  Result{Header: report.Header{ExitCode: int(exitcode.Config)}},
			want: map[string]string{
				"clusterrebootd_detect_reboot_required": "0",
				"clusterrebootd_detect_error":           "1",
				"clusterrebootd_detect_exit_code":       "2",
			},
			none: []string{"clusterrebootd_detector_reboot_required", "clusterrebootd_detector_error", "clusterrebootd_detector_duration_seconds"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeProm(&b, &tt.res, time.Unix(1700000000, 250e6)); err != nil {
				t.Fatal(err)
			}
			p := expfmt.NewTextParser(model.LegacyValidation)
			families, err := p.TextToMetricFamilies(bytes.NewReader(b.Bytes()))
			if err != nil {
				t.Fatalf("the Prometheus parser rejects the output: %v\n%s", err, b.String())
			}
			got := map[string]string{}
			for name, f := range families {
				if f.GetType() != dto.MetricType_GAUGE || f.GetHelp() == "" {
					t.Errorf("%s: type %v help %q, want a gauge with help", name, f.GetType(), f.GetHelp())
				}
				for _, m := range f.GetMetric() {
					series := name
					if len(m.GetLabel()) > 0 {
						var ls []string
						for _, l := range m.GetLabel() {
							ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
						}
						series += "{" + strings.Join(ls, ",") + "}"
					}
					got[series] = strconv.FormatFloat(m.GetGauge().GetValue(), 'g', -1, 64)
				}
			}
			for series, v := range tt.want {
				if got[series] != v {
					t.Errorf("%s = %q, want %q; all: %v", series, got[series], v, got)
				}
			}
			for _, name := range tt.none {
				if _, ok := families[name]; ok {
					t.Errorf("family %s present", name)
				}
			}
			// The overall answer is not a series of the per-detector family:
			// sum() over that family counts each detector once.
			for _, m := range families["clusterrebootd_detector_reboot_required"].GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetValue() == detectspec.AnyName {
						t.Errorf("per-detector family has detector=%q", detectspec.AnyName)
					}
				}
			}
		})
	}
}

func TestRun(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "run/reboot-required"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		wantCode exitcode.Code
		wantOut  string
	}{
		{"required", []string{"--detector-file", "/run/reboot-required"}, exitcode.OK, `"reboot_required":true`},
		{"not required", []string{"--detector-file", "/run/nothing"}, exitcode.No, `"reboot_required":false`},
		{"detector error", []string{"--detector", "kernel", "--running-kernel", "6.1.0-1-amd64"}, exitcode.DetectorError, `"exit_name":"detector_error"`},
		{"bad log level", []string{"--log-level", "loud", "--detector", "auto"}, exitcode.Config, `--log-level \"loud\"`},
		{"bad flag in text", []string{"--format", "text", "--nope"}, exitcode.Config, "error:"},
		{"bad flag in prom", []string{"--format", "prom", "--nope"}, exitcode.Config, "clusterrebootd_detect_exit_code 2"},
		{"nagios required", []string{"--format", "nagios", "--detector-file", "/run/reboot-required"}, 1, "REBOOT WARNING"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"--config", cfgFile, "--root", root, "--node", "n1"}, tt.args...)
			err := Run(context.Background(), args, nil, &out, &errb)
			if got := exitcode.CodeOf(err); got != tt.wantCode {
				t.Fatalf("code %v (%v), want %v; stdout %s", got, err, tt.wantCode, out.String())
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("stdout %q, want %q", out.String(), tt.wantOut)
			}
			if strings.HasPrefix(out.String(), "{") {
				var v map[string]any
				if err := json.Unmarshal(out.Bytes(), &v); err != nil {
					t.Errorf("stdout is not one JSON object: %v", err)
				}
			}
		})
	}
}
