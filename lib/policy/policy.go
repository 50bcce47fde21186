// Package policy holds the cluster view every node publishes and reads
// (health records, reboot slots, the cluster-wide pause) and the built-in
// cluster policies evaluated on it before the health script runs:
// min_healthy_absolute, min_healthy_fraction and forbid_if_only_fallback_left.
//
// Evaluate is a pure function of the view: the daemon calls it before the
// lock on the last view it read, and the cluster child again under the lock
// on a fresh one.
package policy

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

// Node states a health record can carry.
const (
	StateIdle        = "idle"         // no reboot needed
	StateNeedsReboot = "needs_reboot" // a reboot is needed, not yet attempted
	StateBlocked     = "blocked"      // needed, but a step said "not now"
	StateWaiting     = "waiting"      // queued for the lock
	StateRebooting   = "rebooting"    // holds a reboot slot
	StatePostReboot  = "post_reboot"  // back, running post-reboot checks
)

// ProtocolVersion is the version of the values the daemon writes under a
// namespace (health records, reboot slots, lock annotations, the pause), in
// their field "v". It is a minor version: a reader accepts a value of any
// version, ignores the fields it does not know, and reads a value it cannot
// decode on the safe side (a record: the node is not healthy; a slot: it
// counts against every lock; an annotation: max_holders 1; the pause: still
// paused). A change older readers would misread moves to a new key prefix
// instead (docs/cluster-protocol.md, "Versions"). A value without "v" was
// written before versions were numbered and reads as version 0.
const ProtocolVersion = 3

// NodeRecord is one node's published health record (<ns>nodes/<node>). It
// lives on a lease of a few publish intervals, so a node that stops
// publishing disappears from the view.
type NodeRecord struct {
	Node           string    `json:"node"`
	State          string    `json:"state"`
	Reason         string    `json:"reason,omitempty"`
	RebootRequired bool      `json:"reboot_required"`
	LastCheck      time.Time `json:"last_check"`
	Group          string    `json:"group,omitempty"`
	Version        string    `json:"version,omitempty"`
	// Lock is the publisher's lock_key: records of another lock in the same
	// namespace are a configuration error (lib/slot). BootID and MachineID
	// tell two machines with one node_name apart.
	Lock      string `json:"lock,omitempty"`
	BootID    string `json:"boot_id,omitempty"`
	MachineID string `json:"machine_id,omitempty"`
	// Wave is the node's wave (docs/rollout.md); NeedsRebootSince is when
	// its detectors started saying a reboot is needed, without a break.
	Wave             int        `json:"wave,omitempty"`
	NeedsRebootSince *time.Time `json:"needs_reboot_since,omitempty"`
	// NeedsRebootLease (hex) is a lease granted when the need began and
	// never renewed: its age, as etcd measures it, is how long the node has
	// needed its reboot, which is what wave_timeout_sec compares (no
	// node's clock: lib/slot Count.NeedAge).
	NeedsRebootLease string `json:"needs_reboot_lease,omitempty"`
	// Rules are the fleet's rules as this node is configured.
	Rules *Rules `json:"rules,omitempty"`
	// KernelRunning and KernelInstalled are the running kernel's release
	// and the newest installed kernel of its flavor (lib/detect.Kernels;
	// empty when the node cannot tell); BootedAt is when the node booted,
	// to the second, by its own clock (nil: unknown). For the compliance
	// report: no decision reads them.
	KernelRunning   string     `json:"kernel_running,omitempty"`
	KernelInstalled string     `json:"kernel_installed,omitempty"`
	BootedAt        *time.Time `json:"booted_at,omitempty"`
	// V is the protocol version the writer speaks (ProtocolVersion).
	V int `json:"v"`
}

// Slot is a reboot slot (<ns>rebooting/<node>): the node is rebooting.
type Slot struct {
	Node   string    `json:"node"`
	Lock   string    `json:"lock,omitempty"`
	Group  string    `json:"group,omitempty"`
	Since  time.Time `json:"since"`
	BootID string    `json:"boot_id,omitempty"`
	// Wave is the node's wave; Via says which entry point took the slot
	// (daemon, pipeline, fleetlock).
	Wave int    `json:"wave,omitempty"`
	Via  string `json:"via,omitempty"`
	// TTLSec is the slot lease's remaining time to live when read.
	TTLSec int64 `json:"ttl_sec,omitempty"`
}

// Pause is the cluster-wide kill switch (<ns>disable).
type Pause struct {
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	Since  time.Time `json:"since"`
	// V is the protocol version the writer speaks (ProtocolVersion).
	V int `json:"v"`
}

// View is what a node knows about the cluster at ReadAt.
type View struct {
	Nodes     []NodeRecord `json:"nodes"`
	Rebooting []Slot       `json:"rebooting"`
	Paused    *Pause       `json:"paused,omitempty"`
	// Halted is the rollout's halt (docs/rollout.md): no slot is admitted
	// until an operator resumes; Reason names the failed nodes.
	Halted *Pause `json:"halted,omitempty"`
	// Holds are operators' holds: these nodes do not reboot.
	Holds []Override `json:"holds,omitempty"`
	// Requests are operators' reboot requests: these nodes reboot at their
	// next chance although no detector says so.
	Requests []Override `json:"requests,omitempty"`
	ReadAt   time.Time  `json:"read_at"`
}

// Override is an operator's hold or reboot request of one node, with the
// pause's audit fields.
type Override struct {
	Node string `json:"node"`
	// Now, on a reboot request, asks for an emergency reboot: outside the
	// node's windows, still through every other rule.
	Now bool `json:"now,omitempty"`
	Pause
	// Revision is the key's modification revision (a request is consumed
	// only if it did not change since it was acted on).
	Revision int64 `json:"revision,omitempty"`
}

// Held is node's hold, or nil.
func (v View) Held(node string) *Override { return find(v.Holds, node) }

// Requested is node's reboot request, or nil.
func (v View) Requested(node string) *Override { return find(v.Requests, node) }

func find(os []Override, node string) *Override {
	for i := range os {
		if os[i].Node == node {
			return &os[i]
		}
	}
	return nil
}

// Healthy reports whether node counts as up: it has a live record and no
// reboot slot, and its record does not say it is rebooting.
func (v View) Healthy(node string) bool {
	for _, s := range v.Rebooting {
		if s.Node == node {
			return false
		}
	}
	for _, n := range v.Nodes {
		if n.Node == node {
			return n.State != StateRebooting
		}
	}
	return false
}

// Members is every node the view knows of (records and slots) plus self,
// sorted.
func (v View) Members(self string) []string {
	set := map[string]bool{}
	if self != "" {
		set[self] = true
	}
	for _, n := range v.Nodes {
		set[n.Node] = true
	}
	for _, s := range v.Rebooting {
		set[s.Node] = true
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Rules, as named in a Decision.
const (
	RuleClusterView  = "cluster_view"
	RuleAbsolute     = "min_healthy_absolute"
	RuleFraction     = "min_healthy_fraction"
	RuleOnlyFallback = "forbid_if_only_fallback_left"
)

// Decision is the verdict of the built-in policies for one candidate node.
type Decision struct {
	Allowed bool `json:"allowed"`
	// Rule names the broken rule when not allowed.
	Rule string `json:"rule,omitempty"`
	// Reason is one line for logs and output.
	Reason string `json:"reason"`
	// ClusterSize counts every known member, the candidate included.
	ClusterSize int `json:"cluster_size"`
	// HealthyAfter counts healthy members other than the candidate: the
	// healthy nodes left while the candidate reboots.
	HealthyAfter int `json:"healthy_after"`
	// FallbackUp lists the healthy fallback nodes other than the candidate.
	FallbackUp []string `json:"fallback_up"`
}

// Active reports whether any built-in policy is configured.
func Active(p config.Policies) bool {
	return p.MinHealthyAbsolute > 0 || p.MinHealthyFraction > 0 || p.ForbidIfOnlyFallbackLeft
}

// Summary is what the built-in policies and the health script's
// CLUSTER_SIZE need of the view, as counts: a reader can get it with
// count-only ranges and a few single keys, whatever the fleet's size
// (docs/scaling.md). View.Summarize computes it from a whole view; both
// give the same decision.
type Summary struct {
	// ClusterSize counts every member: the nodes with a record or a slot,
	// self included.
	ClusterSize int `json:"cluster_size"`
	// HealthyOthers counts the healthy members other than self.
	HealthyOthers int `json:"healthy_others"`
	// FallbackUp lists the healthy fallback nodes other than self.
	FallbackUp []string `json:"fallback_up"`
	// ReadAt is when it was read (zero: never).
	ReadAt time.Time `json:"read_at"`
}

// Summarize is the view's summary for self with these fallback nodes.
func (v View) Summarize(self string, fallbacks []string) Summary {
	members := v.Members(self)
	s := Summary{ClusterSize: len(members), FallbackUp: []string{}, ReadAt: v.ReadAt}
	for _, m := range members {
		if m != self && v.Healthy(m) {
			s.HealthyOthers++
		}
	}
	for _, f := range fallbacks {
		if f != self && v.Healthy(f) {
			s.FallbackUp = append(s.FallbackUp, f)
		}
	}
	sort.Strings(s.FallbackUp)
	return s
}

// Evaluate decides whether self may go down now, counting self as down.
// With a policy configured and no view read yet, the answer is no: the
// policies cannot be checked blind.
func Evaluate(v View, self string, p config.Policies) Decision {
	return EvaluateSummary(v.Summarize(self, p.FallbackNodes), self, p)
}

// EvaluateSummary is Evaluate on a summary (the same rules, the same words).
func EvaluateSummary(s Summary, self string, p config.Policies) Decision {
	d := Decision{ClusterSize: s.ClusterSize, HealthyAfter: s.HealthyOthers, FallbackUp: append([]string{}, s.FallbackUp...)}
	sort.Strings(d.FallbackUp)
	isFallback := false
	for _, f := range p.FallbackNodes {
		if f == self {
			isFallback = true
		}
	}
	switch {
	case !Active(p):
		d.Allowed, d.Reason = true, "no cluster policy configured"
	case s.ReadAt.IsZero():
		d.Rule, d.Reason = RuleClusterView, "no cluster view has been read from etcd yet; policies cannot be checked"
	case p.MinHealthyAbsolute > 0 && d.HealthyAfter < p.MinHealthyAbsolute:
		d.Rule = RuleAbsolute
		d.Reason = fmt.Sprintf("%d of %d nodes would stay healthy while %s reboots, min_healthy_absolute is %d", d.HealthyAfter, d.ClusterSize, self, p.MinHealthyAbsolute)
	case p.MinHealthyFraction > 0 && d.HealthyAfter < needed(p.MinHealthyFraction, d.ClusterSize):
		d.Rule = RuleFraction
		d.Reason = fmt.Sprintf("%d of %d nodes would stay healthy while %s reboots, min_healthy_fraction %.2f needs %d", d.HealthyAfter, d.ClusterSize, self, p.MinHealthyFraction, needed(p.MinHealthyFraction, d.ClusterSize))
	case p.ForbidIfOnlyFallbackLeft && isFallback && len(d.FallbackUp) == 0:
		d.Rule = RuleOnlyFallback
		d.Reason = fmt.Sprintf("%s is the only healthy fallback node (fallback_nodes: %s)", self, strings.Join(p.FallbackNodes, ", "))
	default:
		d.Allowed = true
		d.Reason = fmt.Sprintf("%d of %d nodes stay healthy", d.HealthyAfter, d.ClusterSize)
	}
	return d
}

// needed is the smallest count that reaches fraction of size.
func needed(fraction float64, size int) int {
	return int(math.Ceil(fraction*float64(size) - 1e-9))
}
