package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// state is where an actor is, as the scheduler sees it.
type state int

const (
	// stateRunning: granted its turn (or just started); it runs until its
	// next request, a wait in a lock's line, or its end.
	stateRunning state = iota
	// stateParked: it waits for its turn at a request.
	stateParked
	// stateBlocked: it waits in a lock's line for an entry ahead to go
	// (lib/lock's watch); no request of its own can wake it.
	stateBlocked
	// stateWaking: an entry it waits on is gone; it will ask again.
	stateWaking
	// stateDone: its script ended.
	stateDone
)

// Actor is one simulated process: a daemon, a pipeline, a FleetLock client,
// a plain hold, the operator. Its requests to etcd carry it in their
// context (Context), and each waits for the scheduler's turn.
type Actor struct {
	// Name says who it is, e.g. "n2/daemon".
	Name string
	// Node is the node name it acts for ("" for the operator).
	Node  string
	index int
	sched *Scheduler
	grant chan struct{}

	// Guarded by sched.mu.
	state state
	next  request
	stall int
	after *Fault
	line  *lineWait
	seat  *seatRef
	// waited: it waited in a line at the last decision (its wake is noted
	// at the next, whichever way it woke).
	waited bool
	// counted is the revision of its last count (lib/slot's read of
	// everything the rules decide on).
	counted int64
}

// seatRef is the lock seat an actor holds, for the faults that freeze it.
type seatRef struct {
	entry string
	lease int64
}

// actorKey marks a context as an actor's: its requests are scheduled.
type actorKey struct{}

// Context is parent marked as a's: every unary request made in it (or in a
// context derived from it) waits for a's turn. Requests in other contexts
// (a library's fresh context.Background, a background goroutine) go straight
// through: made by a running actor, they still run one at a time.
func (a *Actor) Context(parent context.Context) context.Context {
	return context.WithValue(parent, actorKey{}, a)
}

func actorOf(ctx context.Context) *Actor {
	a, _ := ctx.Value(actorKey{}).(*Actor)
	return a
}

// Yield is a step of a's own that is no request (a hook runs, a machine is
// down, a hold's command runs): the other actors may go first.
func (a *Actor) Yield(what string) {
	r := request{label: what}
	if a.sched.park(a, r) {
		a.sched.finished(a, r, nil, nil)
	}
}

// Holding records the lock seat a holds (entry "" when none), for the
// faults that freeze it.
func (a *Actor) Holding(entry string, lease int64) {
	a.sched.mu.Lock()
	defer a.sched.mu.Unlock()
	if entry == "" {
		a.seat = nil
		return
	}
	a.seat = &seatRef{entry: entry, lease: lease}
}

// Limits bound a run, so that a harness defect ends it with a message
// rather than hanging a test.
type Limits struct {
	// Steps is the most requests a run may grant.
	Steps int
	// Quiet is how long the running actor may run without a request, a
	// wait or an end (wall clock: only a harness defect reaches it).
	Quiet time.Duration
}

// Scheduler grants the actors' requests one at a time, in an order drawn
// from its seeded generator, and runs the faults it draws before and after
// them.
type Scheduler struct {
	rng    *rand.Rand
	world  *World
	record *Record
	limits Limits
	poke   chan struct{}
	trace  *Trace

	mu     sync.Mutex
	actors []*Actor
	steps  int
	// free: the run was stopped; requests go through unscheduled.
	free bool
}

// NewScheduler draws from seed, runs faults in world and records the takes
// in record.
func NewScheduler(seed uint64, world *World, record *Record, limits Limits) *Scheduler {
	return &Scheduler{rng: rand.New(rand.NewPCG(seed, 0x5eed)), world: world, record: record, limits: limits,
		poke: make(chan struct{}, 1), trace: &Trace{ns: world.NS}}
}

// NewActor adds an actor. Its goroutine must take its first step (Yield)
// before anything else: until then the scheduler waits for it.
func (s *Scheduler) NewActor(name, node string) *Actor {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &Actor{Name: name, Node: node, index: len(s.actors), sched: s, grant: make(chan struct{}, 1)}
	s.actors = append(s.actors, a)
	return a
}

// Trace is the schedule so far.
func (s *Scheduler) Trace() *Trace { return s.trace }

// Steps is how many steps were granted.
func (s *Scheduler) Steps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.steps
}

func (s *Scheduler) wake() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// park waits for a's turn at r; false when the run was stopped (r then runs
// unscheduled).
func (s *Scheduler) park(a *Actor, r request) bool {
	s.mu.Lock()
	if s.free {
		s.mu.Unlock()
		return false
	}
	a.state, a.next, a.line = stateParked, r, nil
	s.mu.Unlock()
	s.wake()
	<-a.grant
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.free
}

// finished records r's outcome, runs the fault drawn to follow it, and
// notes a wait in a lock's line that r's answer begins.
func (s *Scheduler) finished(a *Actor, r request, reply any, err error) {
	s.mu.Lock()
	after := a.after
	a.after = nil
	s.trace.outcome(a, r, reply, err, s.world.names)
	if q, ok := r.req.(*pb.TxnRequest); ok && err == nil {
		resp := reply.(*pb.TxnResponse)
		switch txnKind(s.world.NS, q) {
		case txnCount:
			a.counted = resp.Header.GetRevision()
		case txnTake:
			if resp.Succeeded {
				s.record.take(Take{Actor: a.Name, Node: a.Node, Count: a.counted, Revision: resp.Header.GetRevision()})
			}
		}
	}
	s.mu.Unlock()
	if after != nil {
		s.world.run(a, *after, s.trace)
	}
	s.waits(a, r.req, reply, err)
}

// waits notes a wait in a lock's line that the answer to req begins (for
// a request that was no point of the schedule too: lib/lock reads its
// line's values at a revision).
func (s *Scheduler) waits(a *Actor, req, reply any, err error) {
	if w := lockWait(req, reply, err); w != nil {
		s.mu.Lock()
		if a.state == stateRunning {
			a.state, a.line, a.waited = stateBlocked, w, true
			s.trace.note(a, "waits in line "+s.world.names.key(w.entry)+" for "+s.world.names.keys(w.ahead))
		}
		s.mu.Unlock()
		s.wake()
	}
}

// Done ends a's script.
func (s *Scheduler) Done(a *Actor) {
	s.mu.Lock()
	a.state, a.seat = stateDone, nil
	s.mu.Unlock()
	s.wake()
}

// Stop lets every actor run on unscheduled (the run ended early: its
// context is cancelled, and the actors end).
func (s *Scheduler) Stop() {
	s.mu.Lock()
	s.free = true
	for _, a := range s.actors {
		if a.state == stateParked {
			a.state = stateRunning
			a.grant <- struct{}{}
		}
	}
	s.mu.Unlock()
}

// Run grants turns until every actor is done. It returns an error when the
// actors are stuck: all wait in a lock's line with nobody to leave it
// (a liveness defect), a run exceeds its steps, or an actor stays busy
// without a request (a harness defect).
func (s *Scheduler) Run(ctx context.Context) error {
	for {
		if err := s.quiesce(ctx); err != nil {
			return err
		}
		woke, err := s.wakeWaiters(ctx)
		if err != nil {
			return err
		}
		if woke {
			continue
		}
		s.mu.Lock()
		s.noteWakes()
		var parked, blocked []*Actor
		for _, a := range s.actors {
			switch a.state {
			case stateParked:
				parked = append(parked, a)
			case stateBlocked:
				blocked = append(blocked, a)
			}
		}
		if len(parked) == 0 {
			s.mu.Unlock()
			if len(blocked) > 0 {
				return s.stuck(blocked)
			}
			return nil
		}
		if s.steps >= s.limits.Steps {
			s.mu.Unlock()
			return fmt.Errorf("robustness: the schedule did not end within %d steps (raise Limits.Steps, or a node loops)", s.limits.Steps)
		}
		a := s.pick(parked)
		before, after := s.world.draw(s.rng, a, a.next, len(parked) > 1)
		if before != nil && before.Kind == FaultStall {
			// Delayed: the others go first for a while.
			a.stall = before.Steps
			s.trace.fault(*before, fmt.Sprintf("%s is delayed for %d steps", a.Name, before.Steps))
			s.mu.Unlock()
			continue
		}
		s.steps++
		a.after = after
		s.trace.step(s.steps, a, a.next, s.world.names)
		s.mu.Unlock()
		if before != nil {
			s.world.run(a, *before, s.trace)
		}
		s.mu.Lock()
		a.state = stateRunning
		s.mu.Unlock()
		a.grant <- struct{}{}
	}
}

// pick draws the next actor among the parked ones, leaving out the stalled
// ones while another can go. Called with s.mu held.
func (s *Scheduler) pick(parked []*Actor) *Actor {
	var ready []*Actor
	for _, a := range parked {
		if a.stall == 0 {
			ready = append(ready, a)
		}
	}
	if len(ready) == 0 {
		ready = parked
	}
	a := ready[s.rng.IntN(len(ready))]
	for _, b := range s.actors {
		if b.stall > 0 {
			b.stall--
		}
	}
	a.stall = 0
	return a
}

// quiesce waits until no actor runs (each parked, blocked, or done).
func (s *Scheduler) quiesce(ctx context.Context) error {
	t := time.NewTimer(s.limits.Quiet)
	defer t.Stop()
	for {
		s.mu.Lock()
		var busy *Actor
		for _, a := range s.actors {
			if a.state == stateRunning || a.state == stateWaking {
				busy = a
				break
			}
		}
		s.mu.Unlock()
		if busy == nil {
			return nil
		}
		select {
		case <-s.poke:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return fmt.Errorf("robustness: %s made no etcd request and did not end within %s: it waits on something the scheduler does not model (a harness defect: see lib/testonly/robustness/linewait.go)", busy.Name, s.limits.Quiet)
		}
	}
}

// wakeWaiters marks the actors waiting in a lock's line whose watched
// entries are gone: they will ask again (lib/lock's watch tells them, maybe
// before this look: either way they ask before the next decision).
func (s *Scheduler) wakeWaiters(ctx context.Context) (bool, error) {
	type waiting struct {
		a    *Actor
		keys []string
	}
	s.mu.Lock()
	var ws []waiting
	for _, a := range s.actors {
		if a.state == stateBlocked {
			ws = append(ws, waiting{a, append([]string{a.line.entry}, a.line.ahead...)})
		}
	}
	s.mu.Unlock()
	woke := false
	for _, w := range ws {
		gone, err := s.world.anyGone(ctx, w.keys)
		if err != nil {
			return false, err
		}
		if gone {
			s.mu.Lock()
			if w.a.state == stateBlocked {
				w.a.state = stateWaking
				woke = true
			}
			s.mu.Unlock()
		}
	}
	return woke, nil
}

// noteWakes notes, in the actors' order, those that waited in a line at
// the last decision and no longer do. Called with s.mu held, once all
// have settled.
func (s *Scheduler) noteWakes() {
	for _, a := range s.actors {
		if a.waited && a.state != stateBlocked {
			a.waited = false
			s.trace.note(a, "wakes: an entry it waited on is gone")
		}
	}
}

// stuck describes actors that all wait in lines nobody leaves.
func (s *Scheduler) stuck(blocked []*Actor) error {
	var parts []string
	for _, a := range blocked {
		parts = append(parts, fmt.Sprintf("%s (entry %s behind %s)", a.Name, s.world.names.key(a.line.entry), s.world.names.keys(a.line.ahead)))
	}
	sort.Strings(parts)
	return &Stuck{Waiting: parts}
}

// Stuck is a schedule whose actors all wait in lock lines that nobody
// leaves: a liveness defect of the lock, or a node that ended holding a seat.
type Stuck struct {
	Waiting []string
}

// Error names the waiting actors.
func (e *Stuck) Error() string {
	return "robustness: every remaining node waits in a lock's line and no holder is left to leave it: " + strings.Join(e.Waiting, "; ")
}
