package slot

import (
	"encoding/json"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// counting is one Count in progress: the count so far and the machines it
// has seen, this one first.
type counting struct {
	f Fleet
	c Count
	// seen and seenTotal are the machines in c.Members and c.Total;
	// maxSeen is every max_holders this node's group was seen with.
	seen, seenTotal map[string]bool
	maxSeen         map[int]bool
}

// newCounting starts a count at revision with this machine (holding seat,
// or "") as its first member.
func (f Fleet) newCounting(revision int64, seat string) *counting {
	k := &counting{f: f, c: Count{Revision: revision}}
	c := &k.c
	c.View = policy.View{Nodes: []policy.NodeRecord{}, Rebooting: []policy.Slot{}, ReadAt: f.now().UTC()}
	self := Member{Node: f.Node, BootID: f.BootID, MachineID: f.MachineID, Via: "self", Key: seat}
	k.seen = map[string]bool{self.id(): true}
	k.seenTotal = map[string]bool{self.id(): true}
	c.Members = []Member{self}
	c.Total = []Member{self}
	k.maxSeen = map[int]bool{}
	if f.Rules.MaxHolders.Percent == 0 {
		k.maxSeen[f.Rules.MaxHolders.N] = true
	}
	return k
}

// add counts m, another machine, once: in the fleet-wide total when it
// holds a slot, and among the members when it is of this node's group.
func (k *counting) add(m Member, ownGroup bool) {
	f, c, seen, seenTotal := k.f, &k.c, k.seen, k.seenTotal
	if f.sameName(m) && c.Problem == nil {
		c.Problem = exitcode.Errorf(exitcode.Config,
			"slot: node_name %q is used by another machine too (machine id %s, boot id %s, %s %s): give every machine a unique node_name",
			f.Node, orUnknown(m.MachineID), orUnknown(m.BootID), m.Via, m.Key)
	}
	// The fleet-wide count is of slots only: seat holders of other groups
	// are not down, and counting them would let three groups' holders
	// wait on each other for ever. The slot transaction's revision guard
	// serialises the slot takes across groups, so each take saw every
	// slot before it.
	if m.Via == "slot" && !seenTotal[m.id()] {
		seenTotal[m.id()] = true
		c.Total = append(c.Total, m)
	}
	if ownGroup && !seen[m.id()] {
		seen[m.id()] = true
		c.Members = append(c.Members, m)
	}
}

// seats counts the seat holders of every group's line of this lock (the
// lock's entries, sorted by create revision); seat is this node's own.
func (k *counting) seats(kvs []*mvccpb.KeyValue, seat string) {
	f, c, maxSeen := k.f, &k.c, k.maxSeen
	// Seats: in each group's line (the lock itself and lock/<group>), the
	// holders are the prefix of entries each of which is within the smallest
	// max_holders ahead of it and its own.
	type line struct{ running, position int }
	lines := map[string]*line{}
	for _, kv := range kvs {
		key := string(kv.Key)
		parent := key[:strings.LastIndex(key, "/")]
		if parent != f.Lock && !(strings.HasPrefix(parent, f.Lock+"/") && !strings.Contains(parent[len(f.Lock)+1:], "/")) {
			continue
		}
		l := lines[parent]
		if l == nil {
			l = &line{position: -1}
			lines[parent] = l
		}
		l.position++
		a := lockinfo.ParseAnnotation(kv.Value)
		if l.running == 0 || a.MaxHolders < l.running {
			l.running = a.MaxHolders
		}
		own := parent == f.SeatKey()
		if own {
			maxSeen[a.MaxHolders] = true
			c.SeatMax = smallestOn(c.SeatMax, a.MaxHolders)
		}
		if key == seat {
			c.SeatRev = kv.CreateRevision
		}
		if key == seat || l.position >= l.running {
			continue // this node, or a waiter (its max_holders counts all the same)
		}
		if own && c.SeatRev != 0 && a.Candidate && kv.CreateRevision > c.SeatRev {
			// A candidate that joined the line after this node counts this
			// node, not the other way round: of two candidates that hold
			// seats together, the older is admitted (or refused) first, and
			// neither waits for the other (docs/cluster-protocol.md, "Seats").
			continue
		}
		who := a.Node
		if who == "" {
			who = "entry " + key // etcdctl lock: someone unknown
		}
		k.add(Member{Node: who, BootID: a.BootID, MachineID: a.MachineID, Via: "seat", Key: key}, own)
	}
}

// slots counts the machines that hold a reboot slot.
func (k *counting) slots(kvs []*mvccpb.KeyValue) {
	f, c, maxSeen := k.f, &k.c, k.maxSeen
	for _, kv := range kvs {
		if !strings.HasPrefix(string(kv.Key), Dir(f.NS)) {
			continue
		}
		p := Parse(f.NS, string(kv.Key), kv.Value, kv.Lease, kv.ModRevision)
		p.CreateRevision = kv.CreateRevision
		if p.Node == f.Node {
			pc := p
			c.Mine = &pc
		}
		if p.Foreign(f.Lock) {
			if c.Problem == nil {
				c.Problem = foreign(f, "reboot slot", string(kv.Key), p.Lock)
			}
			continue
		}
		c.View.Rebooting = append(c.View.Rebooting, p.Policy())
		c.Slots = append(c.Slots, p)
		c.SlotMaxTotal = smallestOn(c.SlotMaxTotal, p.MaxTotal)
		own := p.Counts(f.Lock, f.Group) // else another group of this lock
		if own && p.MaxHolders > 0 {
			maxSeen[p.MaxHolders] = true
			c.SlotMax = smallestOn(c.SlotMax, p.MaxHolders)
		}
		if p.Node == f.Node && p.BootID == f.BootID && f.BootID != "" {
			continue // this machine's own slot: self
		}
		k.add(Member{Node: p.Node, BootID: p.BootID, MachineID: p.MachineID, Via: "slot", Key: string(kv.Key), Group: p.Group}, own)
	}
}

// records adds the health records to the view and checks them for this
// node's name used by another machine.
func (k *counting) records(kvs []*mvccpb.KeyValue) {
	f, c := k.f, &k.c
	for _, kv := range kvs {
		var rec policy.NodeRecord
		if json.Unmarshal(kv.Value, &rec) != nil {
			continue // unreadable: the node counts as not healthy
		}
		if rec.Lock != "" && rec.Lock != f.Lock {
			if c.Problem == nil {
				c.Problem = foreign(f, "health record", string(kv.Key), rec.Lock)
			}
			continue
		}
		rec.Node = strings.TrimPrefix(string(kv.Key), RecordsDir(f.NS))
		if m := (Member{Node: rec.Node, BootID: rec.BootID, MachineID: rec.MachineID, Via: "health record", Key: string(kv.Key)}); f.sameName(m) && c.Problem == nil {
			c.Problem = exitcode.Errorf(exitcode.Config,
				"slot: node_name %q is used by another machine too (machine id %s publishes %s): give every machine a unique node_name",
				f.Node, m.MachineID, m.Key)
		}
		c.View.Nodes = append(c.View.Nodes, rec)
	}
}

// smallestOn is the smaller of two limits where 0 means none.
func smallestOn(a, b int) int {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}
