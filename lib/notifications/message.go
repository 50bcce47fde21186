// Package notifications sends notifications about reboots (reboot starting,
// completed, failed, node blocked, reboot loop, slot expired, cluster paused
// or resumed) to shoutrrr services and plain JSON webhooks.
//
// Delivery is best effort and never delays a reboot: Send only queues; each
// destination sends its queue in order, each delivery bounded by
// notifications.timeout_sec; Wait, at the end of a step, gives what is left
// one more timeout and reports what was sent and what failed. URLs are
// shown only through config.MaskURL. Only the cluster child (crd-lock step)
// links this package: it links net/http.
package notifications

import (
	"bytes"
	"fmt"
	"text/template"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

// Fields are what a message template can use, and the JSON a webhook gets
// (with the rendered message). Times are RFC 3339 in UTC.
type Fields struct {
	// Event is one of config.NotifyEvents().
	Event string `json:"event"`
	// Node is the node the event is about.
	Node string `json:"node"`
	// Group is the node's group ("" without groups).
	Group string `json:"group,omitempty"`
	// Lock is the lock key of the node's group.
	Lock string `json:"lock,omitempty"`
	// FencingToken is the lock entry's create revision of the reboot.
	FencingToken int64 `json:"fencing_token,omitempty"`
	// Reason is a reason token (reboot_failed, node_blocked) or the
	// operator's reason (paused, resumed).
	Reason string `json:"reason,omitempty"`
	// Detail says more, one line.
	Detail string `json:"detail,omitempty"`
	// Duration is how long the reboot took (reboot_completed), e.g. 3m12s,
	// DurationSec the same in seconds.
	Duration    string `json:"duration,omitempty"`
	DurationSec int64  `json:"duration_sec,omitempty"`
	// Since is when the blocked episode, the pause or the slot began.
	Since string `json:"since,omitempty"`
	// Time is when the event was noticed.
	Time string `json:"time"`
	// By is who paused or resumed (a node name).
	By string `json:"by,omitempty"`
	// Slot is the node's reboot slot key.
	Slot string `json:"slot,omitempty"`
}

// Payload is the JSON object a webhook gets: the fields and the message.
type Payload struct {
	// V is the payload's version.
	V int `json:"v"`
	Fields
	// Message is the rendered template.
	Message string `json:"message"`
	// Source is always "clusterrebootd".
	Source string `json:"source"`
}

// PayloadVersion is Payload.V.
const PayloadVersion = 1

// SetDuration fills Duration and DurationSec.
func (f *Fields) SetDuration(d time.Duration) {
	d = d.Round(time.Second)
	f.Duration, f.DurationSec = d.String(), int64(d/time.Second)
}

// Stamp formats t for Since and Time.
func Stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// DefaultTemplates are the messages used unless notifications.templates
// overrides one (docs/notifications.md lists them).
func DefaultTemplates() map[string]string {
	return map[string]string{
		config.NotifyRebootStarting:  `clusterrebootd: {{.Node}} is rebooting (lock {{.Lock}}{{if .Group}}, group {{.Group}}{{end}}, fencing token {{.FencingToken}})`,
		config.NotifyRebootCompleted: `clusterrebootd: {{.Node}} rebooted and passed its post-reboot checks in {{.Duration}}`,
		config.NotifyRebootFailed:    `clusterrebootd: the reboot of {{.Node}} was aborted ({{.Reason}}): {{.Detail}}`,
		config.NotifyNodeBlocked:     `clusterrebootd: {{.Node}} needs a reboot but has been blocked since {{.Since}} ({{.Reason}}): {{.Detail}}`,
		config.NotifyRebootLoop:      `clusterrebootd: reboot loop on {{.Node}}: {{.Detail}}; it reboots no more until an operator runs clusterrebootd resume --local on it`,
		config.NotifySlotExpired:     `clusterrebootd: the reboot slot of {{.Node}} (taken {{.Since}}) expired before the node completed its reboot: {{.Detail}}`,
		config.NotifyPaused:          `clusterrebootd: reboots are paused cluster-wide by {{.By}}: {{.Reason}}`,
		config.NotifyResumed:         `clusterrebootd: reboots are resumed cluster-wide (by {{.By}}){{if .Detail}}: {{.Detail}} (why: {{.Reason}}){{end}}`,
		config.NotifyRolloutHalted:   `clusterrebootd: the rollout halted itself (seen by {{.Node}}); no node reboots until an operator runs clusterrebootd resume --reason TEXT: {{.Detail}}`,
	}
}

// Templates are the parsed message templates of every event.
type Templates map[string]*template.Template

// ParseTemplates parses the defaults with the configured overrides on top.
func ParseTemplates(overrides map[string]string) (Templates, error) {
	ts := Templates{}
	for event, text := range DefaultTemplates() {
		if o, ok := overrides[event]; ok {
			text = o
		}
		t, err := template.New(event).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, fmt.Errorf("notifications.templates.%s: %w", event, err)
		}
		ts[event] = t
	}
	return ts, nil
}

// Render is the message of f.Event; a template that fails to execute gives
// a plain fallback naming the failure rather than no message.
func (ts Templates) Render(f Fields) string {
	t := ts[f.Event]
	if t == nil {
		return fmt.Sprintf("clusterrebootd: %s on %s", f.Event, f.Node)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, f); err != nil {
		return fmt.Sprintf("clusterrebootd: %s on %s (the template failed: %v)", f.Event, f.Node, err)
	}
	return b.String()
}
