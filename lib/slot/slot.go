// Package slot is the reboot slot: the etcd key that keeps a node counted
// against max_holders from the moment it leaves the lock for its reboot until
// it is back and has passed its post-reboot checks.
//
// One implementation serves the daemon's cluster step (driver/cluster) and
// the tools (`crd-lock hold --reboot-slot`, `crd-lock complete`), so a node
// rebooted by a shell pipeline and a node rebooted by the daemon count each
// other (docs/cluster-protocol.md, "Why never more than max_holders").
//
// The rules, each on the safe side:
//
//   - A node is a machine, not a name: the nodes present are counted by
//     (node name, boot id), so two machines with one node_name count twice,
//     and a slot is written only where none exists or where this machine's
//     own is, and deleted only by the lease that wrote it.
//   - A slot belongs to one lock: its value names the lock key it was taken
//     under. A slot of another lock in the same namespace is refused as a
//     configuration error (two fleets must not share a namespace); a slot
//     that names no lock or no group (an older or a foreign writer) counts
//     against every lock and group.
//   - Seats and slots are read in one transaction, at one revision, and the
//     slot is taken in a transaction guarded by that revision: it succeeds
//     only while this node's seat exists and no slot changed since the count.
//     The built-in policies are evaluated on that same read, so any N nodes
//     that take slots together each saw the others' slots.
//   - The smallest max_holders in the line (seats and slots) is the one that
//     counts.
package slot

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// Dir is where the slots of a namespace live: <ns>rebooting/.
func Dir(ns string) string { return ns + "rebooting/" }

// Key is a node's slot key: <ns>rebooting/<node>.
func Key(ns, node string) string { return Dir(ns) + node }

// RecordsDir is where the health records of a namespace live: <ns>nodes/.
func RecordsDir(ns string) string { return ns + "nodes/" }

// RecordKey is a node's health record: <ns>nodes/<node>.
func RecordKey(ns, node string) string { return RecordsDir(ns) + node }

// PauseKey is the cluster-wide pause: <ns>disable.
func PauseKey(ns string) string { return ns + "disable" }

// Value is a slot's JSON value as written. Lock and Group are always
// written (an empty group is the ungrouped fleet), so a value without them
// is recognisably not ours.
type Value struct {
	Node      string    `json:"node"`
	Lock      string    `json:"lock"`
	Group     string    `json:"group"`
	Since     time.Time `json:"since"`
	BootID    string    `json:"boot_id,omitempty"`
	MachineID string    `json:"machine_id,omitempty"`
	// MaxHolders and MaxTotal are the effective budgets the slot was
	// admitted under (numbers: what older readers take the smallest of).
	MaxHolders int `json:"max_holders,omitempty"`
	MaxTotal   int `json:"max_total,omitempty"`
	// Wave is the node's wave, Via the entry point that took the slot.
	Wave int    `json:"wave,omitempty"`
	Via  string `json:"via,omitempty"`
	// Rules are the rules its entry point was configured with.
	Rules *policy.Rules `json:"rules,omitempty"`
	// V is the protocol version the writer speaks (policy.ProtocolVersion).
	V int `json:"v"`
}

// Parsed is a slot as read: its value, and whether it is bound to a lock and
// a group. An unbound slot counts against every lock and every group.
type Parsed struct {
	Value
	// Key is the slot's etcd key; the key, not the value, names the node.
	Key string
	// Bound is false when the value is not JSON, has a field this version
	// cannot decode, or lacks "lock" or "group".
	Bound bool
	// Lease is the slot's lease ID (0: none).
	Lease int64
	// ModRevision is the revision the slot was last written at,
	// CreateRevision the one it was created at (0: not known).
	ModRevision, CreateRevision int64
}

// Parse reads a slot's value; the key names the node whatever the value says.
func Parse(ns, key string, value []byte, lease, modRev int64) Parsed {
	p := Parsed{Key: key, Lease: lease, ModRevision: modRev}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(value, &raw); err == nil && raw != nil {
		// A field this version cannot decode (a newer writer changed its
		// type) leaves the value not understood: unbound, whatever lock it
		// seems to name. Unknown fields are ignored.
		derr := json.Unmarshal(value, &p.Value)
		_, hasLock := raw["lock"]
		_, hasGroup := raw["group"]
		p.Bound = derr == nil && hasLock && hasGroup && p.Lock != ""
	}
	p.Node = strings.TrimPrefix(key, Dir(ns))
	return p
}

// Counts reports whether the slot counts against lock and group: its own, or
// an unbound one.
func (p Parsed) Counts(lock, group string) bool {
	return !p.Bound || (p.Lock == lock && p.Group == group)
}

// Foreign reports whether the slot is bound to another lock.
func (p Parsed) Foreign(lock string) bool {
	return p.Bound && p.Lock != lock
}

// Policy is the slot as the view and the policies see it.
func (p Parsed) Policy() policy.Slot {
	return policy.Slot{Node: p.Node, Lock: p.Lock, Group: p.Group, Since: p.Since, BootID: p.BootID, Wave: p.Wave, Via: p.Via}
}

// ParsePause reads the pause key's value; an unreadable value still pauses.
func ParsePause(value []byte) *policy.Pause {
	var p policy.Pause
	if err := json.Unmarshal(value, &p); err == nil && p.Reason != "" {
		return &p
	}
	raw := strings.Join(strings.Fields(string(value)), " ")
	if len(raw) > 120 {
		raw = strings.ToValidUTF8(raw[:120], "") + "..."
	}
	if raw == "" {
		raw = "(empty)"
	}
	return &policy.Pause{Reason: "paused; the disable key holds no JSON reason: " + raw, By: p.By, Since: p.Since}
}
