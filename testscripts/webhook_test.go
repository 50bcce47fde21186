package testscripts

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// CmdWebhookStart implements webhook-start: three local HTTP receivers for
// notifications, stopped when the script ends. WEBHOOK records each request
// body as one line of $WORK/received.jsonl and answers 204; WEBHOOK_500
// answers 500; WEBHOOK_HANG never answers while the script runs;
// WEBHOOK_GATE answers 204 only once $WORK/gate exists (never before: a
// delivery it answered proves the file was made while it was in flight).
func CmdWebhookStart(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: webhook-start")
	}
	var mu sync.Mutex
	path := filepath.Join(ts.Getenv("WORK"), "received.jsonl")
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.Write(append(b, '\n'))
			_ = f.Close()
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	fail := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	gate := filepath.Join(ts.Getenv("WORK"), "gate")
	gated := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := os.Stat(gate); err == nil {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-release:
				return
			case <-tick.C:
			}
		}
	}))
	ts.Defer(func() {
		close(release)
		gated.Close()
		rec.Close()
		fail.Close()
		hang.Close()
	})
	ts.Setenv("WEBHOOK", rec.URL)
	ts.Setenv("WEBHOOK_500", fail.URL)
	ts.Setenv("WEBHOOK_HANG", hang.URL)
	ts.Setenv("WEBHOOK_GATE", gated.URL)
}
