package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
)

// clearFleet removes a simulated fleet (its keys and every lease) and
// compacts, so that the next size starts from an empty etcd.
func clearFleet(ctx context.Context, c *clientv3.Client, ns string) error {
	// A node's keys in blocks of 10,000 nodes (node-0…, node-1…): one
	// delete of a 100,000-node fleet's half million keys outlasts etcd's
	// request timeout.
	for _, dir := range []string{slot.RecordsDir(ns), slot.MemberDir(ns), slot.DownDir(ns), slot.RulesDir(ns)} {
		for d := range 10 {
			if _, err := c.Delete(ctx, fmt.Sprintf("%snode-%d", dir, d), clientv3.WithPrefix()); err != nil {
				return err
			}
		}
	}
	if _, err := c.Delete(ctx, ns, clientv3.WithPrefix()); err != nil {
		return err
	}
	ls, err := c.Leases(ctx)
	if err != nil {
		return err
	}
	for _, l := range ls.Leases {
		_, _ = c.Revoke(ctx, l.ID)
	}
	return compactAll(ctx, c)
}

// scalePlan is the size of a bench-scale run.
type scalePlan struct {
	sizes []int
	// publishers is the most nodes that run: a larger fleet is that many
	// publishing nodes and the rest records kept alive (fleetSim.bulk).
	publishers int
	interval   time.Duration
	// admissions are run one after another per size (the holding phase).
	admissions int
	// tlsSize is the fleet measured again with client-certificate TLS.
	tlsSize int
	// handover: the queue through one lock at a small and a large size,
	// runs of each.
	small, large, smallRuns, largeRuns int
}

func fullScalePlan() scalePlan {
	return scalePlan{sizes: []int{100, 1000, 10000, 100000}, publishers: 10000, interval: time.Duration(config.Default().HealthPublishIntervalSec) * time.Second,
		admissions: 20, tlsSize: 10000, small: 10, large: 1000, smallRuns: 20, largeRuns: 3}
}

// quickScalePlan is the smoke run: 20 nodes publishing every 2 s in a
// fleet of 40.
func quickScalePlan() scalePlan {
	return scalePlan{sizes: []int{40}, publishers: 20, interval: 2 * time.Second, admissions: 2, tlsSize: 20, small: 3, large: 20, smallRuns: 1, largeRuns: 1}
}

// blockedTargetNodes is the fleet whose total bytes with every node
// blocked before the lock have a target (≤ 1 MiB/s, issue 32).
const blockedTargetNodes = 10000

// allPhases are measured at every size; tlsPhases again with TLS.
var (
	allPhases = []string{phaseIdle, phaseClosed, phaseBlocked, phaseWaiting, phasePost, phaseHolding}
	tlsPhases = []string{phaseIdle, phaseBlocked}
)

// handoverCompare is the lock's handover with few and with many waiters.
type handoverCompare struct {
	small, large        int
	smallMS, largeMS    []float64
	fifo                bool
	overlaps            int
	etcdPeak, etcdStart float64
}

func (h handoverCompare) ratio() float64 { return median(h.largeMS) / median(h.smallMS) }

// compareHandovers queues p.small and then p.large nodes on one lock
// (queueRun: every waiter holds its watch on the entry ahead) and keeps the
// handover times of each.
func (b *bench) compareHandovers(ctx context.Context, p scalePlan) (handoverCompare, error) {
	h := handoverCompare{small: p.small, large: p.large, fifo: true}
	h.etcdStart, _ = b.etcdRSS()
	for i := range p.smallRuns + p.largeRuns {
		n := p.small
		if i >= p.smallRuns {
			n = p.large
		}
		q, err := b.queueRun(ctx, n, i)
		if err != nil {
			return h, err
		}
		if n == p.small {
			h.smallMS = append(h.smallMS, q.handoversMS...)
		} else {
			h.largeMS = append(h.largeMS, q.handoversMS...)
		}
		h.fifo = h.fifo && q.fifo
		h.overlaps += q.overlap
		h.etcdPeak = max(h.etcdPeak, q.etcdPeak)
	}
	return h, nil
}

// scaleRun is everything bench-scale measured.
type scaleRun struct {
	plan     scalePlan
	phases   []phaseResult // plain, every size
	facts    []fleetFacts
	tls      []phaseResult // TLS, tlsSize
	handover handoverCompare
	warnings []string
}

// scale runs the fleet simulation against a 3-member etcd, plain and then
// with TLS, and writes docs/scaling.md.
func (b *bench) scale(ctx context.Context, doc string) error {
	p := fullScalePlan()
	if b.publishers > 0 {
		p.publishers = b.publishers
	}
	if b.quick {
		p = quickScalePlan()
	}
	run := scaleRun{plan: p}
	if err := b.onCluster("cluster", nil, func(c *clientv3.Client, rssBase float64) error {
		for _, n := range p.sizes {
			rs, f, err := b.simulate(ctx, c, n, p.publishers, p.interval, allPhases, p.admissions, rssBase)
			if err != nil {
				return err
			}
			run.phases = append(run.phases, rs...)
			run.facts = append(run.facts, f)
		}
		h, err := b.compareHandovers(ctx, p)
		if err != nil {
			return err
		}
		run.handover = h
		fmt.Printf("handover through one lock: %d waiting: median %s ms p95 %s ms; %d waiting: median %s ms p95 %s ms; ratio %s; fifo %v, overlaps %d; etcd peak %.1f MiB\n",
			h.small, num(median(h.smallMS)), num(p95(h.smallMS)), h.large, num(median(h.largeMS)), num(p95(h.largeMS)), num(h.ratio()), h.fifo, h.overlaps, h.etcdPeak)
		return nil
	}); err != nil {
		return err
	}
	certs, err := etcdtest.GenerateCerts(filepath.Join(b.work, "certs"))
	if err != nil {
		return err
	}
	if err := b.onCluster("cluster-tls", certs, func(c *clientv3.Client, rssBase float64) error {
		rs, _, err := b.simulate(ctx, c, p.tlsSize, p.publishers, p.interval, tlsPhases, 0, rssBase)
		run.tls = rs
		return err
	}); err != nil {
		return err
	}
	run.warnings = b.warnings
	// A measurement without numbers is a broken benchmark, not a result:
	// the full run still writes its document (the warnings say why), and
	// fails.
	var empty error
	for _, r := range append(append([]phaseResult{}, run.phases...), run.tls...) {
		if r.ops == 0 || len(r.latencyMS) == 0 || r.served.requests <= 0 || r.served.sentBytes <= 0 {
			empty = fmt.Errorf("the fleet simulation of %d nodes (%s, tls %v) produced no numbers", r.nodes, r.phase, r.tls)
			break
		}
	}
	if empty == nil && (len(run.handover.smallMS) == 0 || len(run.handover.largeMS) == 0) {
		empty = fmt.Errorf("the handover comparison produced no numbers")
	}
	if b.quick {
		if empty != nil {
			return fmt.Errorf("smoke: %w", empty)
		}
		fmt.Println("bench-smoke: the fleet simulation produced numbers")
	}
	if doc != "" {
		if err := os.WriteFile(doc, []byte(scalingDoc(run)), 0o644); err != nil {
			return err
		}
	}
	return empty
}

// onCluster starts a 3-member etcd (with certs: client-certificate TLS),
// runs f on it and stops it.
func (b *bench) onCluster(name string, certs *etcdtest.Certs, f func(c *clientv3.Client, rssBase float64) error) error {
	ec, err := startCluster(b.etcdBin, filepath.Join(b.work, name), 3, certs)
	if err != nil {
		return err
	}
	defer ec.stop()
	b.cluster = ec
	defer func() { b.cluster = nil }()
	c, err := ec.client()
	if err != nil {
		return err
	}
	defer c.Close()
	rssBase, _ := ec.usage()
	return f(c, rssBase)
}

func bandwidth(bytesPerS float64) string { return size(bytesPerS) + "/s" }

// size formats a byte count.
func size(bytesPerS float64) string {
	switch {
	case bytesPerS >= 1<<30:
		return fmt.Sprintf("%.1f GiB", bytesPerS/(1<<30))
	case bytesPerS >= 1<<20:
		return fmt.Sprintf("%.1f MiB", bytesPerS/(1<<20))
	default:
		return fmt.Sprintf("%.0f KiB", bytesPerS/(1<<10))
	}
}

// admissionOnly is bench-scale's admission alone (make bench-admission,
// about 3 minutes): at every size of the full plan, 100 publishing nodes
// and the rest records kept alive, one admission with an empty rules cache
// and then the plan's admissions, printed; no document is written.
func (b *bench) admissionOnly(ctx context.Context) error {
	p := fullScalePlan()
	if b.quick {
		p = quickScalePlan()
	}
	return b.onCluster("cluster", nil, func(c *clientv3.Client, rssBase float64) error {
		for _, n := range p.sizes {
			if _, _, err := b.simulate(ctx, c, n, min(100, p.publishers), p.interval, []string{phaseHolding}, p.admissions, rssBase); err != nil {
				return err
			}
		}
		return nil
	})
}
