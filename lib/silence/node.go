package silence

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/silence/matcher"

	"github.com/clusterrebootd/clusterrebootd/lib/silence/record"
)

// Node is one node's silence, as configured: the same matchers on every
// Alertmanager listed.
type Node struct {
	Clients   []Client
	Matchers  []matcher.Matcher
	CreatedBy string
	// Required makes a silence that cannot be created stop the reboot.
	Required bool
	// Name is node_name, Lock the lock_key; both go into the comment.
	Name, Lock string
	// StateDir holds the record (record.RecordFile).
	StateDir string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// FromConfig is cfg's silence for its node; nil when silences are not
// configured. The matchers are rendered for cfg.NodeName.
func FromConfig(cfg config.Config) (*Node, error) {
	s := cfg.Silences
	if !s.Enabled() {
		return nil, nil
	}
	lock := strings.TrimSuffix(cfg.LockKey, "/")
	ms, err := matcher.Render(s.Matchers, matcher.Data{Node: cfg.NodeName, Group: cfg.Group, Lock: lock})
	if err != nil {
		return nil, fmt.Errorf("silence: silences.matchers: %v", err)
	}
	timeout := time.Duration(s.TimeoutSec) * time.Second
	// No keep-alive: the cluster child makes a few requests and exits, and
	// no idle connection outlives them. No proxy from the environment.
	hc := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	n := &Node{Matchers: ms, CreatedBy: s.CreatedByFor(cfg.NodeName), Required: s.Required, Name: cfg.NodeName, Lock: lock,
		StateDir: cfg.StateDir}
	for _, u := range s.AlertmanagerURL {
		n.Clients = append(n.Clients, Client{URL: u, HTTP: hc, Timeout: timeout})
	}
	return n, nil
}

func (n *Node) now() time.Time {
	if n.Now != nil {
		return n.Now()
	}
	return time.Now()
}

// Slot is what a silence is for: the reboot slot a node took under the lock.
type Slot struct {
	// Key is the slot's etcd key, FencingToken the lock seat's token.
	Key          string
	FencingToken int64
	// EndsAt is when the silence ends by itself: no later than the slot's
	// lease.
	EndsAt time.Time
}

// Comment is the silence's comment: it names the node, the lock, the
// fencing token and clusterrebootd.
func (n *Node) Comment(s Slot) string {
	return fmt.Sprintf("clusterrebootd: node %s is rebooting (lock %s, fencing token %d, slot %s); expired when it is back and healthy, ends by itself with the slot's lease at %s",
		n.Name, n.Lock, s.FencingToken, s.Key, s.EndsAt.UTC().Format(time.RFC3339))
}

// Ensure creates the silence on every Alertmanager, or updates the one this
// node already has there (recorded in state_dir, or found by its createdBy
// and matchers: a retried cycle creates no second one), and records the IDs.
// errs holds one error per Alertmanager that failed, naming it.
func (n *Node) Ensure(ctx context.Context, s Slot) (record.Record, []error) {
	prev, _, _ := record.ReadRecord(n.StateDir)
	rec := record.Record{Node: n.Name, Lock: n.Lock, SlotKey: s.Key, FencingToken: s.FencingToken}
	var errs []error
	for _, c := range n.Clients {
		id, err := n.ensureOne(ctx, c, prev.ID(c.Name()), s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rec.Silences = append(rec.Silences, record.Entry{Alertmanager: c.Name(), ID: id, EndsAt: s.EndsAt.UTC()})
	}
	if err := record.WriteRecord(n.StateDir, rec); err != nil {
		errs = append(errs, err)
	}
	return rec, errs
}

func (n *Node) ensureOne(ctx context.Context, c Client, prevID string, s Slot) (string, error) {
	sil := Silence{Matchers: n.Matchers, StartsAt: n.now().UTC(), EndsAt: s.EndsAt.UTC(), CreatedBy: n.CreatedBy, Comment: n.Comment(s)}
	old, err := n.find(ctx, c, prevID)
	if err != nil {
		// Unreachable or broken: a create would fail the same way, after
		// another timeout.
		return "", err
	}
	if old != nil {
		// Alertmanager updates it in place, or (when the change would
		// rewrite its history) expires it and answers with a new ID.
		sil.ID, sil.StartsAt = old.ID, old.StartsAt
	}
	return c.Create(ctx, sil)
}

// find is this node's live silence on c: the recorded one, else one with
// this node's createdBy and matchers (a record lost to a crash); nil when
// there is none.
func (n *Node) find(ctx context.Context, c Client, id string) (*Silence, error) {
	if id != "" {
		// The recorded one is ours whatever its createdBy (created_by may
		// have changed since), as long as it silences the same alerts.
		if s, err := c.Get(ctx, id); err == nil && s.Live() && sameMatchers(s.Matchers, n.Matchers) {
			return &s, nil
		}
	}
	all, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range all {
		if s.Live() && n.ours(s) {
			return &s, nil
		}
	}
	return nil, nil
}

// ours: the silence has this node's createdBy and exactly its matchers.
func (n *Node) ours(s Silence) bool {
	return s.CreatedBy == n.CreatedBy && sameMatchers(s.Matchers, n.Matchers)
}

// sameMatchers compares two lists of matchers in any order.
func sameMatchers(a, b []matcher.Matcher) bool {
	key := func(ms []matcher.Matcher) []string {
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = m.String()
		}
		slices.Sort(out)
		return out
	}
	return len(a) == len(b) && slices.Equal(key(a), key(b))
}

// Extend moves the end of the recorded silences to endsAt (the slot's lease
// was renewed). A silence that is gone is not re-created.
func (n *Node) Extend(ctx context.Context, s Slot) (record.Record, []error) {
	rec, ok, err := record.ReadRecord(n.StateDir)
	if err != nil || !ok {
		return rec, nilOr(err)
	}
	var errs []error
	for i, e := range rec.Silences {
		c, ok := n.client(e.Alertmanager)
		if !ok {
			continue
		}
		old, err := c.Get(ctx, e.ID)
		if errors.Is(err, ErrNotFound) || err == nil && !old.Live() {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		old.EndsAt, old.Comment = s.EndsAt.UTC(), n.Comment(Slot{Key: rec.SlotKey, FencingToken: rec.FencingToken, EndsAt: s.EndsAt})
		id, err := c.Create(ctx, old)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rec.Silences[i].ID, rec.Silences[i].EndsAt = id, s.EndsAt.UTC()
	}
	if err := record.WriteRecord(n.StateDir, rec); err != nil {
		errs = append(errs, err)
	}
	return rec, errs
}

// Expire ends the recorded silences and removes the record; it is a no-op
// without one. n may be nil (silences no longer configured): the record is
// then only removed, and its silences end by themselves.
func (n *Node) Expire(ctx context.Context, stateDir string) (expired []record.Entry, errs []error) {
	rec, ok, err := record.ReadRecord(stateDir)
	if err != nil || !ok {
		return nil, nilOr(err)
	}
	for _, e := range rec.Silences {
		c, ok := n.client(e.Alertmanager)
		if !ok {
			errs = append(errs, fmt.Errorf("silence: %s is no longer in silences.alertmanager_url: silence %s there ends by itself at %s",
				e.Alertmanager, e.ID, e.EndsAt.Format(time.RFC3339)))
			continue
		}
		if err := c.Expire(ctx, e.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		expired = append(expired, e)
	}
	if err := record.RemoveRecord(stateDir); err != nil {
		errs = append(errs, err)
	}
	return expired, errs
}

// client is the configured Alertmanager named name (masked URL).
func (n *Node) client(name string) (Client, bool) {
	if n == nil {
		return Client{}, false
	}
	for _, c := range n.Clients {
		if c.Name() == name {
			return c, true
		}
	}
	return Client{}, false
}

func nilOr(err error) []error {
	if err == nil {
		return nil
	}
	return []error{err}
}
