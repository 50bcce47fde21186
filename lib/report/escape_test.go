package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

type spoof struct{ reason string }

func (s spoof) Text(w io.Writer) error {
	Line(w, "paused", s.reason)
	fmt.Fprintf(w, "reason: %s\n", s.reason)
	fmt.Fprintf(w, "field: %s\n", Field(s.reason))
	return nil
}

// Issue 17: nothing another node wrote can forge or repaint a line of text
// output.
func TestTextOutputIsEscaped(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // lines of output, in order
	}{
		{"plain", "change freeze", []string{"paused:          change freeze", "reason: change freeze", "field: change freeze"}},
		{"newline forges a line", "x\nlock is FREE", []string{`paused:          x\nlock is FREE`, "reason: x", "lock is FREE", `field: x\nlock is FREE`}},
		{"escape sequence", "x\x1b[2K\rlock is FREE", []string{`paused:          x\x1b[2K\rlock is FREE`, `reason: x\x1b[2K\rlock is FREE`, `field: x\x1b[2K\rlock is FREE`}},
		{"C1 control and invalid UTF-8", "a\u009bb\xffc", []string{`paused:          a\u009bb\xffc`, `reason: a\u009bb\xffc`, `field: a\u009bb\xffc`}},
		{"tab", "a\tb", []string{`paused:          a\tb`, "reason: a\tb", `field: a\tb`}},
		{"unicode stays", "Wartung für Kühlung", []string{"paused:          Wartung für Kühlung", "reason: Wartung für Kühlung", "field: Wartung für Kühlung"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Write(&b, Text, spoof{tt.in}); err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestFieldIsBounded(t *testing.T) {
	got := Field(strings.Repeat("é", 200))
	if len(got) > MaxField+3 || !strings.HasSuffix(got, "...") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("Field of 400 bytes = %d bytes %q", len(got), got)
	}
}

func TestCheckField(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "kernel update CHG-1", ""},
		{"at the bound", strings.Repeat("a", MaxField), ""},
		{"too long", strings.Repeat("a", MaxField+1), "--purpose is 257 bytes long; keep it to 256"},
		{"newline", "a\nlock is FREE", "--purpose contains a control character"},
		{"escape", "a\x1b[31m", "--purpose contains a control character"},
		{"invalid UTF-8", "a\xff", "invalid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckField("--purpose", tt.in)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || exitcode.From(err) != 2 {
				t.Errorf("got %v, want exit 2 with %q", err, tt.want)
			}
		})
	}
}
