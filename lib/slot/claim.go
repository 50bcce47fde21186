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

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/atomicfile"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
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
}

// LeaseID is the claim's lease (0 when unreadable).
func (c Claim) LeaseID() clientv3.LeaseID {
	v, err := strconv.ParseInt(c.Lease, 16, 64)
	if err != nil {
		return 0
	}
	return clientv3.LeaseID(v)
}

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

// Complete frees the claimed slot once the node is back from its reboot
// (the boot id differs from the claim's): it deletes the slot key only while
// it is on the claim's lease (a slot another machine wrote under the same
// name is left alone), then revokes the lease. freed says whether the key was
// deleted (false: it had expired or was not ours); ErrExpired with freed
// false says the claim's lease had already run out (the slot expired).
func Complete(ctx context.Context, c *clientv3.Client, cl Claim, bootID string) (freed bool, err error) {
	if cl.BootID == bootID && bootID != "" {
		return false, exitcode.Errorf(exitcode.LockBusy, "%v (boot id %s, slot taken at %s); it is freed after the reboot, or expires with its lease",
			ErrNotRebooted, bootID, cl.Since)
	}
	lease := cl.LeaseID()
	if lease == 0 {
		return false, exitcode.Errorf(exitcode.Config, "slot: the claim for %s has no readable lease id %q: the slot expires with its lease", cl.Key, cl.Lease)
	}
	resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(cl.Key), "=", lease)).
		Then(clientv3.OpDelete(cl.Key)).Commit()
	if err != nil {
		return false, err
	}
	r := Free(ctx, c, lease)
	switch {
	case errors.Is(r, ErrExpired) && !resp.Succeeded:
		return false, ErrExpired
	case r != nil && !errors.Is(r, ErrExpired):
		return resp.Succeeded, r
	}
	return resp.Succeeded, nil
}

// Keep renews the claimed slot's lease while the node is back but not yet
// done (post-reboot checks failing or running). ErrExpired: it ran out.
func Keep(ctx context.Context, c *clientv3.Client, cl Claim) (ttl int64, err error) {
	lease := cl.LeaseID()
	if lease == 0 {
		return 0, ErrExpired
	}
	resp, err := c.KeepAliveOnce(ctx, lease)
	if err != nil {
		if isLeaseNotFound(err) {
			return 0, ErrExpired
		}
		return 0, err
	}
	if resp.TTL <= 0 {
		return 0, ErrExpired
	}
	return resp.TTL, nil
}

// ErrNotOurs means a slot under this node's name was written by another
// machine or boot: it is left alone.
var ErrNotOurs = errors.New("slot: not this machine's slot")

// CompleteByBoot frees a slot for which no claim was recorded (taken by an
// older version): only if its value names bootID, the boot that took it.
func CompleteByBoot(ctx context.Context, c *clientv3.Client, ns, key, bootID string) (freed bool, err error) {
	resp, err := c.Get(ctx, key)
	if err != nil {
		return false, err
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	kv := resp.Kvs[0]
	p := Parse(ns, key, kv.Value, kv.Lease, kv.ModRevision)
	if bootID == "" || p.BootID != bootID {
		return false, fmt.Errorf("%w: %s was written by boot %s, not by this node's boot %s that rebooted: left alone (it expires with its lease)",
			ErrNotOurs, key, orUnknown(p.BootID), orUnknown(bootID))
	}
	t, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, err
	}
	if t.Succeeded && kv.Lease != 0 {
		_ = Free(ctx, c, clientv3.LeaseID(kv.Lease))
	}
	return t.Succeeded, nil
}
