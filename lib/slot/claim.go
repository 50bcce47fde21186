package slot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/atomicfile"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// ClaimFile is where, in state_dir, a node records the slot it took: it
// survives the reboot, and names the one lease that may delete the slot.
const ClaimFile = "reboot-slot.json"

// Claim is a taken slot as recorded in state_dir before the slot is written.
type Claim struct {
	Key    string `json:"key"`
	Lease  string `json:"lease_id"`
	Lock   string `json:"lock"`
	Node   string `json:"node"`
	BootID string `json:"boot_id"`
	// Since is when the slot was taken (RFC 3339 with fractions).
	Since string `json:"since"`
	// FencingToken is the lock seat's when the slot was taken (crd-lock
	// hold writes it for the notifications of `crd-lock complete`).
	FencingToken int64 `json:"fencing_token,omitempty"`
	// InflightLease, StartLease and PacedLease are the take's other leases
	// (hex; empty: none, or a claim of an older version).
	InflightLease string `json:"inflight_lease_id,omitempty"`
	StartLease    string `json:"start_lease_id,omitempty"`
	PacedLease    string `json:"paced_lease_id,omitempty"`
	// Group and Wave are the node's when the slot was taken.
	Group string `json:"group,omitempty"`
	Wave  int    `json:"wave,omitempty"`
}

// NewClaim is the claim of the slot about to be taken on leases l.
func NewClaim(f Fleet, l Leases, since time.Time, fencingToken int64) Claim {
	return Claim{Key: f.Key(), Lease: hexLease(l.Slot), Lock: f.Lock, Node: f.Node, BootID: f.BootID,
		Since: since.UTC().Format(time.RFC3339Nano), FencingToken: fencingToken,
		InflightLease: hexLease(l.Inflight), StartLease: hexLease(l.Start), PacedLease: hexLease(l.Paced), Group: f.Group, Wave: f.Wave}
}

// Leases are the claim's leases (0 where none or unreadable).
func (c Claim) Leases() Leases {
	return Leases{Slot: parseLease(c.Lease), Inflight: parseLease(c.InflightLease), Start: parseLease(c.StartLease), Paced: parseLease(c.PacedLease)}
}

func hexLease(id clientv3.LeaseID) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatInt(int64(id), 16)
}

func parseLease(s string) clientv3.LeaseID {
	v, err := strconv.ParseInt(s, 16, 64)
	if err != nil {
		return 0
	}
	return clientv3.LeaseID(v)
}

// LeaseID is the claim's slot lease (0 when unreadable).
func (c Claim) LeaseID() clientv3.LeaseID { return parseLease(c.Lease) }

// ClaimPath is the claim's path in stateDir.
func ClaimPath(stateDir string) string { return filepath.Join(stateDir, ClaimFile) }

// WriteClaim records the slot about to be taken (before the transaction, so
// that whatever follows, the lease that can delete it is known).
func WriteClaim(stateDir string, c Claim) error {
	data, _ := json.Marshal(c)
	if err := os.MkdirAll(stateDir, 0o750); err != nil {
		return exitcode.Errorf(exitcode.RebootFailed, "slot: state_dir %s: %v; nothing was taken", stateDir, exitcode.PathCause(err))
	}
	if err := atomicfile.WriteFile(ClaimPath(stateDir), append(data, '\n'), 0o600); err != nil {
		return exitcode.Errorf(exitcode.RebootFailed, "slot: recording the reboot slot in %s: %v; nothing was taken: free space or fix the directory", ClaimPath(stateDir), exitcode.PathCause(err))
	}
	return nil
}

// ReadClaim reads the claim; ok is false when there is none.
func ReadClaim(stateDir string) (c Claim, ok bool, err error) {
	data, err := os.ReadFile(ClaimPath(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, exitcode.Errorf(exitcode.Config, "slot: reading %s: %v", ClaimPath(stateDir), exitcode.PathCause(err))
	}
	if err := json.Unmarshal(data, &c); err != nil || c.Key == "" {
		return c, false, exitcode.Errorf(exitcode.Config, "slot: %s is not a reboot slot record (%v): remove it once the slot it named (if any) has expired", ClaimPath(stateDir), err)
	}
	return c, true, nil
}

// RemoveClaim removes the claim; a missing one is fine.
func RemoveClaim(stateDir string) error {
	err := os.Remove(ClaimPath(stateDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return exitcode.Errorf(exitcode.Config, "slot: removing %s: %v", ClaimPath(stateDir), exitcode.PathCause(err))
	}
	return nil
}

// ErrNotRebooted means the claim was taken in this boot: the node has not
// rebooted yet, or its reboot command failed after it started a shutdown that
// may still come. The slot stays until the node is back or its lease ends.
var ErrNotRebooted = errors.New("slot: the reboot slot was taken in this boot: the node has not rebooted yet")

// Completion frees a claimed slot after its node's reboot, and records
// what the rollout needs to know of it (docs/rollout.md): the completion
// and its duration, the wave's completion, or, when the slot had run out,
// the failure.
type Completion struct {
	Client *clientv3.Client
	// NS is the namespace.
	NS string
	// BootID is this boot's id.
	BootID string
	// WaveBakeSec, when positive, records the completion for the later
	// waves' bake time; FailureWindowSec is how long a failure counts,
	// and how long the completion's record (DoneKey) lives.
	WaveBakeSec, FailureWindowSec int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (x Completion) now() time.Time {
	if x.Now != nil {
		return x.Now()
	}
	return time.Now()
}

// Complete frees the claimed slot once the node is back from its reboot
// (the boot id differs from the claim's): it deletes the slot key and its
// in-flight record only while the slot is on the claim's lease (a slot
// another machine wrote under the same name is left alone), writing the
// completion's records in the same transaction (records), then revokes the
// slot's and the in-flight record's leases; the start and pacing records
// run out with theirs. freed says whether the key was deleted; ErrExpired with freed
// false says the slot had already run out: the reboot did not complete in
// time, and its in-flight record becomes a failure record (unless an
// operator resumed the rollout since), so that coming back late does not
// un-halt the fleet.
func (x Completion) Complete(ctx context.Context, cl Claim) (freed bool, err error) {
	if cl.BootID == x.BootID && x.BootID != "" {
		return false, exitcode.Errorf(exitcode.LockBusy, "%v (boot id %s, slot taken at %s); it is freed after the reboot, or expires with its lease",
			ErrNotRebooted, x.BootID, cl.Since)
	}
	l := cl.Leases()
	if l.Slot == 0 {
		return false, exitcode.Errorf(exitcode.Config, "slot: the claim for %s has no readable lease id %q: the slot expires with its lease", cl.Key, cl.Lease)
	}
	node := cl.Node
	if node == "" {
		node = strings.TrimPrefix(cl.Key[strings.LastIndex(cl.Key, "/")+1:], "/")
	}
	then := []clientv3.Op{clientv3.OpDelete(cl.Key)}
	if l.Inflight != 0 {
		then = append(then, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(InflightKey(x.NS, node)), "=", l.Inflight)},
			[]clientv3.Op{clientv3.OpDelete(InflightKey(x.NS, node))}, nil))
	}
	since, _ := time.Parse(time.RFC3339Nano, cl.Since)
	ops, records, err := x.records(ctx, node, cl.Group, cl.Wave, since)
	if err != nil {
		return false, err
	}
	then = append(then, ops...)
	resp, err := x.Client.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(cl.Key), "=", l.Slot)).Then(then...).Commit()
	if err != nil {
		x.revoke(ctx, records)
		return false, err
	}
	if !resp.Succeeded {
		x.revoke(ctx, records)
		if cerr := x.lateFailure(ctx, cl, node, l.Inflight); cerr != nil {
			return false, cerr
		}
	}
	r := Free(ctx, x.Client, l.Slot)
	// The start and pacing records stay: they time the fleet's rate and the
	// group's bake from the take, on leases of their own, whether or not
	// the reboot is done (Abort, for a reboot that never started, frees them).
	if l.Inflight != 0 {
		_ = Free(ctx, x.Client, l.Inflight)
	}
	switch {
	case errors.Is(r, ErrExpired) && !resp.Succeeded:
		return false, ErrExpired
	case r != nil && !errors.Is(r, ErrExpired):
		return resp.Succeeded, r
	}
	return resp.Succeeded, nil
}

// records are what a completion writes besides deleting the slot, in the
// same transaction, each on a lease of its own (returned, to revoke when
// the transaction fails): the completion for the later waves' bake time
// (with wave_bake_sec), and the completion itself (DoneKey, on a lease of
// the failure window) with the reboot's duration since the slot was taken.
// The bake mark is a rule: a completion that cannot grant its lease fails
// (the slot stays, and the completion is tried again), since without the
// mark the later waves would start at once. The done record is only for
// the reports: a lease that cannot be granted leaves it out.
func (x Completion) records(ctx context.Context, node, group string, wave int, since time.Time) ([]clientv3.Op, []clientv3.LeaseID, error) {
	var ops []clientv3.Op
	var leases []clientv3.LeaseID
	at := x.now().UTC()
	if x.WaveBakeSec > 0 {
		g, err := x.Client.Grant(ctx, int64(max(x.WaveBakeSec, 2)))
		if err != nil {
			return nil, nil, fmt.Errorf("slot: the completion's wave_bake_sec mark needs a lease, and etcd granted none (%w); the slot stays until the completion is tried again", err)
		}
		mark, _ := json.Marshal(slotinfo.Mark{Node: node, Group: group, Wave: wave, Since: at})
		ops = append(ops, clientv3.OpPut(WaveDoneDir(x.NS)+node, string(mark), clientv3.WithLease(g.ID)))
		leases = append(leases, g.ID)
	}
	if g, err := x.Client.Grant(ctx, int64(max(x.FailureWindowSec, 60))); err == nil {
		d := Done{Node: node, Group: group, Wave: wave, At: at, BootID: x.BootID}
		if !since.IsZero() {
			d.Since = since.UTC()
			if !at.Before(d.Since) {
				d.DurationMS = at.Sub(d.Since).Milliseconds()
			}
		}
		val, _ := json.Marshal(d)
		ops = append(ops, clientv3.OpPut(DoneKey(x.NS, node), string(val), clientv3.WithLease(g.ID)))
		leases = append(leases, g.ID)
	}
	return ops, leases, nil
}

func (x Completion) revoke(ctx context.Context, leases []clientv3.LeaseID) {
	for _, id := range leases {
		_ = Free(ctx, x.Client, id)
	}
}

// lateFailure turns the in-flight record of a reboot whose slot ran out
// into a failure record (the node came back too late), unless an operator
// resumed the rollout after it was written: then it is only deleted.
func (x Completion) lateFailure(ctx context.Context, cl Claim, node string, inflight clientv3.LeaseID) error {
	if inflight == 0 {
		return nil
	}
	return x.convert(ctx, node, func(kv *mvccpb.KeyValue, _ Inflight) bool { return clientv3.LeaseID(kv.Lease) == inflight })
}

// convert turns node's in-flight record, when ours says so, into a failure
// record of kind slot_expired (or deletes it, when an operator resumed the
// rollout after it was written).
func (x Completion) convert(ctx context.Context, node string, ours func(*mvccpb.KeyValue, Inflight) bool) error {
	key := InflightKey(x.NS, node)
	resp, err := x.Client.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(AckKey(x.NS))).Commit()
	if err != nil {
		return err
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil
	}
	var in Inflight
	_ = json.Unmarshal(kvs[0].Value, &in)
	if !ours(kvs[0], in) {
		return nil // another reboot's
	}
	var ack Ack
	if a := resp.Responses[1].GetResponseRange().Kvs; len(a) > 0 {
		_ = json.Unmarshal(a[0].Value, &ack)
	}
	guard := clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)
	if ack.V < 3 && kvs[0].CreateRevision <= ack.Revision {
		// An older version's resume acknowledged it by revision, which its
		// failure record would not keep (it is created later): only deleted.
		// A resume that names it keeps naming it once it is recorded
		// (FailureID).
		_, err = x.Client.Txn(ctx).If(guard).Then(clientv3.OpDelete(key)).Commit()
		return err
	}
	back := x.now().UTC()
	f := slotinfo.Failure{Node: node, Group: in.Group, Wave: in.Wave, Kind: FailureSlotExpired, At: in.Since.Add(time.Duration(in.TTLSec) * time.Second), By: node, Recorded: true,
		Detail: fmt.Sprintf("it came back at %s, after its reboot slot (taken %s, reboot_slot_ttl_sec %d) had run out", stamp(back), stamp(in.Since), in.TTLSec)}
	val, _ := json.Marshal(f)
	window := int64(max(x.FailureWindowSec, 60))
	g, err := x.Client.Grant(ctx, window)
	if err != nil {
		return err
	}
	in.Node, in.CreateRevision = node, kvs[0].CreateRevision
	fkey := FailureKey(x.NS, node, idSuffix(in.ID()))
	_, err = x.Client.Txn(ctx).If(guard).Then(clientv3.OpPut(fkey, string(val), clientv3.WithLease(g.ID)), clientv3.OpDelete(key)).Commit()
	return err
}

// Keep renews the claimed slot's lease (and its in-flight record's) while
// the node is back but not yet done (post-reboot checks failing or
// running). ErrExpired: the slot ran out.
func Keep(ctx context.Context, c *clientv3.Client, cl Claim) (ttl int64, err error) {
	lease := cl.LeaseID()
	if lease == 0 {
		return 0, ErrExpired
	}
	if err := renew(ctx, c, cl.Leases()); err != nil {
		return 0, err
	}
	resp, err := c.TimeToLive(ctx, lease)
	if err != nil {
		return 0, err
	}
	if resp.TTL <= 0 {
		return 0, ErrExpired
	}
	return resp.TTL, nil
}

// RecordFailure records one failure of node (its kind and detail), once
// per id: a failure already recorded under the id is left as it is. It
// counts against the failure budget for windowSec.
func RecordFailure(ctx context.Context, c *clientv3.Client, ns string, f slotinfo.Failure, id string, windowSec int) (recorded bool, err error) {
	f.Recorded = true
	if f.By == "" {
		f.By = f.Node
	}
	val, _ := json.Marshal(f)
	g, err := c.Grant(ctx, int64(max(windowSec, 60)))
	if err != nil {
		return false, err
	}
	key := FailureKey(ns, f.Node, id)
	resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(g.ID))).Commit()
	if err != nil || !resp.Succeeded {
		_, _ = c.Revoke(ctx, g.ID)
	}
	return err == nil && resp.Succeeded, err
}

// Abort gives back a slot taken for a reboot that did not start (a hook
// failed, a pause came, the lock was lost): its in-flight record first, so
// that no moment leaves the record without its slot (which would read as a
// failure), then the slot and the pacing records. ErrExpired: the slot had
// already run out.
func Abort(ctx context.Context, c *clientv3.Client, l Leases) error {
	for _, id := range []clientv3.LeaseID{l.Inflight, l.Start, l.Paced} {
		if id != 0 {
			if err := Free(ctx, c, id); err != nil && !errors.Is(err, ErrExpired) {
				return err
			}
		}
	}
	return Free(ctx, c, l.Slot)
}

// ErrNotOurs means a slot under this node's name was written by another
// machine or boot: it is left alone.
var ErrNotOurs = errors.New("slot: not this machine's slot")

// CompleteByBoot frees a slot for which no claim was recorded (taken by an
// older version, or a FleetLock client's): only if its value names bootID,
// the boot that took it, with its in-flight record. A slot already gone
// whose in-flight record names bootID ran out before this completion: it
// becomes a failure record (ErrExpired), as in Complete. group and wave
// are the completing node's, for the later waves' bake time.
func (x Completion) CompleteByBoot(ctx context.Context, key, bootID, group string, wave int) (freed bool, err error) {
	node := key[strings.LastIndex(key, "/")+1:]
	ikey := InflightKey(x.NS, node)
	resp, err := x.Client.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(ikey)).Commit()
	if err != nil {
		return false, err
	}
	skv, ikv := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(skv) == 0 {
		if len(ikv) > 0 && bootID != "" {
			if cerr := x.convert(ctx, node, func(_ *mvccpb.KeyValue, in Inflight) bool { return in.BootID == bootID }); cerr != nil {
				return false, cerr
			}
			var in Inflight
			if json.Unmarshal(ikv[0].Value, &in) == nil && in.BootID == bootID {
				return false, ErrExpired
			}
		}
		return false, nil
	}
	kv := skv[0]
	p := Parse(x.NS, key, kv.Value, kv.Lease, kv.ModRevision)
	if bootID == "" || p.BootID != bootID {
		return false, fmt.Errorf("%w: %s was written by boot %s, not by this node's boot %s that rebooted: left alone (it expires with its lease)",
			ErrNotOurs, key, orUnknown(p.BootID), orUnknown(bootID))
	}
	then := []clientv3.Op{clientv3.OpDelete(key)}
	var ilease int64
	if len(ikv) > 0 {
		var in Inflight
		if json.Unmarshal(ikv[0].Value, &in) == nil && in.Lease == fmt.Sprintf("%x", kv.Lease) {
			then = append(then, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(ikey), "=", ikv[0].ModRevision)},
				[]clientv3.Op{clientv3.OpDelete(ikey)}, nil))
			ilease = ikv[0].Lease
		}
	}
	ops, records, err := x.records(ctx, node, group, wave, p.Since)
	if err != nil {
		return false, err
	}
	then = append(then, ops...)
	t, err := x.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).Then(then...).Commit()
	if err != nil {
		x.revoke(ctx, records)
		return false, err
	}
	if !t.Succeeded {
		x.revoke(ctx, records)
	}
	if t.Succeeded {
		for _, id := range []int64{ilease, kv.Lease} {
			if id != 0 {
				_ = Free(ctx, x.Client, clientv3.LeaseID(id))
			}
		}
	}
	return t.Succeeded, nil
}
