package driver

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// When the metrics child fails (a port in use), the daemon logs the child's
// own reason from its JSON result, not only "exit status 2".
func TestServeMetricsLogsTheChildsError(t *testing.T) {
	const reason = "crd-lock step serve-metrics: cannot listen on metrics.listen 127.0.0.1:10190: listen tcp 127.0.0.1:10190: bind: address already in use; choose a free host:port"
	p := writeScript(t, `echo 'not json: a stray line' >&2
echo '{"tool":"crd-lock","exit_code":2,"exit_name":"config","error":"`+reason+`"}'
exit 2`)
	var logs testsupport.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	cfg := config.Default()
	cfg.RunDir = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeMetrics(ctx, p, cfg, io.Discard, log) }()
	testsupport.Eventually(t, 10*time.Second, "metrics_error logged", func() bool { return strings.Contains(logs.String(), `"event":"metrics_error"`) })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "bind: address already in use") {
		t.Errorf("the log does not carry the child's error:\n%s", logs.String())
	}
}

func TestChildError(t *testing.T) {
	if got := childError(nil, nil); !strings.Contains(got, "exited 0") {
		t.Errorf("no result, exit 0: %q", got)
	}
	f := memFile("t", []byte("garbage\n"))
	defer closeFiles(f)
	if got := childError(f, io.ErrUnexpectedEOF); got != io.ErrUnexpectedEOF.Error() {
		t.Errorf("no JSON: %q, want the wait error", got)
	}
}

// metrics.listen's default is none of the ports the Prometheus stack itself
// uses on a node, and `crd-lock step serve-metrics` has the same default.
func TestMetricsListenDefault(t *testing.T) {
	def := config.Default().Metrics.Listen
	for _, taken := range []string{
		":9090", // Prometheus
		":9091", // Pushgateway
		":9093", // Alertmanager
		":9094", // Alertmanager cluster
		":9100", // node_exporter
	} {
		if strings.HasSuffix(def, taken) {
			t.Errorf("metrics.listen defaults to %s, a port of the Prometheus stack", def)
		}
	}
	if !strings.HasPrefix(def, "127.0.0.1:") {
		t.Errorf("metrics.listen defaults to %s, not loopback", def)
	}
	var a protocol.ServeMetricsArgs
	fs := flag.NewFlagSet("serve-metrics", flag.ContinueOnError)
	a.Register(fs)
	if err := fs.Parse(nil); err != nil || a.Listen != def {
		t.Errorf("serve-metrics --listen defaults to %q, metrics.listen to %q", a.Listen, def)
	}
}
