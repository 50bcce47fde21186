package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Under journald every line starts with its sd-daemon priority and the rest
// is the usual record; elsewhere no prefix.
func TestJournalPriorities(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			l, err := New(Journal{W: &b}, "crd", "debug", format)
			if err != nil {
				t.Fatal(err)
			}
			l = l.With("node", "n1")
			l.Debug("d")
			l.Info("i", "event", "cycle")
			l.Warn("w", "detail", "two\nlines")
			l.Error("e")
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			want := []string{"<7>", "<6>", "<4>", "<3>"}
			if len(lines) != len(want) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b.String())
			}
			for i, line := range lines {
				rest, ok := strings.CutPrefix(line, want[i])
				if !ok {
					t.Errorf("line %d %q: want prefix %s", i, line, want[i])
					continue
				}
				if format == "json" {
					var rec map[string]any
					if err := json.Unmarshal([]byte(rest), &rec); err != nil || rec["node"] != "n1" {
						t.Errorf("line %d %q is not the JSON record: %v", i, rest, err)
					}
				}
			}
		})
	}
	var b bytes.Buffer
	l, _ := New(&b, "crd", "info", "json")
	l.Warn("w")
	if !strings.HasPrefix(b.String(), "{") {
		t.Errorf("not the journal, yet %q", b.String())
	}
}

func TestIsJournalStream(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stream"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	other, err := os.Create(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tests := []struct {
		name, env string
		f         *os.File
		want      bool
	}{
		{"the stream", fmt.Sprintf("%d:%d", st.Dev, st.Ino), f, true},
		{"another file", fmt.Sprintf("%d:%d", st.Dev, st.Ino), other, false},
		{"unset", "", f, false},
		{"garbage", "x:y", f, false},
		{"nil file", "1:2", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsJournalStream(tt.env, tt.f); got != tt.want {
				t.Errorf("IsJournalStream(%q) = %v, want %v", tt.env, got, tt.want)
			}
		})
	}
	if Unwrap(Journal{W: f}) != f || Unwrap(f) != f {
		t.Error("Unwrap does not return the stream")
	}
}
