package robustness

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Line is one line of a schedule: a step granted to an actor (with how its
// request ended), a fault, or a note on what an actor did.
type Line struct {
	// Step is the step's number (0 for a fault or a note).
	Step int
	// Actor is who took it.
	Actor string
	// What is the request or the event, Outcome how it ended.
	What, Outcome string
	// Revision is etcd's revision in the answer (differs between runs of
	// a seed when a background write, such as a lock's annotation, came
	// in between; left out of Canonical).
	Revision int64
}

// Trace is a schedule: the lines in the order they happened.
type Trace struct {
	mu    sync.Mutex
	lines []Line
	// open is each actor's step awaiting its outcome.
	open map[*Actor]int
	// ns is the run's namespace, which differs between runs of a seed (an
	// error's text may name a key): "<ns>/" in Canonical.
	ns string
}

// Lines are the schedule's lines so far.
func (t *Trace) Lines() []Line {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Line(nil), t.lines...)
}

func (t *Trace) step(n int, a *Actor, r request, nm *names) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open == nil {
		t.open = map[*Actor]int{}
	}
	t.lines = append(t.lines, Line{Step: n, Actor: a.Name, What: nm.describe(r)})
	t.open[a] = len(t.lines) - 1
}

func (t *Trace) outcome(a *Actor, r request, reply any, err error, nm *names) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.open[a]
	if !ok {
		return
	}
	delete(t.open, a)
	if r.method == "" {
		return
	}
	t.lines[i].Outcome, t.lines[i].Revision = nm.outcome(reply, err)
}

func (t *Trace) note(a *Actor, what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, Line{Actor: a.Name, What: what})
}

func (t *Trace) fault(f Fault, what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, Line{Actor: "fault", What: string(f.Kind) + ": " + what})
}

// Canonical is the schedule without what differs between runs of a seed
// and changes nothing: revisions (a lock's annotation, written in the
// background, moves them), times, and the numbers made of them (a failure
// record's id), and the namespace. Lease names (L1, L2, …) stay: they are
// the order the schedule met the leases in.
func (t *Trace) Canonical() []string {
	times := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	numbers := regexp.MustCompile(`\b\d{2,}\b`)
	norm := func(s string) string {
		if t.ns != "" {
			s = strings.ReplaceAll(s, t.ns, "<ns>/")
		}
		return numbers.ReplaceAllString(times.ReplaceAllString(s, "TIME"), "#")
	}
	lines := t.Lines()
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, fmt.Sprintf("%d %s %s -> %s", l.Step, l.Actor, norm(l.What), norm(l.Outcome)))
	}
	return out
}

// String prints the schedule, one line per step, fault or note.
func (t *Trace) String() string { return t.Tail(len(t.Lines())) }

// Tail prints the last n lines.
func (t *Trace) Tail(n int) string {
	lines := t.Lines()
	var b strings.Builder
	from := max(0, len(lines)-n)
	if from > 0 {
		fmt.Fprintf(&b, "  … %d earlier lines\n", from)
	}
	for _, l := range lines[from:] {
		switch {
		case l.Step > 0 && l.Outcome != "":
			fmt.Fprintf(&b, "  %4d %-14s %s -> %s (rev %d)\n", l.Step, l.Actor, l.What, l.Outcome, l.Revision)
		case l.Step > 0:
			fmt.Fprintf(&b, "  %4d %-14s %s\n", l.Step, l.Actor, l.What)
		default:
			fmt.Fprintf(&b, "       %-14s %s\n", l.Actor, l.What)
		}
	}
	return b.String()
}
