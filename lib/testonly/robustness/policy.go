package robustness

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// The built-in cluster policies as docs/configuration.md states them
// ("cluster_policies"), read from the history: the members are the nodes
// with a health record or a reboot slot, and the node that asks; a member
// is healthy when it holds no slot and its record does not say it is
// rebooting; the node that asks counts as down.
//
// A record that says rebooting may be stale: its node completed its reboot
// (<ns>rollout/done/<node>, written by the completion) and has not
// published since. A take is judged on what is true (such a node is up);
// a refusal on what the admission can know (it reads the record, not the
// completions, and counts the node down until it publishes again: the safe
// side, and no liveness defect).

// PolicyRules are the policies every node of a run was configured with.
type PolicyRules struct {
	// MinHealthy is min_healthy_absolute, MinFraction min_healthy_fraction
	// (0: not set).
	MinHealthy  int
	MinFraction float64
	// Fallbacks are fallback_nodes when forbid_if_only_fallback_left is set.
	Fallbacks []string
}

// active reports whether any policy is set.
func (p PolicyRules) active() bool {
	return p.MinHealthy > 0 || p.MinFraction > 0 || len(p.Fallbacks) > 0
}

// healthy reports, for node asking, the members and which of the others
// are healthy, by the model's state; asRead: a record that says rebooting
// is down even when its node completed since (what the admission reads).
func (m *model) healthy(node string, asRead bool) (members int, healthy map[string]bool) {
	slotted, state := map[string]bool{}, map[string]string{}
	for _, s := range m.slots() {
		slotted[s.Node] = true
	}
	for _, r := range m.records() {
		state[r.Node] = r.State
	}
	all := map[string]bool{node: true}
	for n := range slotted {
		all[n] = true
	}
	for n := range state {
		all[n] = true
	}
	healthy = map[string]bool{}
	for n := range all {
		st, published := state[n]
		if n != node && !slotted[n] && published && (st != "rebooting" || (!asRead && m.backSince(n))) {
			healthy[n] = true
		}
	}
	return len(all), healthy
}

// backSince reports whether node completed a reboot after its record was
// written: the record's "rebooting" is stale.
func (m *model) backSince(node string) bool {
	done, ok := m.kvs[m.r.NS+"rollout/done/"+node]
	return ok && done.ModRevision > m.kvs[m.r.NS+"nodes/"+node].ModRevision
}

// allows reports whether the policies let node go down by the model's
// state (asRead: healthy), and what it counted.
func (m *model) allows(node string, asRead bool) (string, bool) {
	p := m.r.Policy
	if !p.active() {
		return "", true
	}
	size, healthy := m.healthy(node, asRead)
	n := len(healthy)
	what := fmt.Sprintf("%d of %d nodes stay healthy while %s reboots (%s)", n, size, node, joinOr(slices.Sorted(maps.Keys(healthy)), "none"))
	if p.MinHealthy > 0 && n < p.MinHealthy {
		return fmt.Sprintf("%s, min_healthy_absolute %d", what, p.MinHealthy), false
	}
	if need := int(math.Ceil(p.MinFraction*float64(size) - 1e-9)); p.MinFraction > 0 && n < need {
		return fmt.Sprintf("%s, min_healthy_fraction %.2f needs %d", what, p.MinFraction, need), false
	}
	fallback, up := false, false
	for _, f := range p.Fallbacks {
		fallback = fallback || f == node
		up = up || (f != node && healthy[f])
	}
	if fallback && !up {
		return fmt.Sprintf("%s is a fallback node and no other fallback node (%s) is healthy", node, strings.Join(p.Fallbacks, ", ")), false
	}
	return what, true
}

// policed checks the slot taken at rev by node against the policies, on
// the state after the take (see InvPolicy).
func (c *checker) policed(rev int64, node string) {
	if !c.m.r.Policy.active() {
		return
	}
	c.stats.Policed++
	if why, ok := c.m.allows(node, false); !ok {
		c.violate(InvPolicy, rev, "%s took a slot: %s", node, why)
	}
}
