package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseServed(t *testing.T) {
	const exposition = `# HELP etcd_network_client_grpc_sent_bytes_total The total number of bytes sent to grpc clients.
# TYPE etcd_network_client_grpc_sent_bytes_total counter
etcd_network_client_grpc_sent_bytes_total 1.5e+06
grpc_server_msg_received_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 100
grpc_server_msg_received_total{grpc_method="LeaseKeepAlive",grpc_service="etcdserverpb.Lease",grpc_type="bidi_stream"} 20
grpc_server_msg_received_total_other 7
grpc_server_msg_sent_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 999
`
	s, err := parseServed(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	if s.sentBytes != 1.5e6 || s.requests != 120 {
		t.Errorf("served %+v, want 1.5e6 bytes, 120 requests", s)
	}
	if _, err := parseServed(strings.NewReader("etcd_server_has_leader 1\n")); err == nil {
		t.Error("an exposition without the counters was accepted")
	}
}

// The document renders from a run's figures, and flags a size whose
// simulation fell behind its schedule.
func TestScalingDoc(t *testing.T) {
	mk := func(n int, req, sent float64) scaleResult {
		return scaleResult{nodes: n, interval: time.Minute, took: time.Minute, publishes: n, publishPerS: float64(n) / 60,
			latencyMS: []float64{3, 4, 5}, recordBytes: 200, etcdRSS: 300, etcdRSSBase: 250, etcdCPU: 10,
			served: served{requests: req, sentBytes: sent}}
	}
	rs := []scaleResult{mk(100, 300, 30000), mk(10000, 30000, 3000000)}
	if rs[1].behind() || !(scaleResult{nodes: 10000, interval: time.Minute, publishPerS: 100}).behind() {
		t.Error("behind()")
	}
	if got := rs[0].perNodeMinute(rs[0].served.requests); got != 3 {
		t.Errorf("requests per node per minute %v, want 3", got)
	}
	doc := scalingDoc(rs, handoverCompare{small: 10, large: 1000, smallMS: []float64{2, 3}, largeMS: []float64{3, 4}, fifo: true}, []string{"a warning"})
	for _, want := range []string{"Do not edit", "| 10000 |", "requests ×1.00, bytes read ×1.00", "Ratio of the medians", "- a warning", "auto-compaction"} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/scaling.md lacks %q", want)
		}
	}
	if strings.Contains(doc, "NaN") {
		t.Error("NaN in the document")
	}
}
