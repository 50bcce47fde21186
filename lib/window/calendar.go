package window

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Calendar forms: windows that do not repeat every week. A daily span on
// the dates some rules pick ("2nd Tue 22:00-02:00", "1st 02:00-04:00",
// "2026-12-24,2026-12-31 00:00-24:00") or one dated span
// ("2026-12-24 00:00-2026-12-27 00:00"). Dates are wall-clock dates of the
// schedule's zone, held as midnight UTC.

// last stands for "last" where an ordinal is expected.
const last = -1

// ruleKind says which calendar dates a dayRule picks.
type ruleKind int

const (
	ruleWeekdays   ruleKind = iota // each date on one of weekdays
	ruleNthWeekday                 // the nth weekday of the month ("2nd Tue", "last Fri")
	ruleAfter                      // the first target day after the nth weekday ("Sat after 2nd Tue")
	ruleMonthDay                   // the nth day of the month ("1st", "last")
	ruleDate                       // one date ("2026-12-24")
)

// dayRule picks calendar dates. Fields unused by its kind are zero.
type dayRule struct {
	kind     ruleKind
	weekdays [7]bool   // ruleWeekdays
	nth      int       // 1..5 (of a weekday) or 1..31 (day of month), or last
	weekday  int       // ruleNthWeekday, ruleAfter: the weekday counted, Monday = 0
	target   int       // ruleAfter: the weekday sought after it
	date     time.Time // ruleDate, midnight UTC
}

// calendarSpan is a daily span on the dates its rules pick: it starts start
// minutes after midnight of such a date and lasts length minutes
// (1..minutesPerDay), so it may run into the next date.
type calendarSpan struct {
	rules         []dayRule
	start, length int
}

// datedSpan is one stretch of wall-clock time between two dated readings,
// in minutes since 1970-01-01 00:00 on the wall: [from, to).
type datedSpan struct {
	from, to int64
}

// matches reports whether date (midnight UTC) is picked by r.
func (r dayRule) matches(date time.Time) bool {
	switch r.kind {
	case ruleWeekdays:
		return r.weekdays[weekday(date)]
	case ruleNthWeekday:
		return weekday(date) == r.weekday && isNth(date, r.nth)
	case ruleAfter:
		if weekday(date) != r.target {
			return false
		}
		back := (r.target - r.weekday + 7) % 7
		if back == 0 {
			back = 7
		}
		return isNth(date.AddDate(0, 0, -back), r.nth)
	case ruleMonthDay:
		if r.nth == last {
			return date.Day() == daysIn(date)
		}
		return date.Day() == r.nth
	case ruleDate:
		return date.Equal(r.date)
	}
	return false
}

// isNth reports whether date is the nth of its weekday in its month.
func isNth(date time.Time, nth int) bool {
	if nth == last {
		return date.Day()+7 > daysIn(date)
	}
	return (date.Day()-1)/7+1 == nth
}

// daysIn is the number of days in date's month.
func daysIn(date time.Time) int {
	return time.Date(date.Year(), date.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// picks reports whether any of c's rules picks date.
func (c *calendarSpan) picks(date time.Time) bool {
	for _, r := range c.rules {
		if r.matches(date) {
			return true
		}
	}
	return false
}

// contains reports whether the wall clock at minute of day minute on date is
// inside c: a span started that day or, crossing midnight, the day before.
func (c *calendarSpan) contains(date time.Time, minute int) bool {
	for back := range 2 {
		m := minute + back*minutesPerDay
		if m >= c.start && m < c.start+c.length && c.picks(date.AddDate(0, 0, -back)) {
			return true
		}
	}
	return false
}

// Examples for the calendar forms.
const (
	exampleMonthly = "2nd Tue 22:00-02:00"
	exampleAfter   = "Sat after 2nd Tue 02:00-06:00"
	exampleDay     = "1st 02:00-04:00"
	exampleDates   = "2026-12-24,2026-12-31 00:00-24:00"
	exampleDated   = "2026-12-24 00:00-2026-12-27 00:00"
	// dayForms lists what may stand before the time span.
	dayForms = `use a day (Mon ... Sun, or the full name), * for every day, a list "Mon,Wed", a range "Mon-Fri", ` +
		`a weekday of the month "2nd Tue" or "last Fri", "Sat after 2nd Tue", a day of the month "1st" or "last", ` +
		`or a date "2026-12-24"`
)

// isCalendar reports whether the days part of a specification uses a
// calendar form: more than one word, an ordinal, "last" or a date.
func isCalendar(days string) bool {
	if strings.Contains(days, " ") {
		return true
	}
	for item := range strings.SplitSeq(days, ",") {
		if startsWithDigit(item) || strings.EqualFold(item, "last") {
			return true
		}
	}
	return false
}

// parseCalendar finishes a specification whose days use a calendar form.
func parseCalendar(w Window, spec, daysPart, timesPart string) (Window, error) {
	fail := func(example, format string, args ...any) (Window, error) {
		return Window{}, &SpecError{Spec: spec, Problem: fmt.Sprintf(format, args...), Example: example}
	}
	var rules []dayRule
	for item := range strings.SplitSeq(daysPart, ",") {
		r, example, err := parseRule(item)
		if err != nil {
			return fail(example, "%s", err)
		}
		rules = append(rules, r)
	}
	example := calendarExample(rules[0])
	startText, endText, ok := strings.Cut(timesPart, "-")
	if !ok {
		return fail(example, "time span %q has no \"-\" between start and end: %s", timesPart, forms)
	}
	start, err := parseClock(startText, false)
	if err != nil {
		return fail(example, "start %s", err)
	}
	if endDate, endClock, dated := strings.Cut(endText, " "); dated {
		if len(rules) != 1 || rules[0].kind != ruleDate {
			return fail(example, "only a span that starts on a date (%q) can end on another day; "+
				"a daily span that ends after midnight continues into the next day: write %q", exampleDated, example)
		}
		return parseDated(w, spec, rules[0].date, start, endDate, endClock)
	}
	end, err := parseClock(endText, true)
	if err != nil {
		return fail(example, "end %s", err)
	}
	if end == start {
		return fail(daysPart+" 00:00-24:00", "start and end are both %s, which could mean empty or a full day: "+
			"for the full day end at 24:00; for never, "+neverHint, startText)
	}
	length := end - start
	if length < 0 {
		length += minutesPerDay // wraps midnight: belongs to the start date
	}
	w.calendar = &calendarSpan{rules: rules, start: start, length: length}
	return w, nil
}

// parseDated finishes "DATE HH:MM-DATE HH:MM".
func parseDated(w Window, spec string, from time.Time, start int, endDateText, endText string) (Window, error) {
	fail := func(format string, args ...any) (Window, error) {
		return Window{}, &SpecError{Spec: spec, Problem: fmt.Sprintf(format, args...), Example: exampleDated}
	}
	to, err := parseDate(endDateText)
	if err != nil {
		return fail("end %s", err)
	}
	end, err := parseClock(endText, true)
	if err != nil {
		return fail("end %s", err)
	}
	span := datedSpan{from: wallMinutes(from, start), to: wallMinutes(to, end)}
	if span.to <= span.from {
		return fail("it ends (%s %s) before or when it starts: a dated span runs forward from its start date and time",
			to.Format(time.DateOnly), endText)
	}
	w.dated = &span
	return w, nil
}

// parseRule parses one item of a calendar days list and, on error, returns
// an example of the form that was probably meant.
func parseRule(item string) (dayRule, string, error) {
	words := strings.Fields(item)
	switch {
	case len(words) == 0:
		return dayRule{}, exampleDays, fmt.Errorf("%s", unknownDay(""))
	case len(words) == 1 && (isDate(words[0]) || startsWithDigit(words[0]) && strings.Contains(words[0], "-")):
		d, err := parseDate(words[0])
		return dayRule{kind: ruleDate, date: d}, exampleDates, err
	case len(words) == 1 && (startsWithDigit(words[0]) || strings.EqualFold(words[0], "last")):
		n, err := parseOrdinal(words[0], 31, "day of the month", "a month has at most 31 days")
		return dayRule{kind: ruleMonthDay, nth: n}, exampleDay, err
	case len(words) == 1:
		days, err := parseDays(words[0])
		return dayRule{kind: ruleWeekdays, weekdays: days}, exampleDays, err
	case len(words) == 2:
		n, day, err := parseNthWeekday(words[0], words[1])
		return dayRule{kind: ruleNthWeekday, nth: n, weekday: day}, exampleMonthly, err
	case len(words) == 4 && strings.EqualFold(words[1], "after"):
		target, ok := lookupDay(words[0])
		if !ok {
			return dayRule{}, exampleAfter, fmt.Errorf("%s", unknownDay(words[0]))
		}
		n, day, err := parseNthWeekday(words[2], words[3])
		return dayRule{kind: ruleAfter, nth: n, weekday: day, target: target}, exampleAfter, err
	}
	return dayRule{}, exampleMonthly, fmt.Errorf("unknown days %q: %s", item, dayForms)
}

// parseNthWeekday parses "2nd Tue" or "last Fri".
func parseNthWeekday(ordinal, day string) (int, int, error) {
	if !startsWithDigit(ordinal) && !strings.EqualFold(ordinal, "last") {
		return 0, 0, fmt.Errorf("unknown days %q: %s", ordinal+" "+day, dayForms)
	}
	d, ok := lookupDay(day)
	if !ok {
		return 0, 0, fmt.Errorf("%s", unknownDay(day))
	}
	n, err := parseOrdinal(ordinal, 5, "weekday of the month", "a month has at most five of each weekday")
	return n, d, err
}

// parseOrdinal parses "1st" ... "31st" (up to most) or "last".
func parseOrdinal(s string, most int, what, limit string) (int, error) {
	if strings.EqualFold(s, "last") {
		return last, nil
	}
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(s)
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not an ordinal such as 1st, 2nd, 3rd, 4th or last", s)
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || s[:i] != strconv.Itoa(n) {
		return 0, fmt.Errorf("%q is not an ordinal such as 1st, 2nd, 3rd, 4th or last", s)
	}
	if want := strconv.Itoa(n) + ordinalSuffix(n); !strings.EqualFold(s, want) {
		return 0, fmt.Errorf("%q is not an ordinal: write %s", s, want)
	}
	if n < 1 || n > most {
		return 0, fmt.Errorf("%s %q is out of range: %s (use 1st to %s, or last)", what, s, limit, strconv.Itoa(most)+ordinalSuffix(most))
	}
	return n, nil
}

// ordinalSuffix is the English suffix of ordinal n: st, nd, rd or th.
func ordinalSuffix(n int) string {
	if n%100 >= 11 && n%100 <= 13 {
		return "th"
	}
	switch n % 10 {
	case 1:
		return "st"
	case 2:
		return "nd"
	case 3:
		return "rd"
	}
	return "th"
}

func startsWithDigit(s string) bool { return s != "" && s[0] >= '0' && s[0] <= '9' }

// isDate reports whether s looks like a date, NNNN-NN-NN.
func isDate(s string) bool {
	return len(s) == 10 && s[4] == '-' && s[7] == '-' && digits(s[:4]) && digits(s[5:7]) && digits(s[8:])
}

// parseDate parses YYYY-MM-DD into midnight UTC.
func parseDate(s string) (time.Time, error) {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil || !isDate(s) {
		return time.Time{}, fmt.Errorf("date %q is not a calendar date YYYY-MM-DD (such as 2026-12-24)", s)
	}
	return d, nil
}

// calendarExample is a correct specification in the form of r.
func calendarExample(r dayRule) string {
	switch r.kind {
	case ruleAfter:
		return exampleAfter
	case ruleMonthDay:
		return exampleDay
	case ruleDate:
		return exampleDates
	}
	return exampleMonthly
}

// wallMinutes is the wall-clock reading minute minutes after midnight of
// date, in minutes since 1970-01-01 00:00.
func wallMinutes(date time.Time, minute int) int64 {
	return date.Unix()/60 + int64(minute)
}
