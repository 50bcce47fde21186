package slot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// Fleet is one node's view of its lock's reboot slots.
type Fleet struct {
	Client *clientv3.Client
	// NS is the namespace, ending in "/".
	NS string
	// Lock is the fleet's lock_key (without the group): the slot is bound
	// to it. Group is this node's group ("" for none).
	Lock, Group string
	// Node, BootID and MachineID are this machine.
	Node, BootID, MachineID string
	// MaxHolders is this node's max_holders (per group); MaxTotal its
	// max_holders_total (across the lock's groups, 0: none).
	MaxHolders int
	MaxTotal   int
	// TTL is reboot_slot_ttl_sec: the slot's lease, never kept alive.
	TTL time.Duration
	// RPCTimeout bounds each request.
	RPCTimeout time.Duration
	// Policies are the built-in cluster policies (Evaluate).
	Policies config.Policies
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// FromConfig is the Fleet of cfg for this machine.
func FromConfig(c *clientv3.Client, cfg config.Config, bootID, machineID string) Fleet {
	rpc := time.Duration(cfg.EtcdDialTimeoutSec) * time.Second
	if rpc <= 0 {
		rpc = 5 * time.Second
	}
	return Fleet{
		Client: c, NS: cfg.Namespace(), Lock: strings.TrimSuffix(cfg.LockKey, "/"), Group: cfg.Group,
		Node: cfg.NodeName, BootID: bootID, MachineID: machineID, MaxHolders: cfg.MaxHolders, MaxTotal: cfg.MaxHoldersTotal,
		TTL: time.Duration(cfg.RebootSlotTTLSec) * time.Second, RPCTimeout: rpc, Policies: cfg.ClusterPolicies,
	}
}

// SeatKey is the lock key of this node's group: lock, or lock/group.
func (f Fleet) SeatKey() string { return config.GroupLockKey(f.Lock, f.Group) }

// Key is this node's slot key.
func (f Fleet) Key() string { return Key(f.NS, f.Node) }

func (f Fleet) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f Fleet) rpc(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, f.RPCTimeout)
}

// Member is one machine counted against max_holders.
type Member struct {
	Node      string `json:"node"`
	BootID    string `json:"boot_id,omitempty"`
	MachineID string `json:"machine_id,omitempty"`
	// Via says what keeps it counted: "self", "seat" or "slot".
	Via string `json:"via"`
	// Key is the seat or slot key.
	Key string `json:"key,omitempty"`
}

// id tells machines apart: the boot id is unique among running machines.
// Without one, each key counts as a machine of its own (the safe side).
func (m Member) id() string {
	if m.BootID == "" {
		return m.Node + "\x00key:" + m.Key
	}
	return m.Node + "\x00" + m.BootID
}

// Count is who counts against max_holders at one etcd revision.
type Count struct {
	// Revision is the etcd revision everything was read at.
	Revision int64
	// Members are the distinct machines present, this one included.
	Members []Member
	// MaxHolders is the smallest max_holders among this node, the seats of
	// the line and the counted slots.
	MaxHolders int
	// Total are the distinct machines holding a reboot slot of the lock in
	// any group (or an unbound slot), this one included; MaxTotal bounds
	// them (0: no bound), the smallest max_holders_total among this node and
	// the slots.
	Total    []Member
	MaxTotal int
	// Disagree lists the distinct max_holders values seen when they differ.
	Disagree []int
	// View is the health records and the slots of this lock (any group)
	// and the unbound ones, for the policies.
	View policy.View
	// Mine is the slot at this node's key, whoever wrote it (nil: none).
	Mine *Parsed
	// Problem, when set, forbids taking a slot: another machine uses this
	// node's name, or another lock's slot or record shares the namespace
	// (exit 2).
	Problem error
}

// Full reports whether the node must wait: more machines present than
// allowed in its group, or in the whole lock.
func (c Count) Full() bool {
	return len(c.Members) > c.MaxHolders || (c.MaxTotal > 0 && len(c.Total) > c.MaxTotal)
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

// Count reads the seats of this node's lock, every slot and every health
// record of the namespace in one transaction and counts the machines
// present. seat is this node's own seat key ("" when it holds none): it
// is this node, not another machine.
func (f Fleet) Count(ctx context.Context, seat string) (Count, error) {
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	resp, err := f.Client.Txn(rctx).Then(
		clientv3.OpGet(f.Lock+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(Dir(f.NS), clientv3.WithPrefix()),
		clientv3.OpGet(RecordsDir(f.NS), clientv3.WithPrefix()),
		clientv3.OpGet(PauseKey(f.NS)),
	).Commit()
	if err != nil {
		return Count{}, err
	}
	k := f.newCounting(resp.Header.Revision, seat)
	k.seats(resp.Responses[0].GetResponseRange().Kvs, seat)
	k.slots(resp.Responses[1].GetResponseRange().Kvs)
	k.records(resp.Responses[2].GetResponseRange().Kvs)
	c := k.c
	if kvs := resp.Responses[3].GetResponseRange().Kvs; len(kvs) > 0 {
		c.View.Paused = ParsePause(kvs[0].Value)
	}
	if len(k.maxSeen) > 1 {
		for n := range k.maxSeen {
			c.Disagree = append(c.Disagree, n)
		}
		sort.Ints(c.Disagree)
	}
	sort.SliceStable(c.Members[1:], func(i, j int) bool { return c.Members[1+i].Node < c.Members[1+j].Node })
	sort.SliceStable(c.Total[1:], func(i, j int) bool { return c.Total[1+i].Node < c.Total[1+j].Node })
	return c, nil
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

// Evaluate is the built-in policies' verdict on the count's view: this
// node would go down with every counted slot already down.
func (f Fleet) Evaluate(c Count) policy.Decision {
	return policy.Evaluate(c.View, f.Node, f.Policies)
}

// ErrChanged means a slot changed between the count and the take: count
// again (and check again: time passed).
var ErrChanged = errors.New("slot: another node's slot changed since the count; counting again")

// ErrSeatLost means this node's lock seat was gone when the slot was to be
// taken: nothing may run.
var ErrSeatLost = errors.New("slot: the lock seat was gone when the reboot slot was to be taken")

// Held is a slot this node wrote.
type Held struct {
	f Fleet
	// Key and Lease identify it; Value is what was written.
	Key   string
	Lease clientv3.LeaseID
	Value Value
}

// Grant gets the slot's lease before the slot is taken, so that the caller
// can record it (Claim) before the slot exists: whatever happens after the
// take, the lease that can delete the slot is known.
func (f Fleet) Grant(ctx context.Context) (clientv3.LeaseID, error) {
	if f.TTL < 2*time.Second {
		return 0, exitcode.Errorf(exitcode.Config, "slot: reboot_slot_ttl_sec %s is below etcd's minimum of 2s", f.TTL)
	}
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	g, err := f.Client.Grant(rctx, int64(f.TTL/time.Second))
	if err != nil {
		return 0, err
	}
	return g.ID, nil
}

// Take writes this node's slot on lease (from Grant) in one transaction that
// succeeds only while ownerCmp holds (the seat exists), no slot of the
// namespace changed after c.Revision, and the slot key is free or this
// machine's own. It returns ErrSeatLost, ErrChanged, c.Problem, or an etcd
// error (the outcome is then unknown: revoke the lease).
func (f Fleet) Take(ctx context.Context, ownerCmp clientv3.Cmp, seatKey string, c Count, lease clientv3.LeaseID) (*Held, error) {
	if c.Problem != nil {
		return nil, c.Problem
	}
	if f.BootID == "" {
		return nil, exitcode.Errorf(exitcode.RebootFailed, "slot: this machine's boot id is unknown; a slot without it could not be told apart from another machine's")
	}
	if c.Mine != nil && !(c.Mine.Bound && c.Mine.BootID == f.BootID && c.Mine.Lock == f.Lock) {
		// Another machine's (or an older boot's) slot under this name: it
		// counted as a member, so the count was full; a caller that gets
		// here raced with its creation.
		return nil, ErrChanged
	}
	v := Value{V: policy.ProtocolVersion, Node: f.Node, Lock: f.Lock, Group: f.Group, Since: f.now().UTC(), BootID: f.BootID, MachineID: f.MachineID, MaxHolders: f.MaxHolders, MaxTotal: f.MaxTotal}
	val, _ := json.Marshal(v)
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	resp, err := f.Client.Txn(rctx).
		If(ownerCmp, clientv3.Compare(clientv3.ModRevision(Dir(f.NS)), "<", c.Revision+1).WithPrefix()).
		Then(clientv3.OpPut(f.Key(), string(val), clientv3.WithLease(lease))).
		Else(clientv3.OpGet(seatKey, clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		if r := resp.Responses[0].GetResponseRange(); r != nil && r.Count == 0 {
			return nil, ErrSeatLost
		}
		return nil, ErrChanged
	}
	return &Held{f: f, Key: f.Key(), Lease: lease, Value: v}, nil
}

// Renew gives the slot its whole TTL again. It reports ErrExpired when the
// lease is gone.
func (h *Held) Renew(ctx context.Context) error {
	rctx, cancel := h.f.rpc(ctx)
	defer cancel()
	resp, err := h.f.Client.KeepAliveOnce(rctx, h.Lease)
	if isLeaseNotFound(err) || (err == nil && resp.TTL <= 0) {
		return ErrExpired
	}
	return err
}

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

// Wait blocks until a slot of the namespace or a seat of the lock (any
// group) changes after rev, or for recheck at most (a watch can lose a deletion on
// some etcd releases: see lock.Recheck). A broken watch returns after a
// pause of a second, so the caller counts again rather than spin.
func (f Fleet) Wait(ctx context.Context, rev int64, recheck time.Duration) error {
	if recheck <= 0 {
		recheck = lock.Recheck
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	slots := f.Client.Watch(wctx, Dir(f.NS), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	seats := f.Client.Watch(wctx, f.Lock+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	t := time.NewTimer(recheck)
	defer t.Stop()
	var wr clientv3.WatchResponse
	ok := true
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	case wr, ok = <-slots:
	case wr, ok = <-seats:
	}
	if !ok || wr.Err() != nil {
		p := time.NewTimer(time.Second)
		defer p.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.C:
		}
	}
	return nil
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
