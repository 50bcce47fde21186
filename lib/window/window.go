// Package window decides whether a reboot may start now: maintenance (allow)
// and blackout (deny) windows, evaluated on the wall clock of one time zone.
//
// A schedule is open at an instant when no deny window contains it and,
// if any allow window is configured, some allow window contains it; deny
// always wins over allow, and a schedule without windows is always open.
//
// Windows are read on the wall clock of the schedule's location: an instant
// is inside "Sun 02:30-03:30" when a clock on the wall in that zone shows a
// Sunday time from 02:30 up to, not including, 03:30. Across daylight saving
// changes this means: on the spring-forward day the wall-clock times that do
// not exist are simply never shown (a window 02:30-03:30 in Europe/Berlin is
// open 03:00-03:30 CEST that day, one entirely inside the gap not at all),
// and on the fall-back day the repeated hour is shown twice (a window
// 02:00-03:00 is open for both passes, two real hours). docs/windows.md
// describes the syntax and these rules for users.
//
// The clock is never read here: callers pass the instant to evaluate.
package window

import (
	"fmt"
	"slices"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Horizon is how far ahead At looks for the next opening and closing. A
// weekly schedule repeats within eight days even across a daylight saving
// change; two weeks leave room for zones that skipped a whole day.
const Horizon = 15 * 24 * time.Hour

// Schedule is a parsed set of allow and deny windows in one location.
// It is immutable and safe for concurrent use.
type Schedule struct {
	allow, deny []Window
	loc         *time.Location
	// bounds lists, per weekday (Monday = 0), the minutes of the day at
	// which some window starts or ends: the only wall-clock readings at
	// which the decision can change.
	bounds [7][]int
}

// Decision is the answer of Schedule.At.
type Decision struct {
	// Open reports whether a reboot may start at the evaluated instant.
	Open bool
	// Reason says why, for people: "no windows configured",
	// `inside deny window "Fri 18:00-Mon 08:00"`, `inside allow window
	// "Tue 22:00-23:00"`, "outside every allow window" or "outside every
	// deny window".
	Reason string
	// Window is the specification that decided, as written; empty when no
	// single window did (no windows, outside every allow/deny window).
	Window string
	// NextOpen is the first instant after the evaluated one at which the
	// schedule turns from closed to open (when open now: the reopening after
	// the next close). NextClose is the first instant at which it turns from
	// open to closed. Either is the zero Time when no such change happens
	// within Horizon: the schedule never opens (or never closes) again.
	// Both are expressed in the schedule's location.
	NextOpen, NextClose time.Time
}

// New parses the allow and deny specifications for evaluation in loc. An
// invalid specification is an exitcode.Config error naming the list and the
// index ("window: deny[1]: ...").
func New(allow, deny []string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		return nil, exitcode.Errorf(exitcode.Internal, "window: no location given (a bug: pass time.UTC or a loaded zone)")
	}
	s := &Schedule{loc: loc}
	var err error
	if s.allow, err = parseAll("allow", allow); err != nil {
		return nil, err
	}
	if s.deny, err = parseAll("deny", deny); err != nil {
		return nil, err
	}
	for _, w := range append(slices.Clone(s.allow), s.deny...) {
		for _, iv := range w.intervals {
			s.addBound(iv.start)
			s.addBound(iv.start + iv.length)
		}
	}
	return s, nil
}

func parseAll(kind string, specs []string) ([]Window, error) {
	out := make([]Window, 0, len(specs))
	for i, spec := range specs {
		w, err := Parse(spec)
		if err != nil {
			return nil, exitcode.Errorf(exitcode.Config, "window: %s[%d]: %w", kind, i, err)
		}
		out = append(out, w)
	}
	return out, nil
}

func (s *Schedule) addBound(weekMinute int) {
	weekMinute %= minutesPerWeek
	day, minute := weekMinute/minutesPerDay, weekMinute%minutesPerDay
	if !slices.Contains(s.bounds[day], minute) {
		s.bounds[day] = append(s.bounds[day], minute)
	}
}

// Location is the zone the schedule is evaluated in.
func (s *Schedule) Location() *time.Location { return s.loc }

// At decides whether the schedule is open at t, and when that changes next.
func (s *Schedule) At(t time.Time) Decision {
	d := s.decide(t)
	if len(s.allow)+len(s.deny) == 0 {
		return d
	}
	d.NextOpen, d.NextClose = s.changes(t, d.Open)
	return d
}

// decide evaluates t without looking ahead.
func (s *Schedule) decide(t time.Time) Decision {
	if len(s.allow)+len(s.deny) == 0 {
		return Decision{Open: true, Reason: "no windows configured"}
	}
	m := weekMinute(t.In(s.loc))
	for _, w := range s.deny {
		if w.contains(m) {
			return Decision{Reason: fmt.Sprintf("inside deny window %q", w.Spec), Window: w.Spec}
		}
	}
	if len(s.allow) == 0 {
		return Decision{Open: true, Reason: "outside every deny window"}
	}
	for _, w := range s.allow {
		if w.contains(m) {
			return Decision{Open: true, Reason: fmt.Sprintf("inside allow window %q", w.Spec), Window: w.Spec}
		}
	}
	return Decision{Reason: "outside every allow window"}
}

// changes walks every instant within Horizon after t at which the decision
// can change and returns the first opening and the first closing.
func (s *Schedule) changes(t time.Time, open bool) (nextOpen, nextClose time.Time) {
	state := open
	for _, c := range s.candidates(t) {
		o := s.decide(c).Open
		if o == state {
			continue
		}
		state = o
		if o && nextOpen.IsZero() {
			nextOpen = c
		} else if !o && nextClose.IsZero() {
			nextClose = c
		}
		if !nextOpen.IsZero() && !nextClose.IsZero() {
			break
		}
	}
	return nextOpen, nextClose
}

// candidates returns, sorted, every instant in (t, t+Horizon] at which the
// wall clock of loc either jumps (a zone transition) or shows a window
// boundary. Between two consecutive candidates the wall clock runs on without
// crossing a boundary, so the decision cannot change there. A boundary
// reading is turned into instants once per UTC offset in use, keeping those
// where the clock really shows it: none in a spring-forward gap, two in a
// repeated autumn hour.
func (s *Schedule) candidates(t time.Time) []time.Time {
	end := t.Add(Horizon)
	local := t.In(s.loc)
	_, offset := local.Zone()
	offsets := []int{offset}
	var out []time.Time
	for cur, i := local, 0; i < 1000; i++ { // a zone changes at most a few times in two weeks
		_, zoneEnd := cur.ZoneBounds()
		if zoneEnd.IsZero() || zoneEnd.After(end) || !zoneEnd.After(cur) {
			break
		}
		cur = zoneEnd.In(s.loc)
		out = append(out, cur)
		if _, offset = cur.Zone(); !slices.Contains(offsets, offset) {
			offsets = append(offsets, offset)
		}
	}
	year, month, day := local.Date()
	for i := -1; i <= int(Horizon/(24*time.Hour))+1; i++ {
		date := time.Date(year, month, day+i, 0, 0, 0, 0, time.UTC) // the wall-clock date, read as UTC
		for _, minute := range s.bounds[weekday(date)] {
			wall := date.Add(time.Duration(minute) * time.Minute)
			for _, off := range offsets {
				at := wall.Add(-time.Duration(off) * time.Second).In(s.loc)
				if _, o := at.Zone(); o != off || !at.After(t) || at.After(end) {
					continue
				}
				out = append(out, at)
			}
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(out, func(a, b time.Time) bool { return a.Equal(b) })
}

// contains reports whether minute-of-week m is inside w.
func (w Window) contains(m int) bool {
	for _, iv := range w.intervals {
		if iv.contains(m) {
			return true
		}
	}
	return false
}

// weekday is t's day of the week, Monday = 0.
func weekday(t time.Time) int { return (int(t.Weekday()) + 6) % 7 }

// weekMinute is the minute of the week of t's wall clock, Monday 00:00 = 0.
func weekMinute(t time.Time) int {
	return weekday(t)*minutesPerDay + t.Hour()*60 + t.Minute()
}

// LoadLocation resolves a windows.timezone value: an IANA name such as
// "Europe/Berlin", "UTC", or "Local" (also the empty string) for the host's
// zone. The error names the value and shows correct ones; callers put the
// field or flag in front.
func LoadLocation(name string) (*time.Location, error) {
	switch name {
	case "", "Local":
		return time.Local, nil
	case "UTC":
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as \"Europe/Berlin\" or \"UTC\", "+
			"or \"Local\" for the host's zone (is the tzdata package installed?)", name)
	}
	return loc, nil
}
