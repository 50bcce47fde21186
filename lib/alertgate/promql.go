package alertgate

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/prometheus/common/model"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/silence/matcher"
)

// sample is one value of a query result, named by its series.
type sample struct {
	series string
	value  float64
}

// promql runs one gate.promql check.
func (c Checker) promql(ctx context.Context, q config.PromQLCheck) gate.CheckResult {
	ctx, cancel := context.WithTimeout(ctx, timeout(q.TimeoutSec))
	defer cancel()
	u := config.RedactURL(q.URL)
	expr, err := matcher.Expand(q.Expr, c.Data)
	if err != nil {
		return unknown(gate.CheckPromQL, q.URL, err)
	}
	papi, err := c.promAPI(q.URL)
	if err != nil {
		return unknown(gate.CheckPromQL, q.URL, err)
	}
	val, _, err := papi.Query(ctx, expr, c.now())
	if err != nil {
		return unknown(gate.CheckPromQL, q.URL, fmt.Errorf("query %s: %w", expr, err))
	}
	samples, err := samplesOf(val)
	if err != nil {
		return unknown(gate.CheckPromQL, q.URL, fmt.Errorf("query %s: %w", expr, err))
	}
	pass := func(format string, args ...any) gate.CheckResult {
		return gate.CheckResult{Name: gate.CheckPromQL, Passed: true, URL: u, Reason: fmt.Sprintf("promql at %s: %s ", u, expr) + fmt.Sprintf(format, args...)}
	}
	block := func(bad []string, format string, args ...any) gate.CheckResult {
		return gate.CheckResult{Name: gate.CheckPromQL, URL: u, Blocking: bad, Reason: fmt.Sprintf("promql at %s: %s ", u, expr) + fmt.Sprintf(format, args...)}
	}
	if q.NoSeries {
		if len(samples) == 0 {
			return pass("returned no series")
		}
		bad := describeSamples(samples)
		return block(bad, "returned %d series (no_series: true): %s", len(samples), named(bad))
	}
	if len(samples) == 0 {
		return block(nil, "returned no series, so its value is unknown: not rebooting")
	}
	var bad []sample
	for _, s := range samples {
		if math.IsNaN(s.value) || (q.Min != nil && s.value < *q.Min) || (q.Max != nil && s.value > *q.Max) {
			bad = append(bad, s)
		}
	}
	if len(bad) == 0 {
		return pass("= %s, within %s", named(values(samples)), bounds(q))
	}
	names := describeSamples(bad)
	return block(names, "outside %s: %s", bounds(q), named(names))
}

// samplesOf flattens an instant query's result; a range vector counts by
// the last value of each series.
func samplesOf(v model.Value) ([]sample, error) {
	switch r := v.(type) {
	case model.Vector:
		out := make([]sample, 0, len(r))
		for _, s := range r {
			out = append(out, sample{series: s.Metric.String(), value: float64(s.Value)})
		}
		return out, nil
	case *model.Scalar:
		return []sample{{series: "scalar", value: float64(r.Value)}}, nil
	case model.Matrix:
		out := make([]sample, 0, len(r))
		for _, s := range r {
			if len(s.Values) > 0 {
				out = append(out, sample{series: s.Metric.String(), value: float64(s.Values[len(s.Values)-1].Value)})
			}
		}
		return out, nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("the result is a %s, not a number or a vector", v.Type())
}

func describeSamples(ss []sample) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.series+" = "+strconv.FormatFloat(s.value, 'g', -1, 64))
	}
	return out
}

func values(ss []sample) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, strconv.FormatFloat(s.value, 'g', -1, 64))
	}
	return out
}

// bounds is "[min, max]" with an open end as "-Inf" or "+Inf".
func bounds(q config.PromQLCheck) string {
	lo, hi := "-Inf", "+Inf"
	if q.Min != nil {
		lo = strconv.FormatFloat(*q.Min, 'g', -1, 64)
	}
	if q.Max != nil {
		hi = strconv.FormatFloat(*q.Max, 'g', -1, 64)
	}
	return "[" + lo + ", " + hi + "]"
}
