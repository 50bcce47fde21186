// Package window decides whether a reboot may start now: maintenance (allow)
// and blackout (deny) windows, evaluated on the wall clock of one time zone.
// A window repeats every week ("Tue 22:00-23:00"), on calendar days
// ("2nd Tue 22:00-02:00", "1st 02:00-04:00", "2026-12-24 00:00-24:00") or
// once ("2026-12-24 00:00-2026-12-27 00:00").
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

// Horizon is how far ahead At looks for the next opening and closing when
// every window is weekly. A weekly schedule repeats within eight days even
// across a daylight saving change; two weeks leave room for zones that
// skipped a whole day.
const Horizon = 15 * 24 * time.Hour

// CalendarHorizon is how far ahead At looks when some window is monthly or
// dated: a year and a month, so that a yearly date and the rarest monthly
// days ("5th Sat", "31st") are found.
const CalendarHorizon = 400 * 24 * time.Hour

// chunk is how much of the horizon is searched at once, so that a change
// found early ends the search early.
const chunk = 16 * 24 * time.Hour

// Schedule is a parsed set of allow and deny windows in one location.
// It is immutable and safe for concurrent use.
type Schedule struct {
	allow, deny []Window
	loc         *time.Location
	// bounds lists, per weekday (Monday = 0), the minutes of the day at
	// which some window starts or ends: the only wall-clock readings at
	// which the decision can change.
	bounds [7][]int
	// calendar holds the monthly and dated windows, whose boundaries are
	// found date by date.
	calendar []Window
	horizon  time.Duration
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
	s := &Schedule{loc: loc, horizon: Horizon}
	var err error
	if s.allow, err = parseAll("allow", allow); err != nil {
		return nil, err
	}
	if s.deny, err = parseAll("deny", deny); err != nil {
		return nil, err
	}
	for _, w := range append(slices.Clone(s.allow), s.deny...) {
		if w.calendar != nil || w.dated != nil {
			s.calendar = append(s.calendar, w)
			s.horizon = CalendarHorizon
		}
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

// Horizon is how far ahead At looks for NextOpen and NextClose: Horizon
// for weekly windows, CalendarHorizon when a monthly or dated one is set.
func (s *Schedule) Horizon() time.Duration { return s.horizon }

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
	m := wallOf(t.In(s.loc))
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

// changes walks every instant within the horizon after t at which the
// decision can change and returns the first opening and the first closing.
func (s *Schedule) changes(t time.Time, open bool) (nextOpen, nextClose time.Time) {
	state := open
	end := t.Add(s.horizon)
	for from := t; from.Before(end); from = from.Add(chunk) {
		to := from.Add(chunk)
		if to.After(end) {
			to = end
		}
		for _, c := range s.candidates(from, to) {
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
				return nextOpen, nextClose
			}
		}
	}
	return nextOpen, nextClose
}

// candidates returns, sorted, every instant in (t, end] at which the
// wall clock of loc either jumps (a zone transition) or shows a window
// boundary. Between two consecutive candidates the wall clock runs on without
// crossing a boundary, so the decision cannot change there. A boundary
// reading is turned into instants once per UTC offset in use, keeping those
// where the clock really shows it: none in a spring-forward gap, two in a
// repeated autumn hour.
func (s *Schedule) candidates(t, end time.Time) []time.Time {
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
	// A calendar span starts up to two days before the date it ends on.
	for i := -2; i <= int(end.Sub(t)/(24*time.Hour))+2; i++ {
		date := time.Date(year, month, day+i, 0, 0, 0, 0, time.UTC) // the wall-clock date, read as UTC
		for _, wall := range s.boundsOn(date) {
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

// boundsOn returns the wall-clock readings (read as UTC) on date at which
// some window starts or ends; a calendar span started on date may end on
// the next one.
func (s *Schedule) boundsOn(date time.Time) []time.Time {
	var out []time.Time
	at := func(minute int64) { out = append(out, date.Add(time.Duration(minute)*time.Minute)) }
	for _, minute := range s.bounds[weekday(date)] {
		at(int64(minute))
	}
	first := wallMinutes(date, 0)
	for _, w := range s.calendar {
		switch {
		case w.calendar != nil && w.calendar.picks(date):
			at(int64(w.calendar.start))
			at(int64(w.calendar.start + w.calendar.length))
		case w.dated != nil:
			for _, m := range []int64{w.dated.from, w.dated.to} {
				if m >= first && m < first+minutesPerDay {
					at(m - first)
				}
			}
		}
	}
	return out
}

// wall is a reading of the wall clock, to the minute.
type wall struct {
	date       time.Time // the date, midnight UTC
	minute     int       // minutes after midnight
	weekMinute int       // minute of the week, Monday 00:00 = 0
}

// wallOf reads t's wall clock.
func wallOf(t time.Time) wall {
	y, m, d := t.Date()
	date := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	minute := t.Hour()*60 + t.Minute()
	return wall{date: date, minute: minute, weekMinute: weekday(date)*minutesPerDay + minute}
}

// contains reports whether the wall-clock reading c is inside w.
func (w Window) contains(c wall) bool {
	switch {
	case w.calendar != nil:
		return w.calendar.contains(c.date, c.minute)
	case w.dated != nil:
		m := wallMinutes(c.date, c.minute)
		return m >= w.dated.from && m < w.dated.to
	}
	for _, iv := range w.intervals {
		if iv.contains(c.weekMinute) {
			return true
		}
	}
	return false
}

// weekday is t's day of the week, Monday = 0.
func weekday(t time.Time) int { return (int(t.Weekday()) + 6) % 7 }

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
