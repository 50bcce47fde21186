package testscripts

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"
)

// CmdWebhookStart implements webhook-start: three local HTTP receivers for
// notifications, stopped when the script ends. WEBHOOK records each request
// body as one line of $WORK/received.jsonl and answers 204; WEBHOOK_500
// answers 500; WEBHOOK_HANG never answers while the script runs.
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
	ts.Defer(func() {
		close(release)
		rec.Close()
		fail.Close()
		hang.Close()
	})
	ts.Setenv("WEBHOOK", rec.URL)
	ts.Setenv("WEBHOOK_500", fail.URL)
	ts.Setenv("WEBHOOK_HANG", hang.URL)
}
