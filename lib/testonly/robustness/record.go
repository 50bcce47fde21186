package robustness

import "sync"

// Attempt is one admission of a daemon or a pipeline under its seat, as
// the node saw it: the count's revision its verdict was decided on, and the
// verdict. The checker judges from etcd's history, at that revision,
// whether the node should have been admitted (liveness).
type Attempt struct {
	Actor, Node, Group, Machine, Boot string
	// Wave is its rollout.wave.
	Wave int
	// Seat is its seat's entry, SeatRevision the entry's create revision.
	Seat         string
	SeatRevision int64
	// Revision is the revision of the count the verdict was decided on.
	Revision int64
	// Admitted: it took its slot. Else Rule said no (Wait: a rule that
	// waits; Yield: it gives its seat up to older FleetLock tickets) for
	// Reason, or Err ended the attempt (not a verdict: an etcd error, the
	// seat lost).
	Admitted    bool
	Rule        string
	Wait, Yield bool
	Reason, Err string
}

// Take is a slot taken (a take's transaction that succeeded), and the
// revision of the count the taker decided on: its last count before it.
type Take struct {
	Actor, Node string
	// Count is the revision of the taker's last count, Revision the
	// take's own.
	Count, Revision int64
}

// Record collects the attempts and the takes of a run.
type Record struct {
	mu       sync.Mutex
	attempts []Attempt
	takes    []Take
}

func (r *Record) take(t Take) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.takes = append(r.takes, t)
}

// Takes are the takes so far.
func (r *Record) Takes() []Take {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Take(nil), r.takes...)
}

func (r *Record) add(a Attempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, a)
}

// Attempts are the attempts so far.
func (r *Record) Attempts() []Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Attempt(nil), r.attempts...)
}
