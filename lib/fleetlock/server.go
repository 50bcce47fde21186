package fleetlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// BootIDPrefix marks a FleetLock client's slot: its boot_id is
// "fleetlock:<id>". A FleetLock client has no boot id the server could
// know; this one tells its slot apart from a clusterrebootd node's of the
// same name (which counts as another machine) and is what steady-state
// matches before it deletes.
const BootIDPrefix = "fleetlock:"

// BootID is the boot_id of client id's slot and seat.
func BootID(id string) string { return BootIDPrefix + id }

// DefaultGroup is the group Zincati sends when none is configured.
const DefaultGroup = "default"

// Server answers FleetLock requests for one lock (cfg's lock_key).
type Server struct {
	Client *clientv3.Client
	// Config gives lock_key, the namespace, max_holders, lock_ttl_sec (the
	// seat), reboot_slot_ttl_sec (the slot), the backoff, the request
	// timeout and cluster_policies. Its node_name and group are not used.
	Config config.Config
	// DefaultGroupMapsTo is the lock group FleetLock's "default" means (""
	// is the ungrouped lock, where nodes without a group are).
	DefaultGroupMapsTo string
	// SeatTimeout bounds the wait for a seat of the lock's line; a busy
	// line answers failed_lock_semaphore_full and the client asks again.
	SeatTimeout time.Duration
	// SlotTTL overrides reboot_slot_ttl_sec when set (tests).
	SlotTTL time.Duration
	Log     *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// LockGroup is the lock group a FleetLock group maps to.
func (s *Server) LockGroup(group string) string {
	if group == DefaultGroup {
		return s.DefaultGroupMapsTo
	}
	return group
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// fleet is the slot.Fleet of client id in lock group group.
func (s *Server) fleet(id, group string) slot.Fleet {
	cfg := s.Config
	cfg.NodeName, cfg.Group = id, group
	f := slot.FromConfig(s.Client, cfg, BootID(id), "")
	if s.SlotTTL > 0 {
		f.TTL = s.SlotTTL
	}
	f.Now = s.Now
	return f
}

// Result says what a successful operation did.
type Result string

// The results of a successful operation.
const (
	Locked      Result = "locked"       // a slot was taken
	AlreadyHeld Result = "already_held" // pre-reboot by the holder: its slot stays
	Unlocked    Result = "unlocked"     // steady-state freed the slot
	NotHeld     Result = "not_held"     // steady-state: there was nothing to free
)

// ours reports whether p is client id's FleetLock slot on this lock.
func (s *Server) ours(p *slot.Parsed, f slot.Fleet) bool {
	return p.Bound && p.BootID == f.BootID && p.Lock == f.Lock
}

// PreReboot is RecursiveLock: it takes client id's reboot slot in its lock
// group, unless the client holds it already (then the slot is renewed while
// it is younger than its TTL, see renew). A new slot is taken exactly as
// `crd-lock hold --reboot-slot` takes one: under a seat of the group's
// lock held for the count and the take, after the pause and the built-in
// policies, in the transaction guarded by that count.
func (s *Server) PreReboot(ctx context.Context, id, group string) (Result, error) {
	f := s.fleet(id, s.LockGroup(group))
	if res, done, err := s.recursive(ctx, f); done {
		return res, err
	}
	held, err := s.seat(ctx, f)
	if err != nil {
		return "", err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), f.RPCTimeout)
		defer cancel()
		if err := held.Release(rctx); err != nil {
			s.Log.Warn("cannot release the seat; it expires with its lease", "id", id, "key", held.Entry(), "err", err)
		}
	}()
	for range 5 {
		n, err := f.Count(ctx, held.Entry())
		if err != nil {
			return "", s.etcdErr("counting the nodes present", err)
		}
		if n.Problem != nil {
			return "", refuse(http.StatusInternalServerError, KindMisconfigured, n.Problem.Error())
		}
		if n.Mine != nil {
			// Another request of this client (or another server) won the
			// line, or a node of this name wrote a slot meanwhile.
			if s.ours(n.Mine, f) && n.Mine.Group == f.Group {
				return AlreadyHeld, nil
			}
			return "", conflict(id, n.Mine)
		}
		if p := n.View.Paused; p != nil {
			return "", refuse(http.StatusLocked, KindPaused, fmt.Sprintf("reboots are paused cluster-wide (%s, by %s): run `clusterrebootd resume` to allow them", p.Reason, p.By))
		}
		if n.Full() {
			return "", refuse(http.StatusLocked, KindSemaphoreFull, fmt.Sprintf("all %d reboot slots of group %q are in use (%s); ask again later", n.MaxHolders, group, n.Describe()))
		}
		if d := f.Evaluate(n); !d.Allowed {
			return "", refuse(http.StatusLocked, KindPolicy, fmt.Sprintf("policy %s: %s", d.Rule, d.Reason))
		}
		lease, err := f.Grant(ctx)
		if err != nil {
			return "", s.etcdErr("granting the reboot slot's lease", err)
		}
		h, err := f.Take(ctx, held.IsOwnerCmp(), held.Entry(), n, lease)
		if err != nil {
			s.free(f, lease)
		}
		switch {
		case errors.Is(err, slot.ErrChanged):
			continue
		case errors.Is(err, slot.ErrSeatLost):
			return "", refuse(http.StatusServiceUnavailable, KindEtcdUnavailable, "the seat "+held.Entry()+" was lost before the reboot slot was taken; ask again")
		case err != nil:
			var coded *exitcode.Error
			if errors.As(err, &coded) {
				return "", refuse(http.StatusInternalServerError, KindMisconfigured, err.Error())
			}
			return "", s.etcdErr("taking the reboot slot "+f.Key(), err)
		}
		s.Log.Info("reboot slot taken", "id", id, "group", group, "slot_key", h.Key,
			"slot_lease_id", fmt.Sprintf("%x", int64(h.Lease)), "slot_ttl_sec", int64(f.TTL/time.Second), "present", n.Describe())
		return Locked, nil
	}
	return "", refuse(http.StatusLocked, KindSemaphoreFull, "the reboot slots kept changing while this request counted them; ask again")
}

// recursive answers a pre-reboot whose client already holds its slot (done
// is true then, or when the slot under its name is someone else's).
func (s *Server) recursive(ctx context.Context, f slot.Fleet) (Result, bool, error) {
	rctx, cancel := context.WithTimeout(ctx, f.RPCTimeout)
	defer cancel()
	resp, err := f.Client.Get(rctx, f.Key())
	if err != nil {
		return "", true, s.etcdErr("reading the reboot slot "+f.Key(), err)
	}
	if len(resp.Kvs) == 0 {
		return "", false, nil
	}
	kv := resp.Kvs[0]
	p := slot.Parse(f.NS, string(kv.Key), kv.Value, kv.Lease, kv.ModRevision)
	if !s.ours(&p, f) || p.Group != f.Group {
		return "", true, conflict(f.Node, &p)
	}
	s.renew(ctx, f, p)
	return AlreadyHeld, true, nil
}

// renew gives the holder's slot its whole TTL again, but only while the
// slot is younger than one TTL: whatever the client re-sends, a slot lives
// at most twice reboot_slot_ttl_sec from when it was taken. After that it
// runs out, and the client's next pre-reboot takes a new one through every
// gate again (pause, count, policies).
func (s *Server) renew(ctx context.Context, f slot.Fleet, p slot.Parsed) {
	if age := s.now().Sub(p.Since); age >= f.TTL || p.Lease == 0 {
		s.Log.Info("pre-reboot by the holder: its slot keeps the rest of its lease (not renewed: older than its TTL)", "id", f.Node, "slot_key", p.Key, "age", age.Round(time.Second))
		return
	}
	rctx, cancel := context.WithTimeout(ctx, f.RPCTimeout)
	defer cancel()
	if _, err := f.Client.KeepAliveOnce(rctx, clientv3.LeaseID(p.Lease)); err != nil {
		s.Log.Warn("cannot renew the holder's reboot slot", "id", f.Node, "slot_key", p.Key, "err", err)
		return
	}
	s.Log.Info("pre-reboot by the holder: slot renewed", "id", f.Node, "slot_key", p.Key)
}

func conflict(id string, p *slot.Parsed) *Error {
	if strings.HasPrefix(p.BootID, BootIDPrefix) && p.BootID == BootID(id) {
		return refuse(http.StatusConflict, KindIDConflict, fmt.Sprintf("client %s holds a reboot slot of lock %s group %q already: send steady-state first, or wait until it expires", id, p.Lock, p.Group))
	}
	return refuse(http.StatusConflict, KindIDConflict, fmt.Sprintf("the reboot slot %s belongs to another machine named %s (boot id %s): every node needs a unique name; the client's id must not be a clusterrebootd node's node_name", p.Key, id, orUnknown(p.BootID)))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// seat queues for a seat of the group's lock, at most SeatTimeout.
func (s *Server) seat(ctx context.Context, f slot.Fleet) (*lock.Held, error) {
	cfg := s.Config
	cfg.NodeName, cfg.Group = f.Node, f.Group
	o := lock.FromConfig(cfg, f.BootID, "")
	o.Purpose = "fleetlock pre-reboot"
	timeout := s.SeatTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	held, err := lock.Acquire(sctx, f.Client, o)
	if err == nil {
		return held, nil
	}
	switch exitcode.CodeOf(err) {
	case exitcode.LockBusy:
		return nil, refuse(http.StatusLocked, KindSemaphoreFull, fmt.Sprintf("the line of lock %s is busy: other nodes hold its seats (see crd-lock status); ask again later", o.Key))
	case exitcode.Config:
		return nil, refuse(http.StatusInternalServerError, KindMisconfigured, err.Error())
	}
	return nil, refuse(http.StatusServiceUnavailable, KindEtcdUnavailable, err.Error())
}

// SteadyState is UnlockIfHeld: it frees client id's slot, only if it is
// the client's own (boot_id "fleetlock:<id>"), in whichever group.
func (s *Server) SteadyState(ctx context.Context, id, group string) (Result, error) {
	f := s.fleet(id, s.LockGroup(group))
	rctx, cancel := context.WithTimeout(ctx, 2*f.RPCTimeout)
	defer cancel()
	freed, err := slot.CompleteByBoot(rctx, f.Client, f.NS, f.Key(), f.BootID)
	if errors.Is(err, slot.ErrNotOurs) {
		s.Log.Warn("steady-state: the slot under this id is another machine's; left alone", "id", id, "err", err)
		return NotHeld, nil
	}
	if err != nil {
		return "", s.etcdErr("freeing the reboot slot "+f.Key(), err)
	}
	if !freed {
		return NotHeld, nil
	}
	s.Log.Info("reboot slot freed", "id", id, "group", group, "slot_key", f.Key())
	return Unlocked, nil
}

func (s *Server) free(f slot.Fleet, lease clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), f.RPCTimeout)
	defer cancel()
	if err := slot.Free(ctx, f.Client, lease); err != nil && !errors.Is(err, slot.ErrExpired) {
		s.Log.Warn("cannot revoke an unused slot lease; it expires by itself", "id", f.Node, "err", err)
	}
}

func (s *Server) etcdErr(what string, err error) *Error {
	return refuse(http.StatusServiceUnavailable, KindEtcdUnavailable, fmt.Sprintf("%s at %s: %s", what, strings.Join(s.Client.Endpoints(), ","), oneLine(err)))
}
