// Command receiver accepts HTTP POSTs on a loopback port and appends each
// one to a file as one JSON line: {"body":…,"path":…,"time":…,"ts":…} where
// body is the request's JSON when it parses, else its text, and ts is the
// time in the daemon's log format (UTC, milliseconds) for the demo's timeline. For the demo and the
// notification tests; it is never shipped.
//
//	receiver --addr-file F --out F [--listen 127.0.0.1:0] [--status 200] [--hang]
//
// --status answers every request with that status; --hang records the
// request and then never answers (a destination that hangs).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("receiver", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	addrFile := fs.String("addr-file", "", "write the bound host:port here once listening")
	out := fs.String("out", "", "append one JSON line per request here (required)")
	status := fs.Int("status", http.StatusOK, "HTTP status to answer")
	hang := fs.Bool("hang", false, "record the request, then never answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("--out is required")
	}
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	if *addrFile != "" {
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(l.Addr().String()+"\n"), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			return err
		}
	}
	var mu sync.Mutex
	block := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var body any = string(b)
		if json.Valid(b) {
			body = json.RawMessage(b)
		}
		now := time.Now().UTC()
		line, _ := json.Marshal(map[string]any{"time": now.Format(time.RFC3339Nano), "ts": now.Format("2006-01-02T15:04:05.000Z"), "path": r.URL.Path, "body": body})
		mu.Lock()
		_, _ = f.Write(append(line, '\n'))
		mu.Unlock()
		if *hang {
			select {
			case <-block:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(*status)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; close(block); _ = srv.Close() }()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
