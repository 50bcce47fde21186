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

// The document renders from a run's figures, per phase and per admission,
// and flags a row whose simulation fell behind its schedule.
func TestScalingDoc(t *testing.T) {
	mk := func(phase string, n int, req, sent float64) phaseResult {
		return phaseResult{phase: phase, nodes: n, publishers: n, interval: time.Minute, took: time.Minute, ops: n,
			latencyMS: []float64{3, 4, 5}, etcdRSS: 300, etcdCPU: 10, served: served{requests: req, sentBytes: sent}}
	}
	var rs []phaseResult
	for _, ph := range allPhases {
		if ph != phaseHolding {
			rs = append(rs, mk(ph, 100, 300, 30000), mk(ph, 10000, 30000, 3000000))
		}
	}
	hold := mk(phaseHolding, 100, 10, 20000)
	hold.perOp, hold.ops = true, 5
	hold.served.applyTxn = []float64{0.001, 0.005, 0.002}
	first := mk(phaseFirstAdmission, 100, 3, 40000)
	first.perOp, first.ops, first.latencyMS = true, 1, []float64{7}
	big := mk(phaseHolding, 100000, 10, 30000)
	big.perOp, big.ops, big.publishers = true, 5, 10000
	big.served.applyTxn = []float64{0.010}
	pol := mk(phaseHoldingPolicy, 100, 10, 20000)
	pol.perOp, pol.ops, pol.latencyMS = true, 5, []float64{6, 7, 8}
	pct := mk(phaseHoldingPercent, 100, 11, 21000)
	pct.perOp, pct.ops, pct.latencyMS = true, 5, []float64{9, 10, 11}
	wave := mk(phaseHoldingWave, 100, 11, 21000)
	wave.perOp, wave.ops, wave.latencyMS = true, 5, []float64{12, 13, 14}
	rs = append(rs, first, hold, big, pol, pct, wave)
	if rs[1].behind() || !(phaseResult{nodes: 100000, publishers: 10000, interval: time.Minute, took: time.Minute, ops: 5000}).behind() ||
		(phaseResult{nodes: 100000, publishers: 5000, interval: time.Minute, took: time.Minute, ops: 5000}).behind() {
		t.Error("behind()")
	}
	if got := rs[0].requests(); got != 3 {
		t.Errorf("requests per node per minute %v, want 3", got)
	}
	if got := hold.requests(); got != 2 {
		t.Errorf("requests per admission %v, want 2", got)
	}
	tlsRow := mk(phaseIdle, 10000, 30000, 3000000)
	tlsRow.tls = true
	run := scaleRun{plan: fullScalePlan(), phases: rs, tls: []phaseResult{tlsRow},
		facts:    []fleetFacts{{nodes: 100, keys: 300, leases: 100, recordBytes: 290}},
		handover: handoverCompare{small: 10, large: 1000, smallMS: []float64{2, 3}, largeMS: []float64{3, 4}, fifo: true}, warnings: []string{"a warning"}}
	doc := scalingDoc(run)
	if testing.Verbose() {
		t.Log(doc)
	}
	for _, want := range []string{"Do not edit", "| idle | 10000 |", "| waiting in line (10000 against 100 nodes) | 1.00 | 1.00 |",
		"## With TLS", "| idle | 10000 | yes |", "requests per admission", "Ratio of the medians", "- a warning", "auto-compaction",
		"| 100 | 5 (0) | 2.00 | 4000 B | 4.00 | 5.00 | 1.00 | 39 KiB | 7.00 | 7.00 | 8.00 | 10.0 | 11.0 | 13.0 | 14.0 |",
		"| 100000 | 5 (0) | 2.00 | 6000 B | 4.00 | 5.00 | 2.00 |  |  |  |  |  |  |  |  |",
		"at 100, 1,000, 10,000 and 100,000 nodes", "With all 10000 nodes blocked before the lock etcd sent", "(target ≤ 1 MiB/s at 10000 nodes)", "(p95) per admission at every size, with a policy, a percentage and a wave too, flat from the smallest fleet to the largest: met"} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/scaling.md lacks %q", want)
		}
	}
	// An admission with a policy, a percentage or a wave over its target
	// fails the target too.
	for i, what := range []string{"a policy", "a percentage", "a wave"} {
		k := len(run.phases) - 3 + i
		run.phases[k].failures = 1
		if !strings.Contains(scalingDoc(run), "a percentage and a wave too, flat from the smallest fleet to the largest: **not met**") {
			t.Errorf("a failed admission with %s met the target", what)
		}
		run.phases[k].failures = 0
	}
	// A variant that measured nothing (every admission refused, as the
	// wave's once was when wave 0 had not completed) is no pass either.
	last := &run.phases[len(run.phases)-1]
	lat := last.latencyMS
	last.latencyMS = nil
	if !strings.Contains(scalingDoc(run), "a wave too, flat from the smallest fleet to the largest: **not met**") {
		t.Error("a wave that measured nothing met the target")
	}
	last.latencyMS = lat
	if strings.Contains(doc, "NaN") || strings.Contains(doc, "read-view") {
		t.Error("NaN or --read-view in the document")
	}
}
