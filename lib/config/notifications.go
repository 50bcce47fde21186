package config

import (
	"fmt"
	"slices"
	"strings"
	"text/template/parse"
)

// Notifications configures the messages sent about reboots
// (docs/notifications.md). Only the cluster child (crd-lock step) sends
// them; the daemon links no network code.
type Notifications struct {
	// URLs are shoutrrr service URLs (slack://, teams://, smtp://,
	// generic://, …). They carry secrets: never log them, use MaskURL.
	URLs []string `yaml:"urls" json:"urls"`
	// Webhooks are http:// or https:// URLs that get one JSON object per
	// event in a POST.
	Webhooks []string `yaml:"webhooks" json:"webhooks"`
	// Events are the events sent; empty means all of NotifyEvents().
	Events []string `yaml:"events" json:"events"`
	// Templates override the message of an event (Go text/template).
	Templates map[string]string `yaml:"templates" json:"templates"`
	// TimeoutSec bounds one delivery to one destination.
	TimeoutSec int `yaml:"timeout_sec" json:"timeout_sec"`
	// BlockedAfterSec is how long a node must be blocked before
	// node_blocked is sent (once per blocked episode).
	BlockedAfterSec int `yaml:"blocked_after_sec" json:"blocked_after_sec"`
}

// Enabled reports whether any destination is configured.
func (n Notifications) Enabled() bool { return len(n.URLs)+len(n.Webhooks) > 0 }

// Wants reports whether event is sent: there is a destination and the event
// is listed in events (or events is empty).
func (n Notifications) Wants(event string) bool {
	return n.Enabled() && (len(n.Events) == 0 || slices.Contains(n.Events, event))
}

// Notification events (docs/notifications.md).
const (
	// NotifyRebootStarting: the node took its reboot slot; hooks and the
	// reboot command follow.
	NotifyRebootStarting = "reboot_starting"
	// NotifyRebootCompleted: the node is back and its slot is freed.
	NotifyRebootCompleted = "reboot_completed"
	// NotifyRebootFailed: a reboot was failed or aborted after its slot was
	// taken (a hook, the reboot command, a pause, a lost lock).
	NotifyRebootFailed = "reboot_failed"
	// NotifyNodeBlocked: the node has been blocked longer than
	// blocked_after_sec.
	NotifyNodeBlocked = "node_blocked"
	// NotifyRebootLoop: the post-reboot checks found a reboot loop.
	NotifyRebootLoop = "reboot_loop"
	// NotifySlotExpired: a reboot slot expired before its node completed
	// (the node never came back, or came back too late).
	NotifySlotExpired = "slot_expired"
	// NotifyPaused and NotifyResumed: the cluster-wide pause was set or
	// removed.
	NotifyPaused  = "paused"
	NotifyResumed = "resumed"
	// NotifyRolloutHalted: the failure budget is spent; no slot is
	// admitted until an operator resumes (sent once per cluster).
	NotifyRolloutHalted = "rollout_halted"
)

// NotifyEvents lists every notification event.
func NotifyEvents() []string {
	return []string{NotifyRebootStarting, NotifyRebootCompleted, NotifyRebootFailed, NotifyNodeBlocked,
		NotifyRebootLoop, NotifySlotExpired, NotifyPaused, NotifyResumed, NotifyRolloutHalted}
}

// NotifyFields lists the fields a message template may use ({{.Node}}).
func NotifyFields() []string {
	return []string{"Event", "Node", "Group", "Lock", "FencingToken", "Reason", "Detail", "Duration", "DurationSec",
		"Since", "Time", "By", "Slot"}
}

// maxNotifyURLs bounds urls and webhooks: each event goes to every one.
const maxNotifyURLs = 20

func (v *validator) notifications() {
	n := v.cfg.Notifications
	if n.TimeoutSec < 1 || n.TimeoutSec > 300 {
		v.bad("notifications.timeout_sec", "%d must be 1 to 300 seconds (default 5): one delivery's bound; a reboot never waits for it", n.TimeoutSec)
	}
	v.positive("notifications.blocked_after_sec", n.BlockedAfterSec)
	v.atMostAYear("notifications.blocked_after_sec", n.BlockedAfterSec)
	if len(n.URLs) > maxNotifyURLs || len(n.Webhooks) > maxNotifyURLs {
		v.bad("notifications.urls", "at most %d urls and %d webhooks", maxNotifyURLs, maxNotifyURLs)
	}
	for i, u := range n.URLs {
		if err := checkServiceURL(u); err != nil {
			v.bad(fmt.Sprintf("notifications.urls[%d]", i), "%s is not a shoutrrr URL (service://…, e.g. slack://… or generic+https://host/path): %v", MaskURL(u), err)
		}
	}
	for i, u := range n.Webhooks {
		if err := checkHTTPURL(u, true); err != nil {
			v.bad(fmt.Sprintf("notifications.webhooks[%d]", i), "%s is not an http:// or https:// URL with a host: %v", MaskURL(u), err)
		}
	}
	for i, e := range n.Events {
		if !slices.Contains(NotifyEvents(), e) {
			v.bad(fmt.Sprintf("notifications.events[%d]", i), "%q is not an event: use %s", e, strings.Join(NotifyEvents(), ", "))
		}
	}
	events := make([]string, 0, len(n.Templates))
	for e := range n.Templates {
		events = append(events, e)
	}
	slices.Sort(events)
	for _, e := range events {
		field := "notifications.templates." + e
		if !slices.Contains(NotifyEvents(), e) {
			v.bad(field, "%q is not an event: use %s", e, strings.Join(NotifyEvents(), ", "))
			continue
		}
		if err := CheckNotifyTemplate(e, n.Templates[e]); err != nil {
			v.bad(field, "%v", err)
		}
	}
}

// CheckNotifyTemplate parses a message template and checks that every field
// it names is one of NotifyFields. Parsed with text/template/parse, not
// text/template, which would link net/url into every tool.
func CheckNotifyTemplate(name, text string) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("is empty: remove it to use the default message")
	}
	t := parse.New(name)
	t.Mode = parse.SkipFuncCheck
	if _, err := t.Parse(text, "", "", map[string]*parse.Tree{}); err != nil {
		return fmt.Errorf("is not a Go template: %v", err)
	}
	var bad []string
	walkFields(t.Root, func(f string) {
		if !slices.Contains(NotifyFields(), f) && !slices.Contains(bad, f) {
			bad = append(bad, f)
		}
	})
	if len(bad) > 0 {
		return fmt.Errorf("uses unknown field(s) .%s: the fields are .%s", strings.Join(bad, ", ."), strings.Join(NotifyFields(), ", ."))
	}
	return nil
}

// walkFields calls f with the first identifier of every .Field in n.
func walkFields(n parse.Node, f func(string)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walkFields(c, f)
		}
	case *parse.ActionNode:
		walkFields(n.Pipe, f)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walkFields(c, f)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walkFields(a, f)
		}
	case *parse.FieldNode:
		f(n.Ident[0])
	case *parse.IfNode:
		walkBranch(&n.BranchNode, f)
	case *parse.RangeNode:
		walkBranch(&n.BranchNode, f)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, f)
	}
}

func walkBranch(b *parse.BranchNode, f func(string)) {
	walkFields(b.Pipe, f)
	walkFields(b.List, f)
	walkFields(b.ElseList, f)
}

// checkServiceURL checks the shape service://rest (the service itself is
// known only to the child, which links shoutrrr).
func checkServiceURL(u string) error {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok || scheme == "" {
		return fmt.Errorf("missing service://")
	}
	for _, c := range scheme {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+') {
			return fmt.Errorf("the service %q must be lower-case letters, digits or '+'", scheme)
		}
	}
	if rest == "" {
		return fmt.Errorf("nothing after %s://", scheme)
	}
	if strings.ContainsAny(u, " \t\n") {
		return fmt.Errorf("contains white space")
	}
	return nil
}

// hostPart is what comes before the first '/', '?' or '#' of rest.
func hostPart(rest string) string {
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		return rest[:i]
	}
	return rest
}

// MaskURL is a notification URL safe to log or show: the scheme, and the
// host only where it names a server (http, https, generic, smtp); user
// information, path and query (where services keep tokens) become ***.
// Other services keep their tokens where a host would be (slack://a/b/c,
// telegram://token@telegram): only their scheme is shown.
func MaskURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return "***"
	}
	switch strings.TrimPrefix(strings.TrimPrefix(scheme, "generic+"), "generic") {
	case "http", "https", "", "smtp":
	default:
		return scheme + "://***"
	}
	host := hostPart(rest)
	out := scheme + "://"
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		out += "***@"
		host = host[i+1:]
	}
	out += host
	if len(rest) > len(hostPart(rest)) {
		out += "/***"
	}
	return out
}
