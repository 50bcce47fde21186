package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

type sample struct {
	Header
	Open bool `json:"open"`
}

func (s sample) Text(w io.Writer) error { _, err := fmt.Fprintf(w, "open=%v\n", s.Open); return err }

func TestWriteJSONIsOneLine(t *testing.T) {
	s := sample{Header: Header{Tool: "crd-window", Node: "n1"}, Open: true}
	s.Settle(exitcode.Errorf(exitcode.WindowClosed, "closed"))
	var buf bytes.Buffer
	if err := Write(&buf, JSON, s); err != nil {
		t.Fatal(err)
	}
	if strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("want exactly one line, got %q", buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"tool": "crd-window", "exit_code": 5.0, "exit_name": "window_closed", "node": "n1", "error": "closed", "open": true} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
}

func TestWriteText(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, Text, sample{Open: true}); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "open=true\n" {
		t.Errorf("got %q", buf.String())
	}
}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		in      string
		want    Format
		wantErr bool
	}{
		{"json", JSON, false},
		{"text", Text, false},
		{"", JSON, false}, // a bytes.Buffer is not a terminal
		{"auto", JSON, false},
		{"nagios", "nagios", false},
		{"yaml", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseFormat(tt.in, &bytes.Buffer{}, "nagios")
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("ParseFormat(%q) = %q, %v", tt.in, got, err)
			}
			if err != nil && exitcode.From(err) != 2 {
				t.Errorf("bad format must be exit 2, got %d", exitcode.From(err))
			}
		})
	}
}

func TestSettleOK(t *testing.T) {
	var h Header
	h.Settle(nil)
	if h.ExitCode != 0 || h.ExitName != "ok" || h.Error != "" {
		t.Errorf("%+v", h)
	}
	h.Settle(errors.New("x"))
	if h.ExitCode != 70 {
		t.Errorf("uncoded error must be internal, got %d", h.ExitCode)
	}
}

// IsTerminal is true for a terminal (a pseudo-terminal here) and false for a
// pipe, a regular file and a writer that is not a file.
func TestIsTerminal(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer ptmx.Close()
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("TIOCGPTN: %v", e)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("TIOCSPTLCK: %v", e)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	if !IsTerminal(pts) {
		t.Error("a pseudo-terminal is not a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, w := range map[string]io.Writer{"pipe": w, "file": f, "buffer": &bytes.Buffer{}} {
		if IsTerminal(w) {
			t.Errorf("a %s is a terminal", name)
		}
	}
}
