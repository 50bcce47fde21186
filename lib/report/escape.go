package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// MaxField bounds a free-text field another node or an operator sets and
// every node shows: a pause reason, a lock's purpose.
const MaxField = 256

// CheckField refuses, at write time, a free-text value longer than
// MaxField bytes or with a control character (a newline, an escape
// sequence): shown by `status --format text` on every node, it could
// otherwise forge lines there. flag names it in the message.
func CheckField(flag, s string) error {
	if len(s) > MaxField {
		return exitcode.Errorf(exitcode.Config, "%s is %d bytes long; keep it to %d (it is shown on one line of status)", flag, len(s), MaxField)
	}
	if i := strings.IndexFunc(s, isControl); i >= 0 || !utf8.ValidString(s) {
		return exitcode.Errorf(exitcode.Config, "%s contains a control character or invalid UTF-8; give one line of plain text", flag)
	}
	return nil
}

// Field is s for one line of text output, whoever wrote it: control
// characters (newlines included) escaped as in Go, and at most MaxField
// bytes before them, so that a value read from etcd cannot forge a line.
func Field(s string) string {
	if len(s) > MaxField {
		s = strings.ToValidUTF8(s[:MaxField], "") + "..."
	}
	return escape(s, false)
}

// OneLine is s with every control character escaped, newlines included:
// for a one-line message such as a tool's error on stderr.
func OneLine(s string) string { return escape(s, false) }

func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f)
}

// escape writes control characters and invalid UTF-8 as Go escapes; with
// keepLines, '\n' and '\t' stay (the layout of text output).
func escape(s string, keepLines bool) string {
	clean := true
	for _, r := range s {
		if (isControl(r) && !(keepLines && (r == '\n' || r == '\t'))) || r == utf8.RuneError {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && isControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case isControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// textWriter escapes every control character but the newline and the tab
// on its way out: whatever a Texter prints (a script's output, a value from
// etcd), text output carries no escape sequence, carriage return or
// backspace that could repaint or hide a line on the reader's terminal.
type textWriter struct{ w io.Writer }

func (t textWriter) Write(p []byte) (int, error) {
	s := escape(string(p), true)
	if _, err := io.WriteString(t.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}
