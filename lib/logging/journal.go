package logging

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// Journal marks W as systemd-journald's stream: New then starts every
// record with its sd-daemon priority prefix (<3> error, <4> warning, <6>
// info, <7> debug), which journald strips and stores as PRIORITY, so that
// `journalctl -p warning` finds the warnings. The rest of the line is
// unchanged (JSON stays JSON).
type Journal struct{ W io.Writer }

// Write passes p through unchanged.
func (j Journal) Write(p []byte) (int, error) { return j.W.Write(p) }

// Unwrap returns the writer under a Journal, else w: a child process given
// the *os.File inherits the journal's stream itself (no copying pipe) and
// finds it through JOURNAL_STREAM as its parent did.
func Unwrap(w io.Writer) io.Writer {
	if j, ok := w.(Journal); ok {
		return j.W
	}
	return w
}

// IsJournalStream reports whether f is the stream that the value of
// JOURNAL_STREAM ("DEV:INODE", set by systemd for a service whose output
// goes to the journal) names. A redirected stderr, or an environment
// inherited by a shell whose stderr is a terminal, does not match.
func IsJournalStream(journalStream string, f *os.File) bool {
	if journalStream == "" || f == nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return journalStream == strconv.FormatUint(uint64(st.Dev), 10)+":"+strconv.FormatUint(uint64(st.Ino), 10)
}

// Priority is the syslog priority journald stores for a record of level l.
func Priority(l slog.Level) int {
	switch {
	case l < slog.LevelInfo:
		return 7
	case l < slog.LevelWarn:
		return 6
	case l < slog.LevelError:
		return 4
	}
	return 3
}

// prefixWriter writes the current record's "<N>" before its line. slog's
// handlers write a record with one Write; mu holds the prefix for it.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	line := make([]byte, 0, len(p.prefix)+len(b))
	line = append(append(line, p.prefix...), b...)
	if _, err := p.w.Write(line); err != nil {
		return 0, err
	}
	return len(b), nil
}

// journalHandler gives every record its priority prefix.
type journalHandler struct {
	out   *prefixWriter
	inner slog.Handler
}

func (h journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h journalHandler) Handle(ctx context.Context, r slog.Record) error {
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.prefix = append(h.out.prefix[:0], '<', byte('0'+Priority(r.Level)), '>')
	return h.inner.Handle(ctx, r)
}

func (h journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return journalHandler{h.out, h.inner.WithAttrs(as)}
}

func (h journalHandler) WithGroup(name string) slog.Handler {
	return journalHandler{h.out, h.inner.WithGroup(name)}
}
