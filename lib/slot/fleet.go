package slot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// Fleet is one node's view of its lock's reboot slots: who it is, and the
// rules its entry point is configured with.
type Fleet struct {
	Client *clientv3.Client
	// NS is the namespace, ending in "/".
	NS string
	// Lock is the fleet's lock_key (without the group): the slot is bound
	// to it. Group is this node's group ("" for none).
	Lock, Group string
	// Node, BootID and MachineID are this machine.
	Node, BootID, MachineID string
	// Via is the entry point (ViaDaemon, ViaPipeline, ViaFleetLock).
	Via string
	// Wave is this node's wave (docs/rollout.md).
	Wave int
	// Rules are this entry point's own rules (max_holders per group,
	// max_holders_total across the lock's groups, the rollout's); the
	// admission applies the strictest of these and the live records' and
	// slots' (Decide).
	Rules policy.Rules
	// TTL is reboot_slot_ttl_sec: the slot's lease, never kept alive.
	TTL time.Duration
	// RPCTimeout bounds each request.
	RPCTimeout time.Duration
	// Policies are the built-in cluster policies (Evaluate).
	Policies config.Policies
	// Sized says the caller needs the fleet's size after an admission
	// even when no policy is configured: a health script's CLUSTER_SIZE
	// under the lock. An admission's Count reads the summary (two
	// count-only ranges of the fleet's size, docs/scaling.md) only when a
	// policy is active or Sized is set (summarized).
	Sized bool
	// RulesCache keeps the fleet's rule sets between admissions (nil: none;
	// every admission reads every rules key then).
	RulesCache *RulesCache
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// FromConfig is the Fleet of cfg for this machine, taking slots for via.
func FromConfig(c *clientv3.Client, cfg config.Config, bootID, machineID, via string) Fleet {
	rpc := time.Duration(cfg.EtcdDialTimeoutSec) * time.Second
	if rpc <= 0 {
		rpc = 5 * time.Second
	}
	return Fleet{
		Client: c, NS: cfg.Namespace(), Lock: strings.TrimSuffix(cfg.LockKey, "/"), Group: cfg.Group,
		Node: cfg.NodeName, BootID: bootID, MachineID: machineID, Via: via, Wave: cfg.Rollout.Wave, Rules: policy.RulesOf(cfg),
		TTL: time.Duration(cfg.RebootSlotTTLSec) * time.Second, RPCTimeout: rpc, Policies: cfg.ClusterPolicies,
		Sized: cfg.HealthScript != "", RulesCache: &RulesCache{Path: filepath.Join(cfg.RunDir, RulesCacheFile)},
	}
}

// SeatKey is the lock key of this node's group: lock, or lock/group.
func (f Fleet) SeatKey() string { return config.GroupLockKey(f.Lock, f.Group) }

// Key is this node's slot key.
func (f Fleet) Key() string { return Key(f.NS, f.Node) }

// summarized says whether an admission's Count reads the summary: a
// policy decides on it, or the caller needs the fleet's size.
func (f Fleet) summarized() bool { return policy.Active(f.Policies) || f.Sized }

func (f Fleet) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f Fleet) rpc(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, f.RPCTimeout)
}

// Seats is how many seats of the group's lock this node asks for: its
// max_holders, or for a percentage, that percentage of the namespace's
// nodes: its health records, and the slots of nodes whose record is gone (a
// node down in its reboot for longer than its record's lease still counts,
// as it does for the admission). Two small reads: the records are only
// counted, the slots (at most the budgets) are listed. The seats only let
// nodes run their checks in parallel; the admission holds the exact budget,
// but the smallest seat number in the line caps it, so the seats must not
// count fewer nodes than the admission does.
func (f Fleet) Seats(ctx context.Context) (int, error) {
	if f.Rules.MaxHolders.Percent == 0 {
		return max(1, f.Rules.MaxHolders.N), nil
	}
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	resp, err := f.Client.Txn(rctx).Then(
		clientv3.OpGet(RecordsDir(f.NS), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(Dir(f.NS), clientv3.WithPrefix(), clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return 0, err
	}
	nodes := int(resp.Responses[0].GetResponseRange().Count)
	var recs []clientv3.Op
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		recs = append(recs, clientv3.OpGet(RecordKey(f.NS, strings.TrimPrefix(string(kv.Key), Dir(f.NS))), clientv3.WithCountOnly()))
	}
	has, err := f.batches(ctx, recs)
	if err != nil {
		return 0, err
	}
	for _, r := range has {
		if r.GetResponseRange().Count == 0 {
			nodes++ // a slot without its record
		}
	}
	return f.Rules.MaxHolders.Of(nodes), nil
}

// Sizes are the node counts of a Count's scopes (Fleet.fleetCounts).
type Sizes struct{ Group, Fleet int }

// Member is one machine counted against max_holders.
type Member struct {
	Node      string `json:"node"`
	BootID    string `json:"boot_id,omitempty"`
	MachineID string `json:"machine_id,omitempty"`
	// Via says what keeps it counted: "self", "seat" or "slot".
	Via string `json:"via"`
	// Key is the seat or slot key.
	Key string `json:"key,omitempty"`
	// Group is the slot's group (slots only).
	Group string `json:"group,omitempty"`
}

// id tells machines apart: the boot id is unique among running machines.
// Without one, each key counts as a machine of its own (the safe side).
func (m Member) id() string {
	if m.BootID == "" {
		return m.Node + "\x00key:" + m.Key
	}
	return m.Node + "\x00" + m.BootID
}

// Count is everything the admission decides on, read at one etcd revision.
type Count struct {
	// Revision is the etcd revision everything was read at.
	Revision int64
	// Members are the distinct machines present in this node's group (seats
	// and slots), this one included.
	Members []Member
	// SeatMax and SlotMax are the smallest max_holders among the group's
	// seats and slots (0: none seen); SlotMaxTotal the smallest
	// max_holders_total among the slots.
	SeatMax, SlotMax, SlotMaxTotal int
	// Total are the distinct machines holding a reboot slot of the lock in
	// any group (or an unbound slot), this one included.
	Total []Member
	// Disagree lists the distinct max_holders values seen when they differ.
	Disagree []int
	// View is the slots of this lock (any group) and the unbound ones, the
	// pause, and the health records and holds that were read: with Records
	// every record and hold of the namespace (CountAll; an admission's
	// Count whose rules need them: waves, percentages); otherwise this
	// node's own record and hold alone.
	View policy.View
	// Records says View.Nodes holds every health record.
	Records bool
	// RecordCount is the number of health records (a count-only read; 0
	// when the Count read no summary).
	RecordCount int
	// Lower are the records of the lower waves' busy nodes that the busy
	// index names (Fleet.lowerWaves; without Records, for a node of a
	// later wave): at least one that still holds this node back, when
	// any does; their holds are in View.Holds.
	Lower []policy.NodeRecord
	// Sizes are the nodes of this node's group and of the fleet, counted
	// in the index, that percentages resolve against when the records
	// were not read (nil when no percentage is in effect, or with
	// Records).
	Sizes *Sizes
	// RuleSets are the fleet's distinct rule sets, of its rules keys
	// (RulesDir).
	RuleSets []NodeRules
	// Summary is what the built-in policies and CLUSTER_SIZE need, read at
	// Revision with count-only ranges (an admission's Count; nil with
	// Records: the view has it; nil too when nothing needs it: no policy
	// is active and the Fleet is not Sized). An Admission reads a Sized
	// Fleet's summary without a policy only for a count that admits
	// (Fleet.size), and after its checks keeps the one they saw.
	Summary *policy.Summary
	// Slots are the parsed slots of the lock (any group), unbound ones too.
	Slots []Parsed
	// Mine is the slot at this node's key, whoever wrote it (nil: none).
	Mine *Parsed
	// Hold and Request are the operator's hold and reboot request of this
	// node (nil: none).
	Hold, Request *policy.Override
	// Rollout is the failure budget's, pacing's and waves' records.
	Rollout Rollout
	// Tickets are the fleet's line for max_holders_total and the FleetLock
	// clients' lines for their groups, oldest first.
	Tickets []Ticket
	// slotNames are the nodes with a key under the slots' prefix at
	// Revision, sorted (the summary's per-slot reads, Fleet.size).
	slotNames []string
	// counted says the records were counted at Revision for the rules
	// (a percentage, a wave), records their number: Fleet.size needs no
	// count of its own then.
	counted bool
	records int64
	// SeatRev is the create revision of this node's seat: when it joined
	// the lock's line (0: it holds none).
	SeatRev int64
	// NeedAge is how long lower-wave nodes have needed their reboot, by
	// etcd's clock (the age of their record's needs_reboot_lease): for
	// wave_timeout_sec. A node not in it counts as not timed out.
	NeedAge map[string]time.Duration
	// Problem, when set, forbids taking a slot: another machine uses this
	// node's name, or another lock's slot or record shares the namespace
	// (exit 2).
	Problem error
}

// Nodes are the members' names, sorted (a name twice when two machines share it).
func (c Count) Nodes() []string {
	out := make([]string, 0, len(c.Members))
	for _, m := range c.Members {
		out = append(out, m.Node)
	}
	sort.Strings(out)
	return out
}

// ParseOverrides reads holds or requests under dir: the key names the node;
// an unreadable value still counts (as an unreadable pause still pauses).
func ParseOverrides(dir string, kvs []*mvccpb.KeyValue) []policy.Override {
	var out []policy.Override
	for _, kv := range kvs {
		var flags struct {
			Now bool `json:"now"`
		}
		_ = json.Unmarshal(kv.Value, &flags)
		out = append(out, policy.Override{Node: strings.TrimPrefix(string(kv.Key), dir), Now: flags.Now, Pause: *ParsePause(kv.Value), Revision: kv.ModRevision})
	}
	return out
}

// sameName reports another machine that uses this node's name: same name,
// and a machine id that differs from ours (both known). The same machine
// after a reboot (same machine id, new boot id) is not another machine.
func (f Fleet) sameName(m Member) bool {
	return m.Node == f.Node && m.MachineID != "" && f.MachineID != "" && m.MachineID != f.MachineID
}

func foreign(f Fleet, what, key, other string) error {
	return exitcode.Errorf(exitcode.Config,
		"slot: the %s %s belongs to lock %s, this node's lock is %s: two fleets share etcd_namespace %s and would mix their slots, pause and records; give each lock its own etcd_namespace",
		what, key, other, f.Lock, f.NS)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// ErrChanged means a slot changed between the count and the take: count
// again (and check again: time passed).
var ErrChanged = errors.New("slot: another node's slot changed since the count; counting again")

// ErrSeatLost means this node's lock seat was gone when the slot was to be
// taken: nothing may run.
var ErrSeatLost = errors.New("slot: the lock seat was gone when the reboot slot was to be taken")

// ErrExpired means the slot's lease had already run out.
var ErrExpired = errors.New("slot: the reboot slot's lease had already expired")

// Free deletes the slot by revoking its lease (which deletes nothing else).
// ctx should be fresh and bounded. ErrExpired: it was already gone.
func Free(ctx context.Context, c *clientv3.Client, lease clientv3.LeaseID) error {
	if lease == 0 {
		return nil
	}
	_, err := c.Revoke(ctx, lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return ErrExpired
	}
	return err
}

// Describe names a count's members for a log line: node(via).
func (c Count) Describe() string {
	parts := make([]string, 0, len(c.Members))
	for _, m := range c.Members {
		parts = append(parts, fmt.Sprintf("%s(%s)", m.Node, m.Via))
	}
	return strings.Join(parts, ",")
}

func isLeaseNotFound(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }
