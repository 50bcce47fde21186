package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/cluster"
	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/version"
)

// The phases of a node whose etcd cost bench-scale measures (issue 32).
const (
	phaseIdle    = "idle"
	phaseClosed  = "needs a reboot, window closed"
	phaseBlocked = "blocked before the lock"
	phaseWaiting = "waiting in line"
	phasePost    = "post-reboot"
	phaseHolding = "holding: the admission"
	// phaseFirstAdmission is the first admission of a process whose rules
	// cache is empty (lib/slot RulesCache): it reads every rules key once.
	phaseFirstAdmission = "holding: the first admission, rules cache empty"
	// phaseHoldingPolicy is the admission of a node with a built-in
	// policy (min_healthy_fraction): its summary's healthy counts.
	phaseHoldingPolicy = "holding: the admission with a policy"
	// phaseHoldingPercent is the admission of a node whose max_holders is
	// a percentage: the scopes' sizes, counted in the index's group keys.
	phaseHoldingPercent = "holding: the admission with a percentage"
	// phaseHoldingWave is the admission of a node of wave 1 once wave 0
	// is done: the lower waves' busy keys (none), and the counts that
	// tell the index is whole.
	phaseHoldingWave = "holding: the admission of a later wave"
)

// phaseResult is one phase of one simulated fleet, measured over one
// interval (or, for the admission, over a few admissions).
type phaseResult struct {
	phase string
	// nodes is the fleet's size; publishers the nodes of it that ran
	// (the rest are records kept alive: fleetSim.bulk).
	nodes      int
	publishers int
	tls        bool
	interval   time.Duration
	ops        int // publications, or admissions
	failures   int
	latencyMS  []float64
	took       time.Duration
	served     served
	etcdCPU    float64 // % of one CPU, all members
	etcdRSS    float64 // MiB, all members, after the phase
	// perOp: the figures are per admission (one node holds at a time),
	// not per node and minute.
	perOp bool
}

// perNodeMinute is x per node and minute of the measured interval.
func (r phaseResult) perNodeMinute(x float64) float64 {
	return x / float64(max(1, r.publishers)) / r.took.Minutes()
}

// applyMS is the time the slowest member spent applying the write
// transactions of the phase, per admission, in ms: while etcd applies one
// it applies nothing else (its apply loop is serial), so this is how long
// each admission held up every write of the cluster.
func (r phaseResult) applyMS() float64 { return r.perOpOf(r.served.slowestApply()) * 1000 }

// perOpOf is x per admission.
func (r phaseResult) perOpOf(x float64) float64 { return x / float64(max(1, r.ops)) }

// behind reports a publication round that could not keep its schedule on
// this machine: fewer than 90 % of the scheduled publications per second.
func (r phaseResult) behind() bool {
	return !r.perOp && float64(r.ops)/r.took.Seconds() < 0.9*float64(r.publishers)/r.interval.Seconds()
}

// fleetFacts are what etcd held for a fleet of one size.
type fleetFacts struct {
	nodes               int
	keys                int64
	leases              int
	dbBytes             int64
	recordBytes         int
	etcdRSS, etcdRSSBas float64
}

// fleetSim is n simulated nodes, each with its own configuration, that
// publish through the real `crd-lock step publish` code, in a fleet of
// fleet nodes: the other fleet-n nodes (the bulk) are records, index keys
// and rules keys as publish writes them, kept alive on a shared lease but
// not publishing (this machine cannot run 100,000 publishers beside three
// etcd members). They are what an admission or a summary meets in etcd.
type fleetSim struct {
	b        *bench
	c        *clientv3.Client
	n        int
	fleet    int
	interval time.Duration
	ns       string
	cfgs     []config.Config
	first    config.Config
	tls      bool
	// lastErr is the first failed publication's error of the last round.
	lastErr string
}

func (b *bench) newFleetSim(c *clientv3.Client, fleet, n int, interval time.Duration, tls bool) (*fleetSim, error) {
	s := &fleetSim{b: b, c: c, n: n, fleet: fleet, interval: interval, tls: tls, ns: fmt.Sprintf("/bench/scale-%d/", fleet)}
	if tls {
		s.ns = fmt.Sprintf("/bench/scale-tls-%d/", fleet)
	}
	for i := range n {
		cfg := config.Default()
		cfg.NodeName = fmt.Sprintf("node-%05d", i)
		cfg.EtcdEndpoints = b.endpoints()
		cfg.LockKey = s.ns + "lock"
		cfg.HealthPublishIntervalSec = int(interval / time.Second)
		cfg.RunDir = filepath.Join(b.work, "scale", filepath.Base(s.ns), cfg.NodeName)
		cfg.StateDir = cfg.RunDir
		if certs := b.cluster.certs; certs != nil {
			cfg.EtcdTLS = config.TLS{Enabled: true, CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
		}
		if i == 0 {
			s.first = cfg
		}
		s.cfgs = append(s.cfgs, cfg)
	}
	return s, nil
}

// publication is what the daemon publishes every interval in a phase.
func publication(phase string, now time.Time) protocol.PublishArgs {
	since := now.Add(-time.Hour)
	switch phase {
	case phaseClosed:
		// The window is closed: no pre-lock check runs, so no summary.
		return protocol.PublishArgs{State: policy.StateBlocked, RebootRequired: true, LastCheck: now, RequiredSince: since,
			Detail: "outside_window: the maintenance window is closed", BlockedSince: since, BlockedReason: "outside_window"}
	case phaseBlocked:
		// The health script or a policy says no: the pre-lock checks read
		// the summary once per interval.
		return protocol.PublishArgs{State: policy.StateBlocked, RebootRequired: true, LastCheck: now, RequiredSince: since, ReadSummary: true,
			Detail: "health_blocked: health_script exited 1", BlockedSince: since, BlockedReason: "health_blocked"}
	case phaseWaiting:
		return protocol.PublishArgs{State: policy.StateWaiting, RebootRequired: true, LastCheck: now, RequiredSince: since}
	case phasePost:
		// Back from the reboot: the post-reboot gate reads the summary.
		return protocol.PublishArgs{State: policy.StatePostReboot, LastCheck: now, ReadSummary: true}
	}
	return protocol.PublishArgs{State: policy.StateIdle, LastCheck: now}
}

// inFlight bounds the publications running at once: on a loaded machine
// an unbounded simulation piles up clients until they all time out; bounded,
// it falls behind its schedule instead, and says so (phaseResult.behind).
const inFlight = 64

// round has every node publish once, spread evenly over span, and returns
// the publications, failures and latencies. The first failure's error is
// kept in s.lastErr.
func (s *fleetSim) round(ctx context.Context, args protocol.PublishArgs, span time.Duration) (ops, failures int, latencyMS []float64) {
	argv := []string{protocol.StepPublish}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, inFlight)
	start := time.Now()
	for i := range s.n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * span / time.Duration(s.n))))
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var errOut bytes.Buffer
			t0 := time.Now()
			// The request the daemon writes: encoded per publication, as
			// the daemon does.
			req, err := protocol.NewRequest(protocol.StepPublish, args, &s.cfgs[i])
			var in []byte
			if err == nil {
				in, err = req.Encode()
			}
			if err == nil {
				err = cluster.RunStep(ctx, argv, bytes.NewReader(in), io.Discard, &errOut)
			}
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			ops++
			if err != nil {
				if failures == 0 {
					s.lastErr = fmt.Sprintf("%v (%s)", err, lastLine(errOut.String()))
				}
				failures++
				return
			}
			latencyMS = append(latencyMS, ms(d))
		}()
	}
	time.Sleep(time.Until(start.Add(span)))
	wg.Wait()
	return ops, failures, latencyMS
}

// lastLine is the last non-empty line of a step's stderr.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// measure runs f and records what etcd served, its CPU and its memory.
func (s *fleetSim) measure(phase string, f func() (ops, failures int, latencyMS []float64, err error)) (phaseResult, error) {
	r := phaseResult{phase: phase, nodes: s.fleet, publishers: s.n, tls: s.tls, interval: s.interval}
	_, cpu0 := s.b.cluster.usage()
	s0, err := s.b.cluster.scrape()
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	r.ops, r.failures, r.latencyMS, err = f()
	if err != nil {
		return r, err
	}
	r.took = time.Since(t0)
	s1, err := s.b.cluster.scrape()
	if err != nil {
		return r, err
	}
	r.served = s1.minus(s0)
	var cpu1 int64
	r.etcdRSS, cpu1 = s.b.cluster.usage()
	r.etcdCPU = float64(cpu1-cpu0) / clkTck() / r.took.Seconds() * 100
	return r, nil
}

// publishPhase measures one interval of every node publishing as in phase.
func (s *fleetSim) publishPhase(ctx context.Context, phase string) (phaseResult, error) {
	args := publication(phase, time.Now())
	return s.measure(phase, func() (int, int, []float64, error) {
		ops, failures, lat := s.round(ctx, args, s.interval)
		return ops, failures, lat, nil
	})
}

// lineClients is how many etcd clients the waiting nodes share: a real
// node's cycle child has a connection of its own, which this machine
// could not hold 10,000 times over; requests and watches are per node
// all the same (one lease, one entry, its own watches and re-checks).
const lineClients = 32

// queueLimit is how long queuing n nodes may take: ten times the 1,000-node
// queue's pace on this kind of machine, and at least a minute.
func queueLimit(n int) time.Duration {
	return max(time.Minute, time.Duration(n)*10*time.Second/560)
}

// errNotQueued: this machine could not queue the whole fleet in time (a
// limit of the machine, not a result): the phase is left out of the
// document with a warning, and the run goes on.
var errNotQueued = errors.New("the phase is not measured")

// waitingPhase queues every node on the lock through lib/lock with the
// daemon's own lock options (lock.FromConfig), node 0 holding, and measures
// one interval of the line's steady state (lease keepalives, watches, the
// re-checks every lock.Recheck) together with each node's publication of
// its waiting state.
func (s *fleetSim) waitingPhase(ctx context.Context) (phaseResult, error) {
	var cs []*clientv3.Client
	for range lineClients {
		c, err := s.b.cluster.client()
		if err != nil {
			return phaseResult{}, err
		}
		defer c.Close()
		cs = append(cs, c)
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := func(i int) lock.Options {
		cfg := s.first
		cfg.NodeName = fmt.Sprintf("node-%05d", i)
		o := lock.FromConfig(cfg, fmt.Sprintf("bench-boot-%05d", i), "")
		o.Purpose = "reboot"
		return o
	}
	holder, err := lock.Acquire(lctx, cs[0], opts(0))
	if err != nil {
		return phaseResult{}, fmt.Errorf("waiting: node 0: %w", err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer rcancel()
		_ = holder.Release(rctx)
	}()
	var queued, done sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 16)
	// The limit covers the whole queueing, its first nodes' too: with etcd
	// overloaded (leader elections on a loaded machine) the nodes queue
	// one by one, and waiting for a free place of sem alone took hours.
	limit := time.NewTimer(queueLimit(s.n))
	defer limit.Stop()
	timedOut := false
launch:
	for i := 1; i < s.n; i++ {
		select {
		case sem <- struct{}{}:
		case <-limit.C:
			timedOut = true
			break launch
		}
		queued.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			var once sync.Once
			signal := func() { once.Do(func() { <-sem; queued.Done() }) }
			defer signal()
			o := opts(i)
			o.OnQueued = func(int) { signal() }
			h, err := lock.Acquire(lctx, cs[i%lineClients], o)
			if err == nil {
				errMu.Lock()
				firstErr = fmt.Errorf("waiting: node %d acquired the lock while node 0 held it", i)
				errMu.Unlock()
				rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer rcancel()
				_ = h.Release(rctx)
			}
		}()
	}
	allQueued := make(chan struct{})
	go func() { queued.Wait(); close(allQueued) }()
	if !timedOut {
		select {
		case <-allQueued:
		case <-limit.C:
			timedOut = true
		}
	}
	if timedOut {
		// On a loaded machine waiters whose leases ran out re-queue for
		// ever; say so rather than wait.
		cancel()
		done.Wait()
		return phaseResult{}, fmt.Errorf("waiting: %d nodes were not all queued within %s on this machine: %w", s.n, queueLimit(s.n), errNotQueued)
	}
	time.Sleep(2 * time.Second) // the last watches open
	r, err := s.measure(phaseWaiting, func() (int, int, []float64, error) {
		ops, failures, lat := s.round(ctx, publication(phaseWaiting, time.Now()), s.interval)
		return ops, failures, lat, nil
	})
	cancel()
	done.Wait()
	if firstErr != nil {
		return r, firstErr
	}
	return r, err
}

// holdingPhase measures the admission under the lock (lib/slot: Count,
// Decide, the slot's take) of one node holding the lock seat, with the
// whole fleet's records in etcd: first one admission with an empty rules
// cache (what a process meets after the fleet's rules keys changed), then
// runs admissions one after another, each slot freed (its leases revoked)
// before the next, then runs more by a node with a built-in policy, runs
// with a percentage, and, once the publishing nodes (wave 0) have
// completed, runs as a node of wave 1.
func (s *fleetSim) holdingPhase(ctx context.Context, runs int) ([]phaseResult, error) {
	c, err := s.b.cluster.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// node 0's record was published from this machine: the admission is
	// its own, with this machine's ids.
	bootID, err := reboot.BootID("/")
	if err != nil {
		return nil, err
	}
	machineID := reboot.MachineID("/")
	cfg := s.first
	o := lock.FromConfig(cfg, bootID, machineID)
	o.Purpose, o.Candidate = "reboot", true
	seat, err := lock.Acquire(ctx, c, o)
	if err != nil {
		return nil, fmt.Errorf("holding: %w", err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer rcancel()
		_ = seat.Release(rctx)
	}()
	_ = os.Remove(filepath.Join(cfg.RunDir, slot.RulesCacheFile))
	// A health script, as every deployment has one (without one the gate
	// blocks every reboot): the admission counts the fleet's records for
	// its CLUSTER_SIZE. With a policy it also counts the members' index.
	cfg.HealthScript = "/bin/true"
	fleet := slot.FromConfig(c, cfg, bootID, machineID, slot.ViaDaemon)
	withPolicy := fleet
	withPolicy.Policies = config.Policies{MinHealthyFraction: 0.5}
	withPercent := fleet
	withPercent.Rules.MaxHolders = config.Budget{Percent: 10}
	withWave := fleet
	withWave.Wave = 1
	admit := func(fleet slot.Fleet, runs int) (int, int, []float64, error) {
		var lat []float64
		failures := 0
		for range runs {
			// As the daemon's cycle and the pipeline admit: the node-local
			// checks (Recheck) on the first count that admits, with the
			// fleet's size for the health script, then a count again and
			// the take. The checks themselves touch no etcd: left out.
			a := slot.Admission{Fleet: fleet, Seat: seat, Recheck: func(context.Context, slot.Count, slotinfo.Verdict) error { return nil }}
			t0 := time.Now()
			out, err := a.Admit(ctx)
			d := time.Since(t0)
			if err != nil || out.Reboot == nil {
				failures++
				s.b.warnf("holding, %d nodes: the admission took no slot: %v", s.fleet, err)
				continue
			}
			lat = append(lat, ms(d))
			l := out.Reboot.Leases
			for _, id := range []clientv3.LeaseID{l.Slot, l.Inflight, l.Start, l.Paced, l.Failure} {
				if id != 0 {
					_, _ = c.Revoke(ctx, id)
				}
			}
		}
		return runs, failures, lat, nil
	}
	// The publishing nodes come to the admission from the post-reboot
	// phase: busy in wave 0 until they complete. A later wave is admitted
	// once they have (an idle round, not measured: the publications are
	// the idle phase's).
	waveDone := func() {
		if _, failures, _ := s.round(ctx, publication(phaseIdle, time.Now()), s.interval/3); failures > 0 {
			s.b.warnf("holding, %d nodes: %d nodes failed to publish wave 0's completion, the first with: %s", s.fleet, failures, s.lastErr)
		}
	}
	var out []phaseResult
	for _, m := range []struct {
		phase  string
		fleet  slot.Fleet
		runs   int
		before func()
	}{{phaseFirstAdmission, fleet, 1, nil}, {phaseHolding, fleet, runs, nil}, {phaseHoldingPolicy, withPolicy, runs, nil}, {phaseHoldingPercent, withPercent, runs, nil}, {phaseHoldingWave, withWave, runs, waveDone}} {
		if m.before != nil {
			m.before()
		}
		r, err := s.measure(m.phase, func() (int, int, []float64, error) { return admit(m.fleet, m.runs) })
		r.perOp = true
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// bulkPerTxn is how many bulk nodes one transaction writes (etcd's
// --max-txn-ops is 128 by default; a node is six operations).
const bulkPerTxn = 16

// writeBulk writes the records, index keys and rules keys of the nodes
// that do not publish (node s.n to s.fleet-1), as publish writes them for
// an idle node, on one lease kept alive until ctx ends (and a rules lease
// of a week, as publish's): an admission and a summary find what they
// would in a fleet of s.fleet nodes.
func (s *fleetSim) writeBulk(ctx context.Context) error {
	if s.fleet <= s.n {
		return nil
	}
	lease, err := s.c.Grant(ctx, int64(3*s.interval/time.Second))
	if err != nil {
		return err
	}
	ka, err := s.c.KeepAlive(ctx, lease.ID)
	if err != nil {
		return err
	}
	go func() {
		for range ka {
		}
	}()
	rules, err := s.c.Grant(ctx, int64(slot.RulesLeaseTTL/time.Second))
	if err != nil {
		return err
	}
	cfg := s.first
	now := time.Now().UTC()
	var ops []clientv3.Op
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		_, err := s.c.Txn(ctx).Then(append(ops, rulesChanged(s.ns))...).Commit()
		ops = ops[:0]
		return err
	}
	for i := s.n; i < s.fleet; i++ {
		node := fmt.Sprintf("node-%05d", i)
		rec := policy.NodeRecord{V: policy.ProtocolVersion, Node: node, State: policy.StateIdle, LastCheck: now,
			Version: version.Get().Version, Lock: strings.TrimSuffix(cfg.LockKey, "/"),
			BootID: fmt.Sprintf("bench-boot-%05d", i), MachineID: fmt.Sprintf("bench-machine-%05d", i),
			Rules: ptr(policy.RulesOf(cfg))}
		ops = append(ops, recordOps(s.ns, cfg.Group, rec, lease.ID, rules.ID)...)
		if (i-s.n+1)%bulkPerTxn == 0 {
			if err := flush(); err != nil {
				return fmt.Errorf("writing the bulk fleet: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("writing the bulk fleet: %w", err)
	}
	return nil
}

// rulesChanged is the write of slot.RulesChangedKey that goes with rules
// keys written by recordOps.
func rulesChanged(ns string) clientv3.Op { return clientv3.OpPut(slot.RulesChangedKey(ns), "crdbench") }

func ptr[T any](v T) *T { return &v }

// recordOps are what publish writes for rec (driver/cluster publish): the
// health record and its index keys (its group key too, which publish
// writes in a request of its own) on lease, the rules key on rulesLease
// (rec.Rules must be set). The transaction that carries them also writes
// slot.RulesChangedKey, once (rulesChanged).
func recordOps(ns, group string, rec policy.NodeRecord, lease, rulesLease clientv3.LeaseID) []clientv3.Op {
	val, _ := json.Marshal(rec)
	ops := []clientv3.Op{clientv3.OpPut(slot.RecordKey(ns, rec.Node), string(val), clientv3.WithLease(lease))}
	ops = append(ops, append(slot.IndexOps(ns, rec.Node, rec.State, lease), slot.GroupOp(ns, group, rec.Node, lease))...)
	ops = append(ops, slot.BusyOps(ns, rec, nil, lease)...)
	return append(ops, clientv3.OpPut(slot.RulesKey(ns, rec.Node), slot.RulesValue(group, *rec.Rules), clientv3.WithLease(rulesLease)))
}

// facts reads what etcd holds for the fleet.
func (s *fleetSim) facts(ctx context.Context, rssBase float64) fleetFacts {
	f := fleetFacts{nodes: s.fleet, etcdRSSBas: rssBase}
	c := s.c
	if r, err := c.Get(ctx, s.ns, clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
		f.keys = r.Count
	}
	if r, err := c.Get(ctx, slot.RecordKey(s.ns, "node-00000")); err == nil && len(r.Kvs) > 0 {
		f.recordBytes = len(r.Kvs[0].Key) + len(r.Kvs[0].Value)
	}
	if r, err := c.Leases(ctx); err == nil {
		f.leases = len(r.Leases)
	}
	if st, err := c.Status(ctx, s.b.cluster.endpoints[0]); err == nil {
		f.dbBytes = st.DbSize
	}
	f.etcdRSS, _ = s.b.cluster.usage()
	return f
}

// simulate runs one fleet size through phases: a first round (spread over
// a third of the interval) grants the publish leases, then each phase is
// measured over one interval. The admission runs last, with every record
// in etcd; the fleet is removed at the end.
func (b *bench) simulate(ctx context.Context, c *clientv3.Client, n, publishers int, interval time.Duration, phases []string, admissions int, rssBase float64) ([]phaseResult, fleetFacts, error) {
	s, err := b.newFleetSim(c, n, min(n, publishers), interval, b.cluster.certs != nil)
	if err != nil {
		return nil, fleetFacts{}, err
	}
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	if err := s.writeBulk(bctx); err != nil {
		return nil, fleetFacts{}, err
	}
	s.round(ctx, publication(phaseIdle, time.Now()), interval/3)
	var out []phaseResult
	var facts fleetFacts
	for _, p := range phases {
		var rs []phaseResult
		var r phaseResult
		switch p {
		case phaseWaiting:
			r, err = s.waitingPhase(ctx)
			rs = []phaseResult{r}
		case phaseHolding:
			rs, err = s.holdingPhase(ctx, admissions)
		default:
			r, err = s.publishPhase(ctx, p)
			rs = []phaseResult{r}
		}
		if errors.Is(err, errNotQueued) {
			b.warnf("%d nodes, %s: %v", n, p, err)
			continue
		}
		if err != nil {
			return out, facts, fmt.Errorf("%d nodes, %s: %w", n, p, err)
		}
		if p == phaseIdle {
			facts = s.facts(ctx, rssBase)
		}
		for _, r := range rs {
			b.printPhase(r)
			if r.failures > 0 && !r.perOp {
				b.warnf("%d nodes, %s: %d of %d publications failed, the first with: %s", n, p, r.failures, r.ops, s.lastErr)
			}
			if r.behind() {
				b.warnf("%d nodes, %s: %.1f publications/s against %.1f scheduled: this machine could not keep the schedule (per publication the figures hold; etcd's CPU is that of the rate reached)",
					n, p, float64(r.ops)/r.took.Seconds(), float64(s.n)/interval.Seconds())
			}
			out = append(out, r)
		}
	}
	return out, facts, clearFleet(ctx, c, s.ns)
}

func (b *bench) printPhase(r phaseResult) {
	tls := ""
	if r.tls {
		tls = " (TLS)"
	}
	if r.perOp {
		fmt.Printf("%5d nodes%s, %s: %d admissions (%d failed); per admission %s requests, %s sent, %s ms applying its writes (slowest member); p50 %s ms p95 %s ms; etcd %.1f MiB\n",
			r.nodes, tls, r.phase, r.ops, r.failures, num(r.perOpOf(r.served.requests)), bytesOf(r.perOpOf(r.served.sentBytes)),
			num(r.applyMS()), num(median(r.latencyMS)), num(p95(r.latencyMS)), r.etcdRSS)
		return
	}
	fmt.Printf("%5d nodes%s, %s: %d publications (%d failed) in %s; per node and minute %s requests, %s sent; etcd sent %s; p50 %s ms p95 %s ms; etcd %.1f MiB, %.1f %% CPU\n",
		r.nodes, tls, r.phase, r.ops, r.failures, r.took.Round(time.Second), num(r.perNodeMinute(r.served.requests)), size(r.perNodeMinute(r.served.sentBytes)),
		bandwidth(r.served.sentBytes/r.took.Seconds()), num(median(r.latencyMS)), num(p95(r.latencyMS)), r.etcdRSS, r.etcdCPU)
}
