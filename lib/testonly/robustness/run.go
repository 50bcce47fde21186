package robustness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/fleetlock"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// env is what a run's actors share.
type env struct {
	sc       Scenario
	ns       string
	sched    *Scheduler
	world    *World
	record   *Record
	replicas []*fleetlock.Server
}

// Report is a run's result: its schedule, what the nodes saw, etcd's
// history, and what the checker found.
type Report struct {
	Scenario Scenario
	// NS is the namespace the run used, Rules what the checker held its
	// history to.
	NS    string
	Rules Rules
	// Steps is how many requests were granted.
	Steps    int
	Trace    *Trace
	Attempts []Attempt
	Takes    []Take
	Events   []Event
	// Violations are the invariants the history breaks; Stats what it
	// exercised.
	Violations []Violation
	Stats      Stats
	// Err, when set, ended the run early: the nodes were stuck, or the
	// harness failed.
	Err error
}

// Failed reports whether the run found anything.
func (r *Report) Failed() bool { return r.Err != nil || len(r.Violations) > 0 }

// shared are the names that more than one machine runs under.
func shared(names []string) map[string]bool {
	seen, out := map[string]bool{}, map[string]bool{}
	for _, n := range names {
		out[n] = out[n] || seen[n]
		seen[n] = true
	}
	return out
}

// runLimits bound every run: far above what a scenario of Generate needs.
func runLimits() Limits { return Limits{Steps: 20000, Quiet: 2 * time.Minute} }

// Run runs scenario sc against the etcd at endpoint in namespace ns (which
// must be empty and end in "/"), reads etcd's history of it, and checks it.
// An error is the harness's own failure (etcd unreachable); what the run
// finds is in the Report.
func Run(ctx context.Context, endpoint, ns string, sc Scenario) (*Report, error) {
	control, err := newClient(endpoint, nil)
	if err != nil {
		return nil, err
	}
	defer control.Close()
	first, err := control.Get(ctx, ns+"~start")
	if err != nil {
		return nil, fmt.Errorf("robustness: reading the revision before the run: %w", err)
	}
	var names []string
	for _, n := range sc.Nodes {
		names = append(names, n.Name)
	}
	world := NewWorld(control, ns, first.Header.Revision, sc.Faults, uniq(names))
	world.MarkDirs = sc.markDirs(ns)
	world.shared = shared(names)
	e := &env{sc: sc, ns: ns, world: world, record: &Record{}}
	e.sched = NewScheduler(sc.Seed, world, e.record, runLimits())
	scripts, clients, err := e.cast(endpoint)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range scripts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer e.sched.Done(s.actor)
			s.actor.Yield("starts")
			s.run(rctx)
		}()
	}
	runErr := e.sched.Run(rctx)
	if runErr != nil {
		cancel()
		e.sched.Stop()
	}
	wg.Wait()
	rep := &Report{Scenario: sc, NS: ns, Rules: e.rules(), Steps: e.sched.Steps(), Trace: e.sched.Trace(), Attempts: e.record.Attempts(), Takes: e.record.Takes(), Err: runErr}
	end := ns + "~end"
	if _, err := control.Put(ctx, end, ""); err != nil {
		return nil, fmt.Errorf("robustness: marking the end of the history: %w", err)
	}
	rep.Events, err = ReadHistory(ctx, control, ns, first.Header.Revision+1, end)
	if err != nil {
		return nil, err
	}
	if err := world.clean(ctx); err != nil {
		return nil, err
	}
	rep.Violations, rep.Stats = Check(rep.Rules, rep.Events, rep.Attempts, rep.Takes)
	return rep, nil
}

// script is one actor and what it does.
type script struct {
	actor *Actor
	run   func(context.Context)
}

// cast makes the actors of the scenario, each with its own client (the
// FleetLock clients go through the replicas' clients).
func (e *env) cast(endpoint string) ([]script, []*clientv3.Client, error) {
	var clients []*clientv3.Client
	client := func() (*clientv3.Client, error) {
		c, err := newClient(endpoint, e.sched.intercept)
		if err == nil {
			clients = append(clients, c)
		}
		return c, err
	}
	sc := e.sc
	for i := range sc.Replicas {
		c, err := client()
		if err != nil {
			return nil, clients, err
		}
		cfg := sc.config(e.ns, NodeSpec{Name: fmt.Sprintf("fleetlock-%d", i+1)})
		e.replicas = append(e.replicas, &fleetlock.Server{Client: c, Config: cfg, SeatTimeout: time.Hour,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: sc.skew(NodeSpec{Skew: time.Duration(i) * 3 * time.Minute})})
	}
	var out []script
	for i, spec := range sc.Nodes {
		rng := rand.New(rand.NewPCG(sc.Seed, uint64(i+1)))
		name := fmt.Sprintf("%s/%s", spec.Name, spec.Kind)
		if spec.Machine != "m-"+spec.Name && spec.Kind != KindPlain {
			name = fmt.Sprintf("%s/%s(%s)", spec.Name, spec.Kind, spec.Machine)
		}
		a := e.sched.NewActor(name, spec.Name)
		switch spec.Kind {
		case KindDaemon, KindPipeline:
			c, err := client()
			if err != nil {
				return nil, clients, err
			}
			n := &candidate{env: e, spec: spec, a: a, c: c, rng: rng, cfg: sc.config(e.ns, spec), now: sc.skew(spec)}
			out = append(out, script{a, n.run})
		case KindFleetLock:
			n := &fleetClient{env: e, spec: spec, a: a, rng: rng}
			out = append(out, script{a, n.run})
			if spec.Resend && sc.Replicas > 1 {
				r := e.sched.NewActor(spec.Name+"/resend", spec.Name)
				out = append(out, script{r, func(ctx context.Context) { n.resend(ctx, r) }})
			}
		case KindPlain:
			c, err := client()
			if err != nil {
				return nil, clients, err
			}
			n := &plainHold{env: e, spec: spec, a: a, c: c, cfg: sc.config(e.ns, spec), now: sc.skew(spec)}
			out = append(out, script{a, n.run})
		}
	}
	if sc.Operator {
		c, err := client()
		if err != nil {
			return nil, clients, err
		}
		a := e.sched.NewActor("operator", "")
		cfg := sc.config(e.ns, NodeSpec{Name: "operator"})
		f := slot.FromConfig(c, cfg, "boot-operator", "m-operator", slot.ViaDaemon)
		f.Now = sc.skew(NodeSpec{Skew: -7 * time.Minute})
		o := &operator{env: e, a: a, c: c, rng: rand.New(rand.NewPCG(sc.Seed, 0x0b)), fleet: f, times: sc.OperatorActions, groupOf: map[string]string{}, haltedGroups: sc.HaltedGroups}
		for _, n := range sc.Nodes {
			o.groupOf[n.Name] = n.Group
		}
		out = append(out, script{a, o.run})
	}
	return out, clients, nil
}

// rules are what the checker holds the history to.
func (e *env) rules() Rules {
	return Rules{NS: e.ns, Lock: e.ns + "lock", MaxHolders: e.sc.MaxHolders, MaxTotal: e.sc.MaxTotal,
		HoldersPct: e.sc.HoldersPct, TotalPct: e.sc.TotalPct, MaxFailures: e.sc.MaxFailures, GroupScope: e.sc.Scope == config.ScopeGroup, Policy: e.sc.policyRules(), Paced: e.sc.Paced, Rate: e.sc.Rate}
}

// newClient connects to endpoint; with intercept, every unary request goes
// through it.
func newClient(endpoint string, intercept grpc.UnaryClientInterceptor) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()}
	if intercept != nil {
		cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(intercept)}
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("robustness: connecting to etcd at %s: %w", endpoint, err)
	}
	return c, nil
}

// intercept is the scheduler's unary interceptor: a request made in an
// actor's context waits for the actor's turn, and the faults drawn around
// it run before and after it.
func (s *Scheduler) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	a := actorOf(ctx)
	if a == nil || a.sched != s {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	if atRevision(req) {
		err := invoker(ctx, method, req, reply, cc, opts...)
		s.waits(a, req, reply, err)
		return err
	}
	r := request{method: method, req: req}
	scheduled := s.park(a, r)
	err := invoker(ctx, method, req, reply, cc, opts...)
	if scheduled {
		s.finished(a, r, reply, err)
	}
	return err
}

// atRevision reports whether req only reads at a fixed revision: it reads
// what that revision holds whenever it runs (etcd is not compacted during a
// run), so it commutes with every other request and is no point of the
// schedule; a fault drawn after it acts as one drawn before the actor's
// next request. lib/slot sends several at once (Fleet.fleetCounts), which
// an actor's one turn at a time could not grant.
func atRevision(req any) bool {
	switch q := req.(type) {
	case *pb.RangeRequest:
		return q.Revision > 0
	case *pb.TxnRequest:
		if len(q.Compare) > 0 || len(q.Failure) > 0 || len(q.Success) == 0 {
			return false
		}
		for _, op := range q.Success {
			if r := op.GetRequestRange(); r == nil || r.Revision <= 0 {
				return false
			}
		}
		return true
	}
	return false
}

// ReadHistory reads every change under ns from revision from on, with the
// previous values, until the put of end.
func ReadHistory(ctx context.Context, c *clientv3.Client, ns string, from int64, end string) ([]Event, error) {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var events []Event
	for wr := range c.Watch(wctx, ns, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithPrevKV()) {
		if err := wr.Err(); err != nil {
			return nil, fmt.Errorf("robustness: reading etcd's history of %s from revision %d: %w (was etcd compacted during the run?)", ns, from, err)
		}
		for _, ev := range wr.Events {
			if string(ev.Kv.Key) == end {
				return events, nil
			}
			events = append(events, eventOf(ev))
		}
	}
	return nil, errors.New("robustness: the watch of etcd's history ended before the run's end: " + ns)
}

func uniq(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return sortedNames(out)
}

// Replay is the command that runs one seed again, printing its schedule.
func Replay(seed uint64) string {
	return fmt.Sprintf("make robustness ROBUSTNESS_SEED=%d (or: ROBUSTNESS_SEED=%d go test -count=1 -run 'TestRobustness$' -v ./lib/testonly/robustness/)", seed, seed)
}

// Summary is a report's account in a few lines: the seed, the scenario,
// what was found and how to replay it.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d steps; %s\n", r.Scenario.Seed, r.Steps, r.Scenario)
	if r.Err != nil {
		fmt.Fprintf(&b, "the run ended early: %v\n", r.Err)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "%s\n", v)
	}
	if r.Failed() {
		fmt.Fprintf(&b, "replay: %s\n", Replay(r.Scenario.Seed))
	}
	return b.String()
}
