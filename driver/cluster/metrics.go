package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// MetricsResult is the JSON of `step serve-metrics`, written when it exits.
type MetricsResult struct {
	report.Header
	// Listen is the address that was served.
	Listen string `json:"listen"`
	// File is the exposition file served as /metrics.
	File string `json:"file"`
	// Stopped says why the server ended: stdin_closed or signal.
	Stopped string `json:"stopped,omitempty"`
}

// ExpositionContentType is the Prometheus text format's content type.
const ExpositionContentType = "text/plain; version=0.0.4; charset=utf-8"

// serveMetrics serves the daemon's exposition file at /metrics and a 200 at
// /healthz until stdin reaches EOF (the daemon, which holds the other end,
// died or closed it) or ctx ends (SIGTERM). Both are a normal end: exit 0.
// The address is metrics.listen, the operator's choice (loopback by default).
func serveMetrics(ctx context.Context, a protocol.ServeMetricsArgs, stdin io.Reader, res *MetricsResult, log *slog.Logger) error {
	res.Listen, res.File = a.Listen, a.File
	if a.File == "" {
		return exitcode.Errorf(exitcode.Config, "crd-lock step serve-metrics: --file is required: the exposition file the daemon writes (run_dir/metrics.prom)")
	}
	ln, err := net.Listen("tcp", a.Listen)
	if err != nil {
		return exitcode.Errorf(exitcode.Config, "crd-lock step serve-metrics: cannot listen on metrics.listen %s: %v; choose a free host:port", a.Listen, err)
	}
	res.Listen = ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		data, err := os.ReadFile(a.File)
		if err != nil {
			http.Error(w, "metrics not available yet: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", ExpositionContentType)
		_, _ = w.Write(data)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	eof := make(chan struct{})
	if stdin != nil {
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			close(eof)
		}()
	}
	log.Info("serving metrics", "event", "metrics_serving", "listen", res.Listen, "file", a.File)
	var serveErr error
	select {
	case <-ctx.Done():
		res.Stopped = "signal"
	case <-eof:
		res.Stopped = "stdin_closed"
	case serveErr = <-served:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if serveErr == nil {
		serveErr = <-served
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return exitcode.Errorf(exitcode.Internal, "crd-lock step serve-metrics: server on %s failed: %v", res.Listen, serveErr)
	}
	log.Info("metrics server stopped", "event", "metrics_stopped", "why", res.Stopped)
	return nil
}
