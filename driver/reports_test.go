package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
)

// The daemon stops a child that holds the lock (here: the window closes);
// its line says what the child was running then, as the child reported it.
func TestStoppedUnderTheLockSaysWhatRan(t *testing.T) {
	const held = `{"tool":"crd-lock","exit_code":130,"exit_name":"interrupted","outcome":"blocked","reason":"interrupted","lease_id":"694d9a","fencing_token":42`
	for _, tt := range []struct {
		name, stopped, detail string
	}{
		{"waiting for a slot, no hooks", `{"running":"slot_wait","hooks_done":0}`,
			"stopped under the lock while waiting for a reboot slot (nothing was running): the window closed: "},
		{"between the checks", `{"running":"nothing","hooks_done":0}`,
			"stopped under the lock with nothing running, before the reboot command: the window closed: "},
		{"the detectors", `{"running":"detectors","hooks_done":0}`,
			"stopped under the lock while the detectors ran again (they got SIGTERM): the window closed: "},
		{"the health script", `{"running":"health_script","hooks_done":0}`,
			"stopped under the lock while the under-lock health script ran (it got SIGTERM): the window closed: "},
		{"hook 2", `{"running":"hook","hook":"drain","hook_index":2,"hooks_done":1}`,
			"stopped under the lock while pre-reboot hook 2 (drain) ran (it got SIGTERM; only abort_hooks undo what it did); 1 pre-reboot hook(s) had completed before (only abort_hooks undo them): the window closed: "},
		{"after the hooks", `{"running":"nothing","hooks_done":2}`,
			"stopped under the lock with nothing running, before the reboot command; 2 pre-reboot hook(s) had completed before (only abort_hooks undo them): the window closed: "},
		{"the reboot command", `{"running":"reboot_command","hooks_done":1}`,
			"stopped under the lock while the reboot command ran (a started reboot command is not stopped; it failed, and the reboot slot is kept: the shutdown it asked for may still come): the window closed: "},
		{"a child that does not say", ``,
			"stopped under the lock, before the reboot command (a pre-reboot hook then running got SIGTERM; only abort_hooks undo it): the window closed: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			reply := held + "}"
			if tt.stopped != "" {
				reply = held + `,"stopped":` + tt.stopped + "}"
			}
			w.child.answers[protocol.StepCycle] = answer{block: true, blockJSON: reply}
			w.child.started = make(chan struct{})
			d := newDriver(t, w, testConfig(w), nil)
			d.WatchEvery = time.Millisecond
			go func() { <-w.child.started; w.windows.setOpen(false) }()
			out := d.RunOnce(context.Background(), Mode{})
			if out.Reason != protocol.ReasonWindow || out.Detail != tt.detail+`inside deny window "* 00:00-24:00"` {
				t.Errorf("got %s:\n%s\nwant\n%s", out.Reason, out.Detail, tt.detail+`inside deny window "* 00:00-24:00"`)
			}
		})
	}
}

// reboot_completed's duration_ms is exact: the marker's requested_at keeps
// its fractions of a second (lib/reboot), and the daemon subtracts it from
// its clock as it is.
func TestRebootCompletedDurationIsExact(t *testing.T) {
	w := newWorld(t)
	cfg := testConfig(w)
	requested := testNow.Add(-2140*time.Millisecond - 400*time.Microsecond) // 02:58:57.8596
	w.now = testNow
	writeMarker(t, w, "boot-1", requested)
	w.detect.required = false
	w.child.answers[protocol.StepComplete] = answer{json: `{"exit_code":0,"freed":true}`}
	var logs bytes.Buffer
	d := newDriver(t, w, cfg, &logs)
	d.RunOnce(context.Background(), Mode{})
	var got *float64
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["event"] == "reboot_completed" {
			ms, _ := rec["duration_ms"].(float64)
			got = &ms
		}
	}
	if got == nil {
		t.Fatalf("no reboot_completed line:\n%s", logs.String())
	}
	if *got != 2140 {
		t.Fatalf("reboot_completed duration_ms = %v, want 2140 (requested at %s, completed at %s)\n%s",
			*got, requested.Format(time.RFC3339Nano), testNow.Format(time.RFC3339Nano), logs.String())
	}
}
