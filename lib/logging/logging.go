// Package logging builds the structured logger every tool and the daemon
// write to stderr (and so to the journal under systemd).
//
// It is log/slog from the standard library, not a third-party logger: the
// initialisation of charmbracelet/log's terminal-styling dependencies took a
// large share of the daemon's idle memory budget (docs/decisions.md,
// docs/performance.md "Figures measured by hand"). slog gives the same
// levels, JSON, and scoped loggers.
//
// JSON records carry the PRD's field names: ts, level, msg, plus whatever the
// caller adds (node, event, lock_wait_ms, ...).
package logging

import (
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// New returns a logger writing to w at level (debug, info, warn, error) in
// format (json, or text/logfmt: key=value lines). component scopes every
// record (component=crd-lock). When w is a Journal, every line starts with
// its record's sd-daemon priority prefix.
func New(w io.Writer, component, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lvl = slog.LevelDebug
	case "info", "":
		lvl = slog.LevelInfo
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		return nil, exitcode.Errorf(exitcode.Config, "--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: replaceAttr}
	var journal *prefixWriter
	if _, ok := w.(Journal); ok {
		journal = &prefixWriter{w: w}
		w = journal
	}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(w, opts)
	case "text", "logfmt", "":
		h = slog.NewTextHandler(w, opts)
	default:
		return nil, exitcode.Errorf(exitcode.Config, "--log-format %q: use text, json or logfmt", format)
	}
	if journal != nil {
		h = journalHandler{journal, h}
	}
	l := slog.New(h)
	if component != "" {
		l = l.With("component", component)
	}
	return l, nil
}

// replaceAttr renames time to ts (PRD FR-OB-1), prints it in UTC with
// milliseconds, and lower-cases the level.
func replaceAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		return slog.String("ts", a.Value.Time().UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	case slog.LevelKey:
		return slog.String("level", strings.ToLower(a.Value.String()))
	}
	return a
}

// Discard is a logger that writes nothing, for tests and library defaults.
func Discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Since is a small helper for "duration in ms" fields.
func Since(t time.Time) int64 { return time.Since(t).Milliseconds() }
