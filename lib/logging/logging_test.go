package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestJSONFields(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, "crd-lock", "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	l.Debug("hidden")
	l.Info("acquired", "node", "n1", "lock_wait_ms", 12)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("debug must be filtered at info: %q", buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"level": "info", "msg": "acquired", "component": "crd-lock", "node": "n1", "lock_wait_ms": 12.0} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	if ts, _ := m["ts"].(string); !strings.HasSuffix(ts, "Z") {
		t.Errorf("ts = %v, want UTC RFC3339", m["ts"])
	}
}

func TestBadInputs(t *testing.T) {
	for _, tt := range []struct{ level, format string }{{"loud", "json"}, {"info", "xml"}} {
		if _, err := New(&bytes.Buffer{}, "x", tt.level, tt.format); err == nil {
			t.Errorf("%s/%s: want error", tt.level, tt.format)
		}
	}
	for _, lvl := range []string{"debug", "warn", "error", ""} {
		if _, err := New(&bytes.Buffer{}, "", lvl, "text"); err != nil {
			t.Errorf("%q: %v", lvl, err)
		}
	}
	Discard().Info("nothing")
}
