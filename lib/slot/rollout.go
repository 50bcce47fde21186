package slot

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// The rollout's records (docs/rollout.md, "Keys"), all under <ns>rollout/:
// what the admission reads besides the slots to apply the failure budget,
// pacing and waves.

// RolloutDir is <ns>rollout/.
func RolloutDir(ns string) string { return ns + "rollout/" }

// InflightDir holds the reboots in flight: <ns>rollout/inflight/.
func InflightDir(ns string) string { return RolloutDir(ns) + "inflight/" }

// InflightKey is node's in-flight record.
func InflightKey(ns, node string) string { return InflightDir(ns) + node }

// FailuresDir holds the failure records: <ns>rollout/failures/.
func FailuresDir(ns string) string { return RolloutDir(ns) + "failures/" }

// FailureKey is one failure of node; id tells its failures apart (the
// slot's lease for a reboot that failed).
func FailureKey(ns, node, id string) string { return FailuresDir(ns) + node + "/" + id }

// HaltsDir holds the halts, one key per writer and scope:
// <ns>rollout/halts/<writer>/<scope>. A node's etcd role writes only its
// own (docs/security.md): no node can delete a halt another wrote.
func HaltsDir(ns string) string { return RolloutDir(ns) + "halts/" }

// HaltKey is writer's halt of scope (ScopeID).
func HaltKey(ns, writer, scope string) string { return HaltsDir(ns) + writer + "/" + scope }

// LegacyHaltKey is the one halt key of protocol versions before 3,
// <ns>rollout/halted: read as a halt, written beside a new halt for the
// older nodes that read only it, and deleted by resume.
func LegacyHaltKey(ns string) string { return RolloutDir(ns) + "halted" }

// ScopeID names a failure budget's scope in a halt's key: "fleet", or
// "group:<group>" ("group:" for the ungrouped fleet).
func ScopeID(scope, group string) string {
	if scope == config.ScopeGroup {
		return "group:" + group
	}
	return config.ScopeFleet
}

// AckKey is the last resume of a halt: <ns>rollout/ack.
func AckKey(ns string) string { return RolloutDir(ns) + "ack" }

// PacedDir holds the recent starts that pace their group: <ns>rollout/paced/.
func PacedDir(ns string) string { return RolloutDir(ns) + "paced/" }

// StartsDir holds the starts of the last hour: <ns>rollout/starts/.
func StartsDir(ns string) string { return RolloutDir(ns) + "starts/" }

// WaveDoneDir holds the recent completions that bake their wave:
// <ns>rollout/wavedone/.
func WaveDoneDir(ns string) string { return RolloutDir(ns) + "wavedone/" }

// DoneDir holds the recent completions, one per node: <ns>rollout/done/.
func DoneDir(ns string) string { return RolloutDir(ns) + "done/" }

// DoneKey is node's last completed reboot.
func DoneKey(ns, node string) string { return DoneDir(ns) + node }

// QueueDir holds the tickets of the nodes waiting for the fleet's budget,
// and of the FleetLock clients waiting for their group's: <ns>queue/.
func QueueDir(ns string) string { return ns + "queue/" }

// The kinds of ticket.
const (
	TicketFleet = ""
	TicketGroup = "group"
)

// Vias: the entry point that took a slot.
const (
	ViaDaemon    = "daemon"
	ViaPipeline  = "pipeline"
	ViaFleetLock = "fleetlock"
)

// Inflight is a reboot in flight (InflightKey's value): written with the
// slot, deleted with it by completion or abort. Found without its slot, it
// is a reboot that did not complete in time.
type Inflight struct {
	Node  string `json:"node"`
	Group string `json:"group"`
	Wave  int    `json:"wave,omitempty"`
	Via   string `json:"via,omitempty"`
	// Lease is the slot's lease (hex), BootID the boot the slot was taken in.
	Lease  string    `json:"lease_id"`
	BootID string    `json:"boot_id,omitempty"`
	Since  time.Time `json:"since"`
	TTLSec int       `json:"ttl_sec"`
	// FencingToken is the lock seat's when the slot was taken.
	FencingToken int64 `json:"fencing_token,omitempty"`
	// Started says the reboot command was about to run (Reboot.Start), at
	// StartedAt by the node's clock; a FleetLock client's reboot is
	// started when its slot is granted.
	Started   bool       `json:"started,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	// V is the writer's protocol version (older ones never say started).
	V int `json:"v,omitempty"`
	// Key, CreateRevision and ModRevision are the record as read.
	Key            string `json:"-"`
	CreateRevision int64  `json:"-"`
	ModRevision    int64  `json:"-"`
}

// Failure kinds (docs/rollout.md, "The failure budget").
const (
	FailureSlotExpired   = "slot_expired"
	FailurePostReboot    = "post_reboot"
	FailureRebootCommand = "reboot_command"
	FailureRebootLoop    = "reboot_loop"
)

// FailureKinds lists every failure kind.
func FailureKinds() []string {
	return []string{FailureSlotExpired, FailurePostReboot, FailureRebootCommand, FailureRebootLoop}
}

// Halt is a halt key's value: the budget of its scope was spent.
type Halt struct {
	Reason   string             `json:"reason"`
	Scope    string             `json:"scope"`
	Group    string             `json:"group,omitempty"`
	Failures []slotinfo.Failure `json:"failures"`
	Since    time.Time          `json:"since"`
	By       string             `json:"by"`
	V        int                `json:"v"`
	// Key is the halt as read.
	Key string `json:"-"`
}

// Covers reports whether the halt stops the nodes of group.
func (h Halt) Covers(group string) bool { return h.Scope != config.ScopeGroup || h.Group == group }

// Ack is AckKey's value: an operator resumed the rollout. Acknowledged
// names the failures it acknowledges (FailureID); a failure it does not
// name counts, whenever it happened, so a reboot in flight at the resume
// that is lost after it halts the rollout again. An Ack without V 3 (an
// older version's) acknowledges every failure created at or before
// Revision, which older readers still apply.
type Ack struct {
	By           string    `json:"by"`
	Reason       string    `json:"reason"`
	Since        time.Time `json:"since"`
	Revision     int64     `json:"revision"`
	Acknowledged []string  `json:"acknowledged,omitempty"`
	// Scope is the scope resumed (ScopeID: "group:<group>") when one group
	// was; empty for every scope.
	Scope string `json:"scope,omitempty"`
	V     int    `json:"v,omitempty"`
}

// Acks reports whether the acknowledgement covers failure x.
func (a *Ack) Acks(ns string, x slotinfo.Failure) bool {
	switch {
	case a == nil:
		return false
	case a.V >= 3:
		return slices.Contains(a.Acknowledged, FailureID(ns, x))
	}
	return x.CreateRevision <= a.Revision
}

// FailureID names a failure for an acknowledgement: x.ID when set (a
// reboot seen lost from its in-flight record: Inflight.ID), else
// <node>/<id>, its key under FailuresDir. A reboot's loss keeps its name
// when its failure record is written (the take, a late completion): the
// record's id is the in-flight record's.
func FailureID(ns string, x slotinfo.Failure) string {
	if x.ID != "" {
		return x.ID
	}
	if rest, ok := strings.CutPrefix(x.Key, FailuresDir(ns)); ok {
		return rest
	}
	return fmt.Sprintf("%s/%d", x.Node, x.CreateRevision)
}

// ID names this reboot for the failure budget: <node>/<its slot's lease>,
// unique to this reboot. (Not the record's create revision: a take writes
// the record over an earlier one of the same node, lost and acknowledged,
// whose create revision it keeps; a name shared by two losses let the
// resume that acknowledged the first cover the second.) An unreadable
// record is named by its create revision.
func (in Inflight) ID() string {
	if _, err := strconv.ParseUint(in.Lease, 16, 64); err != nil || in.Lease == "" {
		return fmt.Sprintf("%s/r%d", in.Node, in.CreateRevision)
	}
	return in.Node + "/" + in.Lease
}

// idSuffix is the part of a failure's name after its node: its record's
// id under FailuresDir/<node>/.
func idSuffix(id string) string {
	_, rest, _ := strings.Cut(id, "/")
	return rest
}

// Ticket is a node's place in the fleet's line (QueueDir), or a FleetLock
// client's in its group's (Kind TicketGroup).
type Ticket struct {
	Node  string `json:"node"`
	Group string `json:"group"`
	// Kind is the budget waited for: TicketFleet (max_holders_total) or
	// TicketGroup (max_holders, FleetLock clients only: they cannot wait
	// under a seat as daemons and pipelines do).
	Kind string `json:"kind,omitempty"`
	// Via is the entry point that waits (ViaDaemon, ViaPipeline,
	// ViaFleetLock).
	Via            string    `json:"via,omitempty"`
	Since          time.Time `json:"since"`
	Key            string    `json:"-"`
	CreateRevision int64     `json:"-"`
	Lease          int64     `json:"-"`
}

// Done is a node's last completed reboot (DoneKey's value), on a lease of
// failure_window_sec: written by the completion in the transaction that
// deletes the slot. The admission does not read it; `clusterrebootd status`
// counts the node as done and measures the reboot's duration from it, and
// `clusterrebootd report` shows it as the node's last reboot.
type Done struct {
	Node  string `json:"node"`
	Group string `json:"group"`
	Wave  int    `json:"wave,omitempty"`
	// Since is when the slot was taken (zero: unknown, a slot of an older
	// version), At when the completion freed it; DurationMS is At - Since,
	// by the completing node's clock (0 when Since is unknown).
	Since      time.Time `json:"since,omitzero"`
	At         time.Time `json:"at"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	// BootID is the boot the node came back in.
	BootID string `json:"boot_id,omitempty"`
	// Key is the record as read.
	Key string `json:"-"`
}

// Measured reports whether the reboot's duration is known.
func (d Done) Measured() bool { return !d.Since.IsZero() && !d.At.IsZero() && !d.At.Before(d.Since) }

// Rollout is everything under <ns>rollout/ at one revision.
type Rollout struct {
	Inflight []Inflight
	Failures []slotinfo.Failure
	// Halts are every halt, of every writer and scope (an unreadable one
	// halts the fleet).
	Halts []Halt
	Ack   *Ack
	Paced []slotinfo.Mark
	// Starts are the oldest start records (every one for CountAll),
	// StartCount their number.
	Starts     []slotinfo.Mark
	StartCount int
	WaveDone   []slotinfo.Mark
	// Done are the completions within the failure window, one per node.
	Done []Done
}

// parseRollout sorts the keys under <ns>rollout/ into their records. A value
// that cannot be read is on the safe side: an unreadable in-flight record or
// failure record counts as a failure of the node its key names, an
// unreadable halt still halts, an unreadable pacing record still paces.
func parseRollout(ns string, kvs []*mvccpb.KeyValue) Rollout {
	var r Rollout
	for _, kv := range kvs {
		key := string(kv.Key)
		switch {
		case key == LegacyHaltKey(ns) || strings.HasPrefix(key, HaltsDir(ns)):
			r.Halts = append(r.Halts, ParseHalt(kv.Key, kv.Value))
		case key == AckKey(ns):
			var a Ack
			if json.Unmarshal(kv.Value, &a) == nil {
				r.Ack = &a
			}
		case strings.HasPrefix(key, InflightDir(ns)):
			r.Inflight = append(r.Inflight, ParseInflight(ns, kv))
		case strings.HasPrefix(key, FailuresDir(ns)):
			var f slotinfo.Failure
			if json.Unmarshal(kv.Value, &f) != nil {
				f = slotinfo.Failure{Kind: "unreadable", Detail: "a failure record that cannot be read"}
			}
			node, _, _ := strings.Cut(strings.TrimPrefix(key, FailuresDir(ns)), "/")
			f.Node, f.Key, f.CreateRevision, f.Recorded = node, key, kv.CreateRevision, true
			r.Failures = append(r.Failures, f)
		case strings.HasPrefix(key, PacedDir(ns)):
			r.Paced = append(r.Paced, parseMark(key, PacedDir(ns), kv))
		case strings.HasPrefix(key, StartsDir(ns)):
			r.Starts = append(r.Starts, parseMark(key, StartsDir(ns), kv))
		case strings.HasPrefix(key, WaveDoneDir(ns)):
			r.WaveDone = append(r.WaveDone, parseMark(key, WaveDoneDir(ns), kv))
		case strings.HasPrefix(key, DoneDir(ns)):
			// An unreadable one is a completion of an unknown time: the
			// node counts as done, nothing is measured.
			var d Done
			_ = json.Unmarshal(kv.Value, &d)
			d.Node, d.Key = strings.TrimPrefix(key, DoneDir(ns)), key
			r.Done = append(r.Done, d)
		}
	}
	return r
}

// ParseHalt reads a halt; one that cannot be read halts the fleet.
func ParseHalt(key, value []byte) Halt {
	var h Halt
	if json.Unmarshal(value, &h) != nil || h.Reason == "" {
		h = Halt{Reason: "halted; the halt key holds no readable reason", Scope: config.ScopeFleet}
	}
	h.Key = string(key)
	return h
}

// HaltOf is the first halt that covers group (nil: none).
func (r Rollout) HaltOf(group string) *Halt {
	for i := range r.Halts {
		if r.Halts[i].Covers(group) {
			return &r.Halts[i]
		}
	}
	return nil
}

// HaltOps read every halt (the new keys and the older versions' one), to
// be parsed with ParseHalts from the responses at from and from+1.
func HaltOps(ns string) []clientv3.Op {
	return []clientv3.Op{clientv3.OpGet(HaltsDir(ns), clientv3.WithPrefix()), clientv3.OpGet(LegacyHaltKey(ns))}
}

// ParseHalts reads the responses of HaltOps.
func ParseHalts(resps []*etcdserverpb.ResponseOp) []Halt {
	var out []Halt
	for _, r := range resps {
		for _, kv := range r.GetResponseRange().Kvs {
			out = append(out, ParseHalt(kv.Key, kv.Value))
		}
	}
	return out
}

// ParseInflight reads an in-flight record; the key names the node. An
// unreadable one names no lease, so it never matches a slot: it counts as a
// reboot that did not complete.
func ParseInflight(ns string, kv *mvccpb.KeyValue) Inflight {
	var in Inflight
	key := string(kv.Key)
	if json.Unmarshal(kv.Value, &in) != nil {
		in = Inflight{Lease: "unreadable"}
	}
	in.Node, in.Key, in.CreateRevision, in.ModRevision = strings.TrimPrefix(key, InflightDir(ns)), key, kv.CreateRevision, kv.ModRevision
	return in
}

func parseMark(key, dir string, kv *mvccpb.KeyValue) slotinfo.Mark {
	var m slotinfo.Mark
	// An unreadable mark keeps its key's node and the zero group and wave:
	// it paces the ungrouped fleet and holds back every later wave.
	_ = json.Unmarshal(kv.Value, &m)
	m.Node, _, _ = strings.Cut(strings.TrimPrefix(key, dir), "/")
	m.Key, m.Lease = key, kv.Lease
	return m
}

func parseTickets(ns string, kvs []*mvccpb.KeyValue) []Ticket {
	out := make([]Ticket, 0, len(kvs))
	for _, kv := range kvs {
		var t Ticket
		_ = json.Unmarshal(kv.Value, &t)
		t.Node = strings.TrimPrefix(string(kv.Key), QueueDir(ns))
		t.Key, t.CreateRevision, t.Lease = string(kv.Key), kv.CreateRevision, kv.Lease
		out = append(out, t)
	}
	return out
}
