package notifications

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

// Delivery is one message to one destination.
type Delivery struct {
	Event string `json:"event"`
	// Destination is the masked URL (config.MaskURL).
	Destination string `json:"destination"`
	// Error says why it failed, without the URL's secrets.
	Error string `json:"error,omitempty"`
}

// Report is what the notifications of one step became.
type Report struct {
	Sent   []Delivery `json:"sent,omitempty"`
	Failed []Delivery `json:"failed,omitempty"`
}

// queueLen bounds the messages waiting for one destination; a step sends
// one or two.
const queueLen = 16

// destination is one URL with its queue, sent in order by one goroutine.
type destination struct {
	name  string
	send  func(ctx context.Context, p Payload) error
	queue chan Payload
}

// Sender queues messages and sends them in the background.
type Sender struct {
	cfg       config.Notifications
	templates Templates
	log       *slog.Logger
	timeout   time.Duration

	// ctx ends when Wait gives up: what is still being sent is abandoned.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	dests   []*destination
	started bool
	closed  bool
	report  Report
}

// New returns a notifier for cfg (nothing is started before the first Send).
// A template that does not parse (config validation prevents it) falls back
// to the defaults.
func New(cfg config.Notifications, log *slog.Logger) *Sender {
	ts, err := ParseTemplates(cfg.Templates)
	if err != nil {
		log.Warn("notification template unusable; using the default messages", "event", "notify_template_error", "error", err.Error())
		ts, _ = ParseTemplates(nil)
	}
	timeout := time.Duration(cfg.TimeoutSec) * time.Second
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Sender{cfg: cfg, templates: ts, log: log, timeout: timeout, ctx: ctx, cancel: cancel}
}

// Wants reports whether f.Event would be sent anywhere.
func (n *Sender) Wants(event string) bool { return n != nil && n.cfg.Wants(event) }

// Send queues f for every destination and returns at once: it never waits
// for a destination. The message is rendered now.
func (n *Sender) Send(f Fields) {
	if !n.Wants(f.Event) {
		return
	}
	p := Payload{V: PayloadVersion, Fields: f, Message: n.templates.Render(f), Source: "clusterrebootd"}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		n.failLocked(f.Event, "all", "not sent: the step had ended")
		return
	}
	n.startLocked()
	for _, d := range n.dests {
		select {
		case d.queue <- p:
		default:
			n.failLocked(f.Event, d.name, "not sent: too many messages queued")
		}
	}
}

// startLocked builds the destinations and starts one sender each.
func (n *Sender) startLocked() {
	if n.started {
		return
	}
	n.started = true
	for _, u := range n.cfg.URLs {
		n.dests = append(n.dests, &destination{name: config.MaskURL(u), send: shoutrrrSender(u, n.timeout), queue: make(chan Payload, queueLen)})
	}
	for _, u := range n.cfg.Webhooks {
		n.dests = append(n.dests, &destination{name: config.MaskURL(u), send: webhookSender(u, n.timeout), queue: make(chan Payload, queueLen)})
	}
	for _, d := range n.dests {
		n.wg.Add(1)
		go n.run(d)
	}
}

// run sends d's queue in order, each message bounded by the timeout.
func (n *Sender) run(d *destination) {
	defer n.wg.Done()
	for p := range d.queue {
		if n.ctx.Err() != nil {
			n.fail(p.Event, d.name, "not sent: the step ended before its turn (notifications.timeout_sec)")
			continue
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.timeout)
		err := d.send(ctx, p)
		cancel()
		if err != nil {
			n.fail(p.Event, d.name, err.Error())
			continue
		}
		n.mu.Lock()
		n.report.Sent = append(n.report.Sent, Delivery{Event: p.Event, Destination: d.name})
		n.mu.Unlock()
		n.log.Info("notification sent", "event", "notify_sent", "notification", p.Event, "destination", d.name)
	}
}

func (n *Sender) fail(event, dest, why string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failLocked(event, dest, why)
}

func (n *Sender) failLocked(event, dest, why string) {
	n.report.Failed = append(n.report.Failed, Delivery{Event: event, Destination: dest, Error: why})
	n.log.Warn("notification failed; the reboot goes on regardless", "event", "notify_failed", "notification", event,
		"destination", dest, "error", why)
}

// Wait lets the queued messages go out for at most one more timeout, then
// abandons the rest (reported as failed) and returns the report. Call it
// once, when the step's work is done: nothing waits for it before.
func (n *Sender) Wait() Report {
	if n == nil {
		return Report{}
	}
	n.mu.Lock()
	n.closed = true
	for _, d := range n.dests {
		close(d.queue)
	}
	n.mu.Unlock()
	done := make(chan struct{})
	go func() {
		n.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(n.timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		n.cancel()
		<-done
	}
	n.cancel()
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.report
}
