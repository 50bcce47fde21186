package alertgate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/silence/matcher"
)

// amAlert is the part of Alertmanager's v2 gettableAlert the check reads.
type amAlert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State       string   `json:"state"`
		SilencedBy  []string `json:"silencedBy"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

// alert is one alert seen by a check, whatever its source.
type alert struct {
	labels map[string]string
	state  string
}

// alerts runs one gate.alerts check.
func (c Checker) alerts(ctx context.Context, a config.AlertCheck) gate.CheckResult {
	ctx, cancel := context.WithTimeout(ctx, timeout(a.TimeoutSec))
	defer cancel()
	match, err := c.render(a.Match)
	if err != nil {
		return unknown(gate.CheckAlerts, a.URL, err)
	}
	exclude, err := c.render(a.Exclude)
	if err != nil {
		return unknown(gate.CheckAlerts, a.URL, err)
	}
	var seen []alert
	source := a.Source
	if source == "" {
		source = config.SourceAlertmanager
	}
	if source == config.SourcePrometheus {
		seen, err = c.prometheusAlerts(ctx, a)
	} else {
		seen, err = c.alertmanagerAlerts(ctx, a.URL)
	}
	if err != nil {
		return unknown(gate.CheckAlerts, a.URL, err)
	}
	keys := keyLabels(match)
	var blocking []string
	for _, al := range seen {
		if !allMatch(match, al.labels) || anyMatches(exclude, al.labels) {
			continue
		}
		blocking = append(blocking, describeAlert(al, keys))
	}
	sort.Strings(blocking)
	u := config.RedactURL(a.URL)
	if len(blocking) == 0 {
		return gate.CheckResult{Name: gate.CheckAlerts, Passed: true, URL: u,
			Reason: fmt.Sprintf("no matching alert firing at %s (%s)", u, source)}
	}
	return gate.CheckResult{Name: gate.CheckAlerts, URL: u, Blocking: blocking,
		Reason: fmt.Sprintf("%d matching alert(s) firing at %s (%s): %s", len(blocking), u, source, named(blocking))}
}

// allMatch reports whether labels satisfy every matcher (a missing label
// is "", as in Alertmanager); true for none.
func allMatch(ms []matcher.Matcher, labels map[string]string) bool {
	for _, m := range ms {
		if !m.Matches(labels[m.Name]) {
			return false
		}
	}
	return true
}

func anyMatches(ms []matcher.Matcher, labels map[string]string) bool {
	for _, m := range ms {
		if m.Matches(labels[m.Name]) {
			return true
		}
	}
	return false
}

// alertmanagerAlerts asks Alertmanager's v2 API for the active alerts that
// are neither silenced nor inhibited.
func (c Checker) alertmanagerAlerts(ctx context.Context, url string) ([]alert, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL(url)+"/api/v2/alerts?active=true&silenced=false&inhibited=false", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("GET /api/v2/alerts: reading the answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("GET /api/v2/alerts: %s: %s", resp.Status, oneLine(string(body)))
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("GET /api/v2/alerts: the answer exceeds %d bytes", maxBody)
	}
	var got []amAlert
	if err := json.Unmarshal(body, &got); err != nil {
		return nil, fmt.Errorf("GET /api/v2/alerts: not Alertmanager's alert list: %v", err)
	}
	var out []alert
	for _, g := range got {
		// The query leaves out silenced and inhibited alerts; an older or
		// foreign server that ignores it is filtered here too.
		if g.Status.State == "suppressed" || len(g.Status.SilencedBy) > 0 || len(g.Status.InhibitedBy) > 0 {
			continue
		}
		out = append(out, alert{labels: g.Labels, state: "firing"})
	}
	return out, nil
}

// prometheusAlerts asks Prometheus for its firing (and, when asked, pending)
// alerts through client_golang's API client.
func (c Checker) prometheusAlerts(ctx context.Context, a config.AlertCheck) ([]alert, error) {
	papi, err := c.promAPI(a.URL)
	if err != nil {
		return nil, err
	}
	res, err := papi.Alerts(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET /api/v1/alerts: %w", err)
	}
	var out []alert
	for _, pa := range res.Alerts {
		switch {
		case pa.State == promv1.AlertStateFiring:
		case pa.State == promv1.AlertStatePending && a.IncludePending:
		default:
			continue
		}
		labels := make(map[string]string, len(pa.Labels))
		for k, v := range pa.Labels {
			labels[string(k)] = string(v)
		}
		out = append(out, alert{labels: labels, state: string(pa.State)})
	}
	return out, nil
}

func (c Checker) promAPI(url string) (promv1.API, error) {
	cl, err := api.NewClient(api.Config{Address: baseURL(url), Client: c.client()})
	if err != nil {
		return nil, err
	}
	return promv1.NewAPI(cl), nil
}

// keyLabels are the labels shown beside an alert's name: instance,
// severity and whatever the match list selects on.
func keyLabels(match []matcher.Matcher) []string {
	keys := []string{"instance", "severity"}
	for _, m := range match {
		if m.Name != "alertname" && !contains(keys, m.Name) {
			keys = append(keys, m.Name)
		}
	}
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// describeAlert is alertname{key="value",...} (pending alerts say so).
func describeAlert(a alert, keys []string) string {
	name := a.labels["alertname"]
	if name == "" {
		name = "(no alertname)"
	}
	var parts []string
	for _, k := range keys {
		if v, ok := a.labels[k]; ok {
			parts = append(parts, k+"="+strconv.Quote(v))
		}
	}
	if len(parts) > 0 {
		name += "{" + strings.Join(parts, ",") + "}"
	}
	if a.state == "pending" {
		name += " (pending)"
	}
	return name
}
