package protocol

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
	"gopkg.in/yaml.v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

func TestReasonTable(t *testing.T) {
	for _, r := range Reasons() {
		if ReasonCode(r) == exitcode.Internal && r != ReasonInternal {
			t.Errorf("reason %s has no exit code", r)
		}
	}
	if ReasonCode("bogus") != exitcode.Internal {
		t.Error("unknown reason")
	}
	for _, c := range exitcode.All() {
		if c == exitcode.OK || c == exitcode.Config {
			continue
		}
		if got := ReasonCode(CodeReason(c)); got != c && c != exitcode.RebootFailed {
			t.Errorf("code %v -> %s -> %v", c, CodeReason(c), got)
		}
	}
	seen := map[string]bool{}
	for _, st := range Steps() {
		if st == "" || seen[st] {
			t.Errorf("step %q empty or listed twice: %v", st, Steps())
		}
		seen[st] = true
	}
	if len(Steps()) != 14 {
		t.Error(Steps())
	}
}

var testNow = time.Date(2026, 11, 29, 2, 59, 0, 0, time.UTC)

// Each step's arguments reach the child as the daemon built them, and an
// argument the request leaves out keeps the default its flag has by hand.
func TestRequestArgsRoundTrip(t *testing.T) {
	cfg := config.Default()
	cfg.NodeName = "node-a"
	for _, tc := range []struct {
		step     string
		in       any
		register func(fs *flag.FlagSet) any
	}{
		{StepPublish, PublishArgs{State: "blocked", RebootRequired: true, LastCheck: testNow, Detail: "window: closed", ReadSummary: true,
			BlockedSince: testNow.Add(-time.Hour), BlockedReason: ReasonWindow, RequiredSince: testNow.Add(-2 * time.Hour)},
			func(fs *flag.FlagSet) any { a := &PublishArgs{}; a.Register(fs); return a }},
		{StepCycle, CycleArgs{Attempt: 3, NoWait: true}, func(fs *flag.FlagSet) any { a := &CycleArgs{}; a.Register(fs); return a }},
		{StepPause, PauseArgs{Reason: "freeze"}, func(fs *flag.FlagSet) any { a := &PauseArgs{}; a.Register(fs); return a }},
		{StepRequest, OverrideArgs{Node: "node-b", Reason: "CHG-1", Force: true, Now: true}, func(fs *flag.FlagSet) any { a := &OverrideArgs{}; a.Register(fs, true); return a }},
		{StepComplete, CompleteArgs{Keep: true}, func(fs *flag.FlagSet) any { a := &CompleteArgs{}; a.Register(fs); return a }},
		{StepFailure, FailureArgs{Kind: "reboot_loop", Detail: "still needed", Since: testNow}, func(fs *flag.FlagSet) any { a := &FailureArgs{}; a.Register(fs); return a }},
		{StepServeMetrics, ServeMetricsArgs{Listen: "127.0.0.1:9100", File: "/run/x.prom"}, func(fs *flag.FlagSet) any { a := &ServeMetricsArgs{}; a.Register(fs); return a }},
		{StepAlerts, AlertsArgs{Phase: "post-reboot"}, func(fs *flag.FlagSet) any { a := &AlertsArgs{}; a.Register(fs); return a }},
	} {
		req, err := NewRequest(tc.step, tc.in, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		data, err := req.Encode()
		if err != nil || !IsRequest(data) || bytes.Count(data, []byte("\n")) != 1 {
			t.Fatalf("%s: %v %q", tc.step, err, data)
		}
		var back Request
		if err := json.Unmarshal(data, &back); err != nil || back.Check(tc.step) != nil {
			t.Fatalf("%s: %v %v", tc.step, err, back.Check(tc.step))
		}
		out := tc.register(flag.NewFlagSet(tc.step, flag.ContinueOnError))
		if err := back.DecodeArgs(out); err != nil {
			t.Fatal(err)
		}
		if got := reflect.ValueOf(out).Elem().Interface(); !reflect.DeepEqual(got, tc.in) {
			t.Errorf("%s: %+v, want %+v", tc.step, got, tc.in)
		}
	}
	// Left out: the flag's default.
	req, _ := NewRequest(StepCycle, struct{}{}, &cfg)
	var c CycleArgs
	c.Register(flag.NewFlagSet("cycle", flag.ContinueOnError))
	if err := req.DecodeArgs(&c); err != nil || c.Attempt != 1 {
		t.Errorf("cycle without arguments: %+v %v", c, err)
	}
	// An argument the child does not know is a bug of the daemon's.
	req.Args = json.RawMessage(`{"attempts":2}`)
	if err := req.DecodeArgs(&c); exitcode.CodeOf(err) != exitcode.Internal {
		t.Errorf("unknown argument: %v", err)
	}
}

// The child refuses a request of another protocol version (a daemon not
// restarted after an upgrade) or of another step than its argument.
func TestRequestCheck(t *testing.T) {
	r := Request{Protocol: Version, Step: StepPublish}
	if err := r.Check(StepPublish); err != nil {
		t.Fatal(err)
	}
	r.Protocol = Version + 1
	if err := r.Check(StepPublish); exitcode.CodeOf(err) != exitcode.Internal || !strings.Contains(err.Error(), "restart clusterrebootd") {
		t.Errorf("version: %v", err)
	}
	r.Protocol = Version
	if err := r.Check(StepCycle); exitcode.CodeOf(err) != exitcode.Internal || !strings.Contains(err.Error(), `for step "publish"`) {
		t.Errorf("step: %v", err)
	}
	if IsRequest([]byte("node_name: a\n")) || !IsRequest([]byte(" \n{\"protocol\":1}")) {
		t.Error("IsRequest")
	}
}

// The configuration crosses as JSON and arrives as the daemon had it:
// every configuration in the test scripts and the packaged one, compared
// through YAML (every field, under its YAML name).
func TestRequestConfigRoundTrip(t *testing.T) {
	var docs [][]byte
	if b, err := os.ReadFile("../../packaging/config.yaml"); err == nil {
		docs = append(docs, b)
	} else {
		t.Fatal(err)
	}
	scripts, _ := filepath.Glob("../../testscripts/*.txtar")
	for _, p := range scripts {
		a, err := txtar.ParseFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range a.Files {
			if strings.HasSuffix(f.Name, ".yaml") {
				docs = append(docs, f.Data)
			}
		}
	}
	checked := 0
	for _, d := range docs {
		cfg, err := config.Parse("x.yaml", d)
		if err != nil || config.Validate(&cfg, "x.yaml", nil) != nil {
			continue // a script's broken configuration: the daemon never sends one
		}
		req, err := NewRequest(StepStatus, nil, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		data, err := req.Encode()
		if err != nil {
			t.Fatal(err)
		}
		var back Request
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		want, _ := yaml.Marshal(cfg)
		got, _ := yaml.Marshal(back.Config)
		if string(got) != string(want) {
			t.Errorf("the configuration changed on its way:\n%s\n---- arrived as ----\n%s", want, got)
		}
		checked++
	}
	if checked < 20 {
		t.Fatalf("only %d configurations checked", checked)
	}
}
