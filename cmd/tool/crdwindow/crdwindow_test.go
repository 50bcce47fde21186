package crdwindow

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests must not depend on the host's zoneinfo

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// fixedClock is "now" for every test: Tuesday 2026-12-01 22:30 in Berlin.
func fixedClock() time.Time { return time.Date(2026, 12, 1, 21, 30, 0, 0, time.UTC) }

func emptyConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runTool(t *testing.T, args ...string) (Result, string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	// Never read the host's configuration: an empty file means defaults.
	args = append([]string{"--config", emptyConfig(t), "--node", "n1"}, args...)
	err := run(args, &stdout, &stderr, fixedClock)
	var res Result
	if strings.HasPrefix(stdout.String(), "{") {
		if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s", jerr, stdout.String())
		}
	}
	return res, stdout.String(), stderr.String(), err
}

func TestRun(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("node_name: node-a\nwindows:\n  allow: [\"Tue 22:00-23:00\"]\n  deny: [\"* 23:00-06:00\"]\n  timezone: Europe/Berlin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   exitcode.Code
		open   bool
		at     string
		reason string
	}{
		{"now from the clock, no windows", []string{"--timezone", "UTC"}, exitcode.OK, true, "2026-12-01T21:30:00Z", "no windows configured"},
		{"now from the clock, inside the allow window", []string{"--timezone", "Europe/Berlin", "--allow", "Tue 22:00-23:00"},
			exitcode.OK, true, "2026-12-01T22:30:00+01:00", `inside allow window "Tue 22:00-23:00"`},
		{"--at overrides the clock", []string{"--timezone", "Europe/Berlin", "--allow", "Tue 22:00-23:00", "--at", "2026-12-01T23:30:00+01:00"},
			exitcode.WindowClosed, false, "2026-12-01T23:30:00+01:00", "outside every allow window"},
		{"configuration file", []string{"--config", cfg, "--at", "2026-12-01T23:30:00+01:00"},
			exitcode.WindowClosed, false, "2026-12-01T23:30:00+01:00", `inside deny window "* 23:00-06:00"`},
		{"bad --at", []string{"--at", "2026-12-01 22:30"}, exitcode.Config, false, "", ""},
		{"bad --allow", []string{"--allow", "Tue"}, exitcode.Config, false, "", ""},
		{"bad --timezone", []string{"--timezone", "Europe/Nowhere"}, exitcode.Config, false, "", ""},
		{"bad --log-format", []string{"--log-format", "xml"}, exitcode.Config, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, stdout, _, err := runTool(t, tt.args...)
			if got := exitcode.CodeOf(err); got != tt.code {
				t.Fatalf("exit %v (%v), want %v", got, err, tt.code)
			}
			if res.ExitCode != int(tt.code) || res.Tool != "crd-window" || res.Open != tt.open || res.At != tt.at || res.Reason != tt.reason {
				t.Errorf("result %s, want code %d open %v at %q reason %q", stdout, tt.code, tt.open, tt.at, tt.reason)
			}
			if (err == nil) != (res.Error == "") {
				t.Errorf("error field %q does not match the returned error %v", res.Error, err)
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	_, stdout, stderr, err := runTool(t, "--help")
	if exitcode.CodeOf(err) != exitcode.OK || stderr != "" || !strings.Contains(stdout, "\n  --timezone ZONE\n") {
		t.Fatalf("--help: err %v, stdout %q, stderr %q", err, stdout, stderr)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRunWriteFailure(t *testing.T) {
	err := run([]string{"--config", emptyConfig(t), "--node", "n1", "--timezone", "UTC"},
		failingWriter{}, &bytes.Buffer{}, fixedClock)
	if exitcode.CodeOf(err) != exitcode.Internal || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err = %v, want an internal error naming the write failure", err)
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"open until", []string{"--timezone", "UTC", "--allow", "Tue 21:00-22:00"},
			"open until 2026-12-01T22:00:00Z (inside allow window \"Tue 21:00-22:00\")\nevaluated at 2026-12-01T21:30:00Z in UTC\n"},
		{"closed for good", []string{"--timezone", "UTC", "--deny", "* 00:00-24:00"},
			"closed, with no opening in the next 15 days (inside deny window \"* 00:00-24:00\")\nevaluated at 2026-12-01T21:30:00Z in UTC\n"},
		{"error", []string{"--timezone", "Nowhere"},
			"error: --timezone: unknown time zone \"Nowhere\": use an IANA name such as \"Europe/Berlin\" or \"UTC\", or \"Local\" for the host's zone (is the tzdata package installed?)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stdout, _, _ := runTool(t, append([]string{"--format", "text"}, tt.args...)...)
			if stdout != tt.want {
				t.Errorf("text output\n%s\nwant\n%s", stdout, tt.want)
			}
		})
	}
}

func TestSpecList(t *testing.T) {
	var l specList
	for _, v := range []string{"Tue 22:00-23:00", "none", "  ", "", "* 23:00-06:00"} {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.String(); got != "Tue 22:00-23:00, * 23:00-06:00" {
		t.Errorf("String() = %q", got)
	}
}
