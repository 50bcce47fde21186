package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/driver/cluster"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
)

// scaleResult is one simulated fleet's steady state.
type scaleResult struct {
	nodes       int
	interval    time.Duration
	publishes   int
	failures    int
	latencyMS   []float64
	keys        int64
	leases      int
	dbBytes     int64
	recordBytes int
	etcdRSS     float64 // all members, after the measured round
	etcdRSSBase float64 // all members, before the first fleet
	etcdCPU     float64 // % of one CPU, all members, during the measured round
	publishPerS float64
	took        time.Duration
	served      served // what etcd served during the measured round
}

// perNodeMinute is x per node and per minute of the measured round.
func (r scaleResult) perNodeMinute(x float64) float64 {
	return x / float64(r.nodes) / r.took.Minutes()
}

// per1000 is x per 1,000 nodes.
func (r scaleResult) per1000(x float64) float64 { return x / (float64(r.nodes) / 1000) }

// behind reports a simulation that could not keep its schedule on this
// machine: fewer than 90 % of the scheduled publications per second.
func (r scaleResult) behind() bool {
	return r.publishPerS < 0.9*float64(r.nodes)/r.interval.Seconds()
}

// simulateFleet runs n nodes in this process, each publishing its health
// record through the real `crd-lock step publish` code (cluster.RunStep:
// a new etcd client per publication, as the child does; no --read-view, as
// the daemon's publisher) every interval, spread evenly. The first round
// grants the publish leases; the second, the steady state, is measured.
func (b *bench) simulateFleet(ctx context.Context, c *clientv3.Client, n int, interval time.Duration, rssBase float64) (scaleResult, error) {
	res := scaleResult{nodes: n, interval: interval, etcdRSSBase: rssBase}
	ns := fmt.Sprintf("/bench/scale-%d/", n)
	cfgs := make([][]byte, n)
	for i := range n {
		cfg := config.Default()
		cfg.NodeName = fmt.Sprintf("node-%05d", i)
		cfg.EtcdEndpoints = b.endpoints()
		cfg.LockKey = ns + "lock"
		cfg.HealthPublishIntervalSec = int(interval / time.Second)
		cfg.RunDir = filepath.Join(b.work, "scale", fmt.Sprint(n), cfg.NodeName)
		cfg.StateDir = cfg.RunDir
		y, err := driver.MarshalConfig(cfg)
		if err != nil {
			return res, err
		}
		cfgs[i] = y
	}
	args := append([]string{driver.StepPublish}, driver.PublishArgs{State: "idle", LastCheck: time.Now()}.Args()...)
	var mu sync.Mutex
	round := func(measure bool) {
		var wg sync.WaitGroup
		start := time.Now()
		for i := range n {
			time.Sleep(time.Until(start.Add(time.Duration(i) * interval / time.Duration(n))))
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out bytes.Buffer
				t0 := time.Now()
				err := cluster.RunStep(ctx, args, bytes.NewReader(cfgs[i]), &out, io.Discard)
				d := time.Since(t0)
				if !measure {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				res.publishes++
				if err != nil {
					res.failures++
					return
				}
				res.latencyMS = append(res.latencyMS, ms(d))
			}()
		}
		time.Sleep(time.Until(start.Add(interval)))
		wg.Wait()
	}
	round(false)
	_, cpu0 := b.cluster.usage()
	s0, err := b.cluster.scrape()
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	round(true)
	res.took = time.Since(t0)
	s1, err := b.cluster.scrape()
	if err != nil {
		return res, err
	}
	res.served = s1.minus(s0)
	var cpu1 int64
	res.etcdRSS, cpu1 = b.cluster.usage()
	res.etcdCPU = float64(cpu1-cpu0) / clkTck() / res.took.Seconds() * 100
	res.publishPerS = float64(res.publishes) / res.took.Seconds()
	if r, err := c.Get(ctx, ns, clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
		res.keys = r.Count
	}
	if r, err := c.Get(ctx, ns+"nodes/node-00000"); err == nil && len(r.Kvs) > 0 {
		res.recordBytes = len(r.Kvs[0].Key) + len(r.Kvs[0].Value)
	}
	if r, err := c.Leases(ctx); err == nil {
		res.leases = len(r.Leases)
	}
	if st, err := c.Status(ctx, b.cluster.endpoints[0]); err == nil {
		res.dbBytes = st.DbSize
	}
	return res, clearFleet(ctx, c, ns)
}

// clearFleet removes a simulated fleet (its keys and every lease) and
// compacts, so that the next size starts from an empty etcd.
func clearFleet(ctx context.Context, c *clientv3.Client, ns string) error {
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
	sizes    []int
	interval time.Duration
	// handover: the queue through one lock at a small and a large size,
	// runs of each.
	small, large, smallRuns, largeRuns int
}

func fullScalePlan() scalePlan {
	return scalePlan{sizes: []int{100, 1000, 10000}, interval: time.Duration(config.Default().HealthPublishIntervalSec) * time.Second,
		small: 10, large: 1000, smallRuns: 20, largeRuns: 3}
}

// quickScalePlan is the smoke run: 20 nodes publishing every 2 s.
func quickScalePlan() scalePlan {
	return scalePlan{sizes: []int{20}, interval: 2 * time.Second, small: 3, large: 20, smallRuns: 1, largeRuns: 1}
}

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

// scale runs the fleet simulation against a 3-member etcd and writes
// docs/scaling.md.
func (b *bench) scale(ctx context.Context, doc string) error {
	p := fullScalePlan()
	if b.quick {
		p = quickScalePlan()
	}
	ec, err := startCluster(b.etcdBin, filepath.Join(b.work, "cluster"), 3)
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
	var results []scaleResult
	for _, n := range p.sizes {
		r, err := b.simulateFleet(ctx, c, n, p.interval, rssBase)
		if err != nil {
			return err
		}
		fmt.Printf("%5d nodes: %d publications (%d failed) in %s, %.1f/s; publish p50 %s ms p95 %s ms; per node and minute %s requests, %s read; etcd %.1f MiB RSS (base %.1f), %.2f %% CPU; record %d B\n",
			n, r.publishes, r.failures, r.took.Round(time.Second), r.publishPerS, num(median(r.latencyMS)), num(p95(r.latencyMS)),
			num(r.perNodeMinute(r.served.requests)), size(r.perNodeMinute(r.served.sentBytes)), r.etcdRSS, r.etcdRSSBase, r.etcdCPU, r.recordBytes)
		if r.behind() {
			b.warnf("%d nodes: %.1f publications/s against %.1f scheduled: this machine could not keep the schedule; the figures of this size understate the load", n, r.publishPerS, float64(n)/p.interval.Seconds())
		}
		results = append(results, r)
	}
	h, err := b.compareHandovers(ctx, p)
	if err != nil {
		return err
	}
	fmt.Printf("handover through one lock: %d waiting: median %s ms p95 %s ms; %d waiting: median %s ms p95 %s ms; ratio %s; fifo %v, overlaps %d; etcd peak %.1f MiB\n",
		h.small, num(median(h.smallMS)), num(p95(h.smallMS)), h.large, num(median(h.largeMS)), num(p95(h.largeMS)), num(h.ratio()), h.fifo, h.overlaps, h.etcdPeak)
	if b.quick {
		for _, r := range results {
			if r.publishes == 0 || len(r.latencyMS) == 0 || r.keys == 0 || r.served.requests <= 0 || r.served.sentBytes <= 0 {
				return fmt.Errorf("smoke: the fleet simulation of %d nodes produced no numbers", r.nodes)
			}
		}
		if len(h.smallMS) == 0 || len(h.largeMS) == 0 {
			return fmt.Errorf("smoke: the handover comparison produced no numbers")
		}
		fmt.Println("bench-smoke: the fleet simulation produced numbers")
	}
	if doc == "" {
		return nil
	}
	return os.WriteFile(doc, []byte(scalingDoc(results, h, b.warnings)), 0o644)
}

// scalingDoc renders docs/scaling.md: the load computed from the protocol
// and the defaults, then the simulation's measurements.
func scalingDoc(results []scaleResult, h handoverCompare, warnings []string) string {
	d := config.Default()
	pub := float64(d.HealthPublishIntervalSec)
	rec := 0
	for _, r := range results {
		rec = max(rec, r.recordBytes)
	}
	var w strings.Builder
	w.WriteString("# Scaling\n\n<!-- Generated by `make bench-scale` (bench/crdbench). Do not edit: run `make bench-scale` again. -->\n\n")
	w.WriteString("What a fleet costs etcd, computed from the protocol (docs/cluster-protocol.md, driver/cluster) and the " +
		"default configuration, then measured with simulated nodes against a real 3-member etcd.\n\n")
	fmt.Fprintf(&w, "## What one node does\n\n"+
		"- **Idle** (no reboot needed, the normal state): every health_publish_interval_sec (%.0f s by default, ±10 %% "+
		"jitter, in the same burst as the cycle when due) "+
		"the daemon runs `crd-lock step publish`, which connects, renews its one publish lease with a single "+
		"LeaseKeepAlive (TTL 3 × interval = %.0f s; a lease is granted only when the old one expired), reads its own "+
		"record (one Get: another machine must not publish under this name), writes its record `<ns>nodes/<node>` "+
		"and reads the pause key and its own hold and request keys in one Txn, and disconnects. It does not read the other nodes' records: the cost "+
		"of an idle node does not depend on the size of the fleet. Between publications the node holds no "+
		"connection, no watch and no lock entry.\n"+
		"- **About to decide** (a reboot is needed, the window is open, a built-in policy or a health_script is "+
		"configured): the daemon reads the whole view (`publish --read-view`) at most once per interval before the "+
		"pre-lock checks, and the cycle reads seats, slots, records and pause in one Txn under the lock "+
		"(docs/cluster-protocol.md, \"Who reads the view\").\n"+
		"- **Waiting for the lock**: one lock entry on a lock-session lease (lock_ttl_sec %d s, kept alive every %d s), "+
		"one watch on the entry ahead (two watches, on the slots and the seats, while it holds a seat and waits for a "+
		"reboot slot), one connection, and one read of the line every %.0f s without an event (lock.Recheck: a safety "+
		"net for a lost watch event; handovers come from the watch).\n"+
		"- **Rebooting**: one slot key `<ns>rebooting/<node>` on its own lease (reboot_slot_ttl_sec %d s, never kept "+
		"alive), deleted by `crd-lock step complete` after the node is back.\n\n",
		pub, 3*pub, d.LockTTLSec, d.LockTTLSec/3, lock.Recheck.Seconds(), d.RebootSlotTTLSec)
	// Requests per publication, as measured (the smallest fleet's).
	reqPerPub := math.NaN()
	if len(results) > 0 && results[0].publishes > 0 {
		reqPerPub = results[0].served.requests / float64(results[0].publishes)
	}
	fmt.Fprintf(&w, "## Load on etcd with the defaults, all nodes idle (computed)\n\n"+
		"A health record is about %d bytes (key and value, measured below). An idle publication reads single keys "+
		"only (its own record, the pause, its hold and request), whatever the size of the fleet, in %s requests as "+
		"measured below (among them the connection check of lib/etcd, one key at the namespace's own name, the "+
		"LeaseKeepAlive, the Get of its own record and the Txn); compare etcd's CPU per 1,000 nodes below.\n\n", rec, num(reqPerPub))
	w.WriteString("| nodes | keys | leases | watches | requests/s | writes/s (Put) | keys read/s | records read/s (view) | new connections/s |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range []float64{100, 1000, 10000} {
		perS := n / pub
		fmt.Fprintf(&w, "| %.0f | %.0f | %.0f | 0 | %s | %s | %s | 0 | %s |\n", n, n, n, num(reqPerPub*perS), num(perS), num(4*perS), num(perS))
	}
	w.WriteString("\nDuring a rollout add, per group, one lock entry and lease per waiting node, one or two watches per " +
		"waiting node, at most max_holders slot keys and leases, and one view read per interval for each node " +
		"that is about to decide (not for those waiting in line).\n\n")

	w.WriteString("## Measured: simulated idle fleets against a real etcd\n\n" +
		"`make bench-scale` runs N simulated nodes in one process. Each publication is the real `crd-lock step " +
		"publish` code (driver/cluster.RunStep) without `--read-view`, as the daemon's publisher runs it, with the " +
		"default configuration and interval and a fresh etcd client each time as the child has; the nodes are " +
		"spread evenly over the interval. The first interval grants the publish leases; the second, the steady " +
		"state, is measured. etcd is the pinned release, 3 members on loopback on the same machine; the " +
		"simulation's own CPU shares the machine with them. Between sizes the fleet's keys and leases are removed " +
		"and etcd compacted. Requests are etcd's `grpc_server_msg_received_total` (every unary request and every " +
		"stream message), bytes read its `etcd_network_client_grpc_sent_bytes_total` (everything etcd sent to " +
		"clients), both summed over the members.\n\n")
	w.WriteString("| nodes | publications/s (scheduled) | failed | requests per node per minute | bytes read per node per minute | etcd sent, all nodes | publish p50 (ms) | publish p95 (ms) | etcd CPU per 1,000 nodes | etcd VmRSS (growth per 1,000 nodes) | keys | leases | etcd db |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		fmt.Fprintf(&w, "| %d | %s (%s) | %d | %s | %s | %s | %s | %s | %s %% | %.1f MiB (%s MiB) | %d | %d | %s |\n",
			r.nodes, num(r.publishPerS), num(float64(r.nodes)/r.interval.Seconds()), r.failures,
			num(r.perNodeMinute(r.served.requests)), size(r.perNodeMinute(r.served.sentBytes)), bandwidth(r.served.sentBytes/r.took.Seconds()),
			num(median(r.latencyMS)), num(p95(r.latencyMS)), num(r.per1000(r.etcdCPU)),
			r.etcdRSS, num(r.per1000(r.etcdRSS-r.etcdRSSBase)), r.keys, r.leases, size(float64(r.dbBytes)))
	}
	if len(results) > 1 {
		first, last := results[0], results[len(results)-1]
		fmt.Fprintf(&w, "\nPer node, %d nodes against %d: requests ×%s, bytes read ×%s (target ≤ 1.2). etcd sent %s in all at %d nodes "+
			"(target for the view reads ≤ 1 MiB/s).\n",
			last.nodes, first.nodes,
			num(last.perNodeMinute(last.served.requests)/first.perNodeMinute(first.served.requests)),
			num(last.perNodeMinute(last.served.sentBytes)/first.perNodeMinute(first.served.sentBytes)),
			bandwidth(last.served.sentBytes/last.took.Seconds()), last.nodes)
	}
	w.WriteString("\nThe publish latency includes connecting (the real child connects once per publication). A row whose " +
		"publications/s fell short of the schedule was limited by this machine (the warnings below say so); etcd's " +
		"own figures per 1,000 nodes are then those of the rate reached.\n\n")

	fmt.Fprintf(&w, "## Handover with many nodes waiting\n\n"+
		"A rollout queues every node that needs a reboot on one lock: each waiter holds a watch on the entry ahead of "+
		"it, so a handover wakes one waiter whatever the length of the line. Measured with lib/lock's queue (as in "+
		"docs/performance.md: nodes in one process, one lease each, each holder releasing as soon as it holds, "+
		"zero-length reboots), %d nodes waiting against %d, on the same 3-member etcd:\n\n", h.large, h.small)
	w.WriteString("| nodes in line | handovers | handover median (ms) | handover p95 (ms) |\n|---:|---:|---:|---:|\n")
	fmt.Fprintf(&w, "| %d | %d | %s | %s |\n| %d | %d | %s | %s |\n\n", h.small, len(h.smallMS), num(median(h.smallMS)), num(p95(h.smallMS)),
		h.large, len(h.largeMS), num(median(h.largeMS)), num(p95(h.largeMS)))
	fmt.Fprintf(&w, "Ratio of the medians %s (target ≤ 2); FIFO kept: %v; holders overlapping: %d; etcd VmRSS (all members) "+
		"%.1f MiB before, %.1f MiB at the peak. This is the lock's part of the handover (release → next holder); "+
		"the full path of a real daemon (slot freed → next reboot command, with the re-checks under the lock) is "+
		"measured with two daemons in docs/performance.md.\n\n", num(h.ratio()), h.fifo, h.overlaps, h.etcdStart, h.etcdPeak)
	if len(warnings) > 0 {
		w.WriteString("Warnings during this run:\n\n")
		for _, m := range warnings {
			fmt.Fprintf(&w, "- %s\n", m)
		}
		w.WriteString("\n")
	}
	fmt.Fprintf(&w, "## etcd's history: run it with auto-compaction\n\n"+
		"Every Put is a new revision, and etcd keeps every revision until it is compacted: with the defaults a fleet "+
		"adds %.2f million revisions a day per 1,000 nodes (%.0f per node), each holding a record of about %d bytes, plus a "+
		"few per reboot (the lock entry and its release, the slot). Without compaction etcd's database grows until it "+
		"reaches its quota (--quota-backend-bytes, 2 GiB by default) and etcd raises the NOSPACE alarm and refuses "+
		"writes: no node can then take the lock or publish, so nothing reboots (exit 7) until an operator compacts, "+
		"defragments and disarms the alarm (docs/runbooks.md). Deleted lock entries also stay in etcd's index until a "+
		"compaction, and every waiter's read walks them. Run etcd with auto-compaction, for example "+
		"`--auto-compaction-mode=periodic --auto-compaction-retention=1h`. The lock keeps working while etcd compacts: "+
		"a waiter whose watch revision was compacted away reads again and keeps its place in line "+
		"(lib/lock's TestIntegrationUnderCompaction compacts every millisecond).\n\n",
		1000*86400/pub/1e6, 86400/pub, rec)
	w.WriteString("## Rollout time: groups and max_holders\n\n" +
		"A lock (lock_key, or lock_key/GROUP) lets at most max_holders of its nodes reboot at once; groups have " +
		"separate locks and proceed in parallel. A waiting node is blocked on a watch, so the next node starts within " +
		"tens of milliseconds of a slot being freed (docs/performance.md); the rollout is therefore bounded by the " +
		"reboot itself: from the reboot command to `complete` (boot, post-reboot hooks, detectors quiet, the " +
		"post-reboot gate, settle_sec). With nodes spread evenly over G groups:\n\n" +
		"    rollout ≈ ceil(N / (G × max_holders)) × T_node\n\n" +
		"For T_node = 5 minutes:\n\n| nodes | groups | max_holders | waves | rollout |\n|---:|---:|---:|---:|---:|\n")
	for _, n := range []int{100, 1000, 10000} {
		for _, gh := range [][2]int{{1, 1}, {1, 5}, {10, 1}, {10, 5}, {50, 2}} {
			waves := int(math.Ceil(float64(n) / float64(gh[0]*gh[1])))
			fmt.Fprintf(&w, "| %d | %d | %d | %d | %s |\n", n, gh[0], gh[1], waves, (time.Duration(waves) * 5 * time.Minute).String())
		}
	}
	w.WriteString("\nA node whose reboot is not yet needed or whose window is closed does not queue; windows and " +
		"max_reboots_per_day stretch a rollout over days by design. Nodes queue in the order they asked (FIFO per lock).\n")
	return w.String()
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
