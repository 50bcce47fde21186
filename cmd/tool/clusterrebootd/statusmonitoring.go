package clusterrebootd

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
	"github.com/clusterrebootd/clusterrebootd/lib/silence/record"
)

// monitoringState is what status says about the monitoring integrations:
// the alert checks the gate asks, where silences go and this node's current
// ones (its record in state_dir), and where notifications go. Every URL is
// masked; nothing here asks a server.
type monitoringState struct {
	AlertChecks   []string `json:"alert_checks,omitempty"`
	Silences      []string `json:"silences_alertmanagers,omitempty"`
	SilencesNow   []string `json:"silences_active,omitempty"`
	SilenceError  string   `json:"silences_error,omitempty"`
	Notifications []string `json:"notifications,omitempty"`
	NotifyEvents  []string `json:"notification_events,omitempty"`
}

func readMonitoring(cfg config.Config) *monitoringState {
	var m monitoringState
	for _, a := range cfg.Gate.Alerts {
		src := a.Source
		if src == "" {
			src = "alertmanager"
		}
		m.AlertChecks = append(m.AlertChecks, fmt.Sprintf("alerts %s (%s)%s", config.RedactURL(a.URL), src, phasesOf(a.Phases)))
	}
	for _, q := range cfg.Gate.PromQL {
		m.AlertChecks = append(m.AlertChecks, fmt.Sprintf("promql %s: %s%s", config.RedactURL(q.URL), q.Expr, phasesOf(q.Phases)))
	}
	for _, u := range cfg.Silences.AlertmanagerURL {
		m.Silences = append(m.Silences, config.RedactURL(u))
	}
	if rec, ok, err := record.ReadRecord(cfg.StateDir); err != nil {
		m.SilenceError = localReadError(err)
	} else if ok {
		for _, e := range rec.Silences {
			m.SilencesNow = append(m.SilencesNow, fmt.Sprintf("%s at %s until %s", e.ID, e.Alertmanager, e.EndsAt.UTC().Format(time.RFC3339)))
		}
	}
	for _, u := range cfg.Notifications.URLs {
		m.Notifications = append(m.Notifications, config.MaskURL(u))
	}
	for _, u := range cfg.Notifications.Webhooks {
		m.Notifications = append(m.Notifications, config.MaskURL(u))
	}
	if len(m.Notifications) > 0 {
		m.NotifyEvents = cfg.Notifications.Events
		if len(m.NotifyEvents) == 0 {
			m.NotifyEvents = config.NotifyEvents()
		}
	}
	if len(m.AlertChecks)+len(m.Silences)+len(m.SilencesNow)+len(m.Notifications) == 0 && m.SilenceError == "" {
		return nil
	}
	return &m
}

func phasesOf(p []string) string {
	if len(p) == 0 {
		return ""
	}
	return " in " + strings.Join(p, ", ")
}

// text writes the monitoring lines of status --format text.
func (m *monitoringState) text(w io.Writer) {
	if m == nil {
		return
	}
	for _, a := range m.AlertChecks {
		report.Line(w, "gate checks", a)
	}
	if len(m.Silences) > 0 {
		report.Line(w, "silences to", strings.Join(m.Silences, ", "))
	}
	for _, s := range m.SilencesNow {
		report.Line(w, "silenced now", s)
	}
	if m.SilenceError != "" {
		report.Line(w, "silences", "unknown: "+m.SilenceError)
	}
	if len(m.Notifications) > 0 {
		report.Line(w, "notifications", strings.Join(m.Notifications, ", ")+" ("+strings.Join(m.NotifyEvents, ", ")+")")
	}
}
