package slot

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
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

// HaltKey is the halt: <ns>rollout/halted.
func HaltKey(ns string) string { return RolloutDir(ns) + "halted" }

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

// Halt is HaltKey's value: the budget was spent.
type Halt struct {
	Reason   string             `json:"reason"`
	Scope    string             `json:"scope"`
	Group    string             `json:"group,omitempty"`
	Failures []slotinfo.Failure `json:"failures"`
	Since    time.Time          `json:"since"`
	By       string             `json:"by"`
	V        int                `json:"v"`
}

// Ack is AckKey's value: an operator resumed the rollout; failures created
// at or before Revision no longer count.
type Ack struct {
	By       string    `json:"by"`
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since"`
	Revision int64     `json:"revision"`
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
	Halt     *Halt
	// HaltUnreadable is set when the halt key holds no readable value: it
	// still halts.
	HaltUnreadable bool
	Ack            *Ack
	Paced          []slotinfo.Mark
	Starts         []slotinfo.Mark
	WaveDone       []slotinfo.Mark
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
		case key == HaltKey(ns):
			var h Halt
			if json.Unmarshal(kv.Value, &h) != nil {
				r.HaltUnreadable = true
				h = Halt{Reason: "the halt key holds no readable value"}
			}
			r.Halt = &h
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

// Resume ends a halt: it deletes the halt and records who resumed, when,
// why and at which revision, in one transaction; failures created at or
// before that revision no longer count. halted says whether there was a
// halt (or failures that would have kept the rollout halted).
func Resume(ctx context.Context, c *clientv3.Client, ns, by, reason string, now time.Time) (Ack, error) {
	cur, err := c.Get(ctx, HaltKey(ns))
	if err != nil {
		return Ack{}, err
	}
	a := Ack{By: by, Reason: reason, Since: now.UTC(), Revision: cur.Header.Revision}
	val, _ := json.Marshal(a)
	if _, err := c.Txn(ctx).Then(clientv3.OpPut(AckKey(ns), string(val)), clientv3.OpDelete(HaltKey(ns))).Commit(); err != nil {
		return Ack{}, err
	}
	return a, nil
}
