package window

import (
	"fmt"
	"strconv"
	"strings"
)

const (
	minutesPerDay  = 24 * 60
	minutesPerWeek = 7 * minutesPerDay
)

// shortDay is the canonical spelling of day d (0 = Monday).
// neverHint says how to write "never": removing the only allow window would
// allow every hour instead.
const neverHint = "remove a deny window; an allow window only if other allow windows remain " +
	"(with no allow window every hour is allowed), else deny \"* 00:00-24:00\""

func shortDay(d int) string {
	return "MonTueWedThuFriSatSun"[3*d : 3*d+3]
}

// interval is one weekly stretch of wall-clock time: it starts at minute
// start of the week (0 = Monday 00:00) and lasts length minutes
// (1..minutesPerWeek). It may wrap past Sunday 24:00 into Monday.
type interval struct {
	start, length int
}

// contains reports whether minute-of-week m lies in [start, start+length).
func (iv interval) contains(m int) bool {
	return ((m-iv.start)%minutesPerWeek+minutesPerWeek)%minutesPerWeek < iv.length
}

// Window is one parsed window specification: exactly one of intervals
// (the weekly forms), calendar (a daily span on picked dates) or dated (one
// dated span) is set.
type Window struct {
	// Spec is the specification as written (surrounding space trimmed).
	Spec      string
	intervals []interval
	calendar  *calendarSpan
	dated     *datedSpan
}

// SpecError says what is wrong with a window specification and shows a
// correct one. Its message starts with the quoted specification and carries
// no package prefix, so that callers can put the field it came from in front
// ("windows.deny[1]: ...").
type SpecError struct {
	Spec    string // the specification as given
	Problem string // what is wrong
	Example string // a correct specification close to what was meant
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("%q: %s; write it like %q", e.Spec, e.Problem, e.Example)
}

// Generic examples used when nothing closer can be suggested.
const (
	exampleDaily = "Tue 22:00-23:00"
	exampleDays  = "Mon-Fri 22:00-23:00"
	forms        = `want DAYS HH:MM-HH:MM ("Mon-Fri 22:00-23:00", "* 23:00-06:00", "2nd Tue 22:00-02:00", ` +
		`"last Fri 20:00-24:00", "Sat after 2nd Tue 02:00-06:00", "1st 02:00-04:00", "2026-12-24,2026-12-31 00:00-24:00"), ` +
		`DAY HH:MM-DAY HH:MM ("Fri 18:00-Mon 08:00") or DATE HH:MM-DATE HH:MM ("2026-12-24 00:00-2026-12-27 00:00")`
)

// Validate checks one window specification. It accepts
//
//	DAYS HH:MM-HH:MM          a daily span on each of DAYS
//	DAY HH:MM-DAY HH:MM       one weekly span from a day and time to a day and time
//	DATE HH:MM-DATE HH:MM     one dated span ("2026-12-24 00:00-2026-12-27 00:00")
//
// where DAYS is "*" (every day) or a comma list of: a day ("Tue", "tuesday";
// any case), a range ("Mon-Fri", "Sat-Mon" wraps the week), a weekday of the
// month ("2nd Tue", "last Fri"), a day after one ("Sat after 2nd Tue"), a
// day of the month ("1st", "15th", "last") or a date ("2026-12-24"). A daily
// span whose end is not after its start wraps midnight and belongs to the
// day it starts on: "Fri 23:00-01:00" is Friday 23:00 until Saturday 01:00,
// "2nd Tue 22:00-02:00" runs into the Wednesday after. "24:00" is allowed
// as an end time.
// The error, a *SpecError, says what is wrong and shows a correct example.
func Validate(spec string) error {
	_, err := Parse(spec)
	return err
}

// Parse parses one window specification (see Validate for the syntax).
func Parse(spec string) (Window, error) {
	w := Window{Spec: strings.TrimSpace(spec)}
	fail := func(example, format string, args ...any) (Window, error) {
		return Window{}, &SpecError{Spec: spec, Problem: fmt.Sprintf(format, args...), Example: example}
	}
	norm := normalize(spec)
	if norm == "" {
		return fail(exampleDaily, "empty window: give days and a time span")
	}
	daysPart, timesPart, ok := splitDays(norm)
	if !ok {
		return fail(exampleDaily, "missing the time span: %s", forms)
	}
	if len(strings.Fields(norm)) >= 5 && !strings.Contains(norm, ":") {
		return fail(exampleDaily, "looks like a cron expression, which windows are not: %s", forms)
	}
	if isCalendar(daysPart) {
		return parseCalendar(w, spec, daysPart, timesPart)
	}
	startText, endText, ok := strings.Cut(timesPart, "-")
	if !ok {
		return fail(exampleDaily, "time span %q has no \"-\" between start and end: %s", timesPart, forms)
	}
	start, err := parseClock(startText, false)
	if err != nil {
		return fail(exampleDaily, "start %s", err)
	}
	if endDay, endClock, spansDays := strings.Cut(endText, " "); spansDays {
		return parseSpan(w, spec, daysPart, start, startText, endDay, endClock)
	}
	days, err := parseDays(daysPart)
	if err != nil {
		return fail(exampleDays, "%s", err)
	}
	end, err := parseClock(endText, true)
	if err != nil {
		return fail(exampleDaily, "end %s", err)
	}
	if end == start {
		return fail(daysPart+" 00:00-24:00", "start and end are both %s, which could mean empty or a full day: "+
			"for the full day end at 24:00; for never, "+neverHint, startText)
	}
	length := end - start
	if length < 0 {
		length += minutesPerDay // wraps midnight: belongs to the start day
	}
	for d := range 7 {
		if days[d] {
			w.intervals = append(w.intervals, interval{start: d*minutesPerDay + start, length: length})
		}
	}
	return w, nil
}

// splitDays splits a normalized specification into the days and the time
// span. The span starts at the first word after the first that holds a ":"
// (a clock), or else is the last word: the days may have several words
// ("Sat after 2nd Tue"), a time span always has a clock.
func splitDays(norm string) (days, times string, ok bool) {
	words := strings.Split(norm, " ")
	if len(words) < 2 {
		return "", "", false
	}
	at := len(words) - 1
	for i := 1; i < len(words); i++ {
		if strings.Contains(words[i], ":") {
			at = i
			break
		}
	}
	return strings.Join(words[:at], " "), strings.Join(words[at:], " "), true
}

// parseSpan finishes the "DAY HH:MM-DAY HH:MM" form.
func parseSpan(w Window, spec, startDayText string, start int, startText, endDayText, endText string) (Window, error) {
	fail := func(example, format string, args ...any) (Window, error) {
		return Window{}, &SpecError{Spec: spec, Problem: fmt.Sprintf(format, args...), Example: example}
	}
	const example = "Fri 18:00-Mon 08:00"
	startDay, ok := lookupDay(startDayText)
	if !ok {
		if strings.ContainsAny(startDayText, "*,-") {
			return fail(example, "a span that ends on a named day starts on one day, not %q", startDayText)
		}
		return fail(example, "%s", unknownDay(startDayText))
	}
	endDay, ok := lookupDay(endDayText)
	if !ok {
		return fail(example, "end day: %s", unknownDay(endDayText))
	}
	end, err := parseClock(endText, true)
	if err != nil {
		return fail(example, "end %s", err)
	}
	from := startDay*minutesPerDay + start
	to := endDay*minutesPerDay + end
	length := ((to-from)%minutesPerWeek + minutesPerWeek) % minutesPerWeek
	if length == 0 {
		return fail("* 00:00-24:00", "start and end are the same instant (%s %s), which could mean empty or the whole week: "+
			"for always use every day all day; for never, "+neverHint, shortDay(startDay), startText)
	}
	w.intervals = []interval{{start: from, length: length}}
	return w, nil
}

// normalize collapses white space to single blanks and removes blanks
// around "-" and ",", so that "Fri 18:00 - Mon 08:00" and
// "Mon - Fri 22:00-23:00" read like their compact forms.
func normalize(spec string) string {
	s := strings.Join(strings.Fields(spec), " ")
	for _, sep := range []string{"-", ","} {
		s = strings.ReplaceAll(s, " "+sep, sep)
		s = strings.ReplaceAll(s, sep+" ", sep)
	}
	return s
}

// parseDays parses "*", a day, a range or a comma list of days and ranges
// into a set indexed Monday first.
func parseDays(s string) ([7]bool, error) {
	var set [7]bool
	if s == "*" {
		for d := range set {
			set[d] = true
		}
		return set, nil
	}
	for item := range strings.SplitSeq(s, ",") {
		from, to, isRange := strings.Cut(item, "-")
		first, ok := lookupDay(from)
		if !ok {
			return set, fmt.Errorf("%s", unknownDay(from))
		}
		last := first
		if isRange {
			if last, ok = lookupDay(to); !ok {
				return set, fmt.Errorf("%s", unknownDay(to))
			}
		}
		for d := first; ; d = (d + 1) % 7 {
			set[d] = true
			if d == last {
				break
			}
		}
	}
	return set, nil
}

// lookupDay maps a day name, short or full and in any case, to its index,
// Monday = 0.
func lookupDay(s string) (int, bool) {
	switch strings.ToLower(s) {
	case "mon", "monday":
		return 0, true
	case "tue", "tuesday":
		return 1, true
	case "wed", "wednesday":
		return 2, true
	case "thu", "thursday":
		return 3, true
	case "fri", "friday":
		return 4, true
	case "sat", "saturday":
		return 5, true
	case "sun", "sunday":
		return 6, true
	}
	return 0, false
}

func unknownDay(s string) string {
	if s == "" {
		return "a day is missing: use Mon, Tue, Wed, Thu, Fri, Sat or Sun, * for every day, a list \"Mon,Wed\" or a range \"Mon-Fri\""
	}
	if s == "*" {
		return "\"*\" stands alone (every day); it cannot be part of a list or range"
	}
	return fmt.Sprintf("unknown day %q: %s", s, dayForms)
}

// parseClock parses H:MM or HH:MM into minutes after midnight. 24:00 is
// accepted only when asEnd is set.
func parseClock(s string, asEnd bool) (int, error) {
	hh, mm, ok := strings.Cut(s, ":")
	if !ok || len(hh) < 1 || len(hh) > 2 || len(mm) != 2 || !digits(hh) || !digits(mm) {
		return 0, fmt.Errorf("time %q is not HH:MM (24-hour clock, such as 08:00 or 22:30)", s)
	}
	h, _ := strconv.Atoi(hh)
	m, _ := strconv.Atoi(mm)
	switch {
	case h == 24 && m == 0 && asEnd:
		return minutesPerDay, nil
	case h == 24 && m == 0:
		return 0, fmt.Errorf("time 24:00 is only allowed as an end; start the day at 00:00")
	case h > 23 || m > 59:
		return 0, fmt.Errorf("time %q is out of range: hours 00-23 (24:00 only as an end), minutes 00-59", s)
	}
	return h*60 + m, nil
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
