// Package report is the output contract shared by every crd-* tool: exactly
// one JSON object per run on stdout (one line), or a human-readable text
// rendering of the same result. Logs never go to stdout.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Format selects how a result is written.
type Format string

// Formats every tool understands. Tools may accept more (crd-detect: nagios, prom).
const (
	JSON Format = "json"
	Text Format = "text"
	Auto Format = ""
)

// Header is embedded first in every tool's result so that every JSON object
// carries the same identifying fields.
type Header struct {
	Tool     string `json:"tool"`
	ExitCode int    `json:"exit_code"`
	ExitName string `json:"exit_name"`
	Node     string `json:"node"`
	// Error is the one-line reason when exit_code is not 0 (or 1 from crd-detect).
	Error string `json:"error,omitempty"`
}

// Settle fills ExitCode, ExitName and Error from err (nil means ok).
func (h *Header) Settle(err error) {
	code := exitcode.CodeOf(err)
	h.ExitCode = int(code)
	h.ExitName = code.Name()
	if err != nil {
		h.Error = err.Error()
	}
}

// Texter renders a result for humans.
type Texter interface {
	Text(w io.Writer) error
}

// ParseFormat checks a --format value. Auto resolves to Text when stdout is a
// terminal and JSON otherwise. extra lists tool-specific formats.
func ParseFormat(s string, stdout io.Writer, extra ...Format) (Format, error) {
	switch f := Format(s); f {
	case JSON, Text:
		return f, nil
	case Auto, "auto":
		if IsTerminal(stdout) {
			return Text, nil
		}
		return JSON, nil
	default:
		for _, e := range extra {
			if f == e {
				return f, nil
			}
		}
		allowed := "json, text"
		for _, e := range extra {
			allowed += ", " + string(e)
		}
		return "", exitcode.Errorf(exitcode.Config, "--format %q: unknown format; use one of %s", s, allowed)
	}
}

// Write emits v in format f: JSON as a single line, Text through v's Texter
// with control characters escaped (see textWriter; a Texter shows a value
// that others wrote through Field).
func Write(w io.Writer, f Format, v any) error {
	if f == Text {
		if t, ok := v.(Texter); ok {
			return t.Text(textWriter{w})
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return exitcode.Errorf(exitcode.Internal, "report: encode result: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// IsTerminal reports whether w is an *os.File attached to a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	// TCGETS succeeds only on a terminal (isatty(3)).
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Line writes one "key: value" line for text renderings, aligned. A
// newline or other control character in value is escaped: it stays one line.
func Line(w io.Writer, key string, value any) {
	fmt.Fprintf(w, "%-16s %s\n", key+":", escape(fmt.Sprint(value), false))
}
