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
	"github.com/clusterrebootd/clusterrebootd/lib/notifications"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/slotnotify"
	"github.com/clusterrebootd/clusterrebootd/lib/window"
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

// DefaultTicketTTL is how long a FleetLock client's place in the fleet's
// line (max_holders_total) outlives its last ask: Zincati asks again every
// few minutes while it waits.
const DefaultTicketTTL = 10 * time.Minute

// Server answers FleetLock requests for one lock (cfg's lock_key).
type Server struct {
	Client *clientv3.Client
	// Config gives lock_key, the namespace, max_holders, lock_ttl_sec (the
	// seat), reboot_slot_ttl_sec (the slot), the backoff, the request
	// timeout, cluster_policies, the rollout's rules and fleetlock's
	// per-group settings. Its node_name and group are not used.
	Config config.Config
	// DefaultGroupMapsTo is the lock group FleetLock's "default" means (""
	// is the ungrouped lock, where nodes without a group are).
	DefaultGroupMapsTo string
	// SeatTimeout bounds the wait for a seat of the lock's line; a busy
	// line answers failed_lock_semaphore_full and the client asks again.
	SeatTimeout time.Duration
	// TicketTTL is how long a client's place in the fleet's line outlives
	// its last ask (default DefaultTicketTTL).
	TicketTTL time.Duration
	// SlotTTL overrides reboot_slot_ttl_sec when set (tests).
	SlotTTL time.Duration
	// ClientIdentity, when set, is how a client certificate names its
	// client (IdentityCN, IdentityDNS): the id it asks for must be that name.
	ClientIdentity string
	Log            *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// rules keeps the fleet's rule sets between admissions (lib/slot
	// RulesCache), in memory: the server lives long.
	rules slot.RulesCache
}

// Client certificate identities (--tls-client-id).
const (
	IdentityCN   = "cn"
	IdentityDNS  = "dns"
	IdentityNone = "none"
)

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

// fleet is the slot.Fleet of client id in lock group group: the server's
// rules, with the group's own budget and wave from fleetlock.groups.
func (s *Server) fleet(id, group string) slot.Fleet {
	cfg := s.Config
	cfg.NodeName, cfg.Group = id, group
	g, ok := cfg.FleetLock.Groups[group]
	if ok && g.MaxHolders != nil {
		cfg.MaxHolders = *g.MaxHolders
	}
	cfg.Rollout.Wave = g.Wave
	f := slot.FromConfig(s.Client, cfg, BootID(id), "", slot.ViaFleetLock)
	// The server runs no health script under the lock (its recheck is
	// the windows): only a policy makes its admission count the fleet.
	f.Sized = false
	f.RulesCache = &s.rules
	if s.SlotTTL > 0 {
		f.TTL = s.SlotTTL
	}
	f.Now = s.Now
	return f
}

// windows is the group's windows (nil: none are checked).
func (s *Server) windows(group string) *config.Windows {
	if g, ok := s.Config.FleetLock.Groups[group]; ok && g.Windows != nil {
		return g.Windows
	}
	return s.Config.FleetLock.Windows
}

// Result says what a successful operation did.
type Result string

// The results of a successful operation.
const (
	Locked      Result = "locked"       // a slot was taken
	AlreadyHeld Result = "already_held" // pre-reboot by the holder: its slot has a whole TTL again
	Unlocked    Result = "unlocked"     // steady-state freed the slot
	NotHeld     Result = "not_held"     // steady-state: there was nothing to free
)

// PreReboot is RecursiveLock: it takes client id's reboot slot in its lock
// group through the one admission point (lib/slot.Admission) under a seat
// of the group's lock, exactly as every other entry point does. A client
// that holds its slot already gets it renewed to a whole reboot_slot_ttl_sec
// while the slot is younger than that TTL, and re-admitted through every
// rule after: a 200 always means a whole TTL ahead.
func (s *Server) PreReboot(ctx context.Context, id, group string) (Result, error) {
	lg := s.LockGroup(group)
	f := s.fleet(id, lg)
	renewal := false
	var old *slot.Parsed
	if p, err := s.mine(ctx, f); err != nil {
		return "", err
	} else if p != nil && s.ours(p, f) && p.Group == f.Group {
		fresh, err := s.fresh(ctx, f, p)
		if err != nil {
			return "", err
		}
		if fresh {
			if err := s.window(lg); err != nil {
				// The window closed since the slot was granted: the client
				// has not rebooted (it asks again), and must not now.
				s.freeOld(f, p)
				return "", err
			}
			return s.renew(ctx, f, p)
		}
		// Older than its TTL: re-admitted through every rule, or freed.
		renewal, old = true, p
	}
	// A slot under this id that is not the client's own (another machine's,
	// or its own in another group) is the admission's conflict rule, as for
	// every entry point.
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
	a := slot.Admission{Fleet: f, Seat: held, Renewal: renewal, Started: true, TicketTTL: s.ticketTTL(),
		Recheck: func(context.Context, slot.Count, slotinfo.Verdict) error { return s.window(lg) }}
	out, err := a.Admit(ctx)
	if out.Halted {
		s.notifyHalted(ctx, out.Verdict)
	}
	if err != nil {
		if old != nil {
			// The client asks, so it is up and has not rebooted: its old
			// slot is no reboot in flight. Freed, it is no failure either.
			s.freeOld(f, old)
		}
		return "", s.refusal(err, id, group, f)
	}
	s.markFresh(f, out.Reboot.Lease)
	if old != nil {
		s.revokeOld(f, old)
		s.Log.Info("pre-reboot by the holder after its slot's first TTL: re-admitted through every rule", "id", id, "group", group, "slot_key", out.Reboot.Key)
		return AlreadyHeld, nil
	}
	s.Log.Info("reboot slot taken", "id", id, "group", group, "slot_key", out.Reboot.Key,
		"slot_lease_id", fmt.Sprintf("%x", int64(out.Reboot.Lease)), "slot_ttl_sec", int64(f.TTL/time.Second), "present", out.Count.Describe())
	return Locked, nil
}

func (s *Server) ticketTTL() time.Duration {
	if s.TicketTTL > 0 {
		return s.TicketTTL
	}
	return DefaultTicketTTL
}

// window checks the group's windows: the one node-local rule the server
// can check for clients it cannot look inside.
func (s *Server) window(group string) error {
	w := s.windows(group)
	if w == nil {
		return nil
	}
	loc, err := window.LoadLocation(w.Timezone)
	if err != nil {
		return refuse(http.StatusInternalServerError, KindMisconfigured, err.Error())
	}
	sched, err := window.New(w.Allow, w.Deny, loc)
	if err != nil {
		return refuse(http.StatusInternalServerError, KindMisconfigured, err.Error())
	}
	if d := sched.At(s.now()); !d.Open {
		return refuse(http.StatusLocked, KindWindow, fmt.Sprintf("the maintenance window of %s is closed: %s; ask again later", groupName(group), d.Reason))
	}
	return nil
}

// refusal is the answer to an admission that did not take a slot.
func (s *Server) refusal(err error, id, group string, f slot.Fleet) error {
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	var r *slotinfo.Refusal
	if errors.As(err, &r) {
		kind, status := ruleKind(r.Rule), http.StatusLocked
		switch {
		case r.Rule == slot.RuleConflict && r.Code == exitcode.Config && strings.Contains(r.Reason, "two fleets share"):
			status, kind = http.StatusInternalServerError, KindMisconfigured
		case r.Rule == slot.RuleConflict:
			status = http.StatusConflict
		}
		value := r.Reason
		if !r.Until.IsZero() {
			value += "; ask again after " + r.Until.UTC().Format(time.RFC3339)
		}
		return refuse(status, kind, value)
	}
	if errors.Is(err, slot.ErrSeatLost) {
		return refuse(http.StatusServiceUnavailable, KindEtcdUnavailable, "the seat was lost before the reboot slot was taken; ask again")
	}
	var coded *exitcode.Error
	if errors.As(err, &coded) {
		return refuse(http.StatusInternalServerError, KindMisconfigured, err.Error())
	}
	return s.etcdErr("admitting the reboot slot "+f.Key(), err)
}

// ruleKind is the protocol's error kind of an admission rule.
func ruleKind(rule string) string {
	switch rule {
	case slot.RuleConflict:
		return KindIDConflict
	case slot.RulePaused:
		return KindPaused
	case slot.RuleHalted:
		return KindHalted
	case slot.RuleHeld:
		return KindHeld
	case slot.RuleWave:
		return KindWave
	case slot.RulePolicy:
		return KindPolicy
	case slot.RuleMinInterval, slot.RuleRate:
		return KindPaced
	}
	return KindSemaphoreFull
}

// ours reports whether p is client id's FleetLock slot on this lock.
func (s *Server) ours(p *slot.Parsed, f slot.Fleet) bool {
	return p.Bound && p.BootID == f.BootID && p.Lock == f.Lock
}

// mine reads the slot under the client's id (nil: none).
func (s *Server) mine(ctx context.Context, f slot.Fleet) (*slot.Parsed, error) {
	rctx, cancel := context.WithTimeout(ctx, f.RPCTimeout)
	defer cancel()
	resp, err := f.Client.Get(rctx, f.Key())
	if err != nil {
		return nil, s.etcdErr("reading the reboot slot "+f.Key(), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	kv := resp.Kvs[0]
	p := slot.Parse(f.NS, string(kv.Key), kv.Value, kv.Lease, kv.ModRevision)
	return &p, nil
}

// FreshKey marks a FleetLock client's slot younger than its TTL:
// <ns>fleetlock/fresh/<id>, on a lease of reboot_slot_ttl_sec granted with
// the slot and never renewed, naming the slot's lease. While it lives, the
// holder's pre-reboot renews its slot; once its lease ends (timed by etcd,
// not by the clock of whichever server answers), the holder is re-admitted
// through every rule.
func FreshKey(ns, id string) string { return ns + "fleetlock/fresh/" + id }

// fresh reports whether p, the client's slot, is younger than its TTL.
func (s *Server) fresh(ctx context.Context, f slot.Fleet, p *slot.Parsed) (bool, error) {
	if p.Lease == 0 {
		return false, nil
	}
	rctx, cancel := context.WithTimeout(ctx, f.RPCTimeout)
	defer cancel()
	resp, err := f.Client.Get(rctx, FreshKey(f.NS, f.Node))
	if err != nil {
		return false, s.etcdErr("reading "+FreshKey(f.NS, f.Node), err)
	}
	return len(resp.Kvs) > 0 && string(resp.Kvs[0].Value) == fmt.Sprintf("%x", p.Lease), nil
}

// markFresh writes the slot's FreshKey (best effort: without it the
// holder's next pre-reboot is re-admitted through every rule, the safe
// side).
func (s *Server) markFresh(f slot.Fleet, lease clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*f.RPCTimeout)
	defer cancel()
	g, err := f.Client.Grant(ctx, int64(f.TTL/time.Second))
	if err == nil {
		_, err = f.Client.Put(ctx, FreshKey(f.NS, f.Node), fmt.Sprintf("%x", int64(lease)), clientv3.WithLease(g.ID))
	}
	if err != nil {
		s.Log.Warn("cannot mark the new slot fresh; the holder's next pre-reboot is re-admitted through every rule", "id", f.Node, "err", err)
	}
}

// renew gives the holder's slot (younger than its TTL) its whole TTL again,
// and its in-flight record with it. A renewal that fails is no 200: the
// client must not believe it holds a slot that is about to run out.
func (s *Server) renew(ctx context.Context, f slot.Fleet, p *slot.Parsed) (Result, error) {
	rctx, cancel := context.WithTimeout(ctx, f.RPCTimeout)
	defer cancel()
	ka, err := f.Client.KeepAliveOnce(rctx, clientv3.LeaseID(p.Lease))
	if err != nil || ka.TTL < int64(f.TTL/time.Second)-1 {
		return "", refuse(http.StatusServiceUnavailable, KindEtcdUnavailable, fmt.Sprintf("cannot renew the reboot slot %s: %v; ask again", p.Key, oneLine(orErr(err, "lease gone"))))
	}
	if in, err := f.Client.Get(rctx, slot.InflightKey(f.NS, f.Node)); err == nil && len(in.Kvs) > 0 && in.Kvs[0].Lease != 0 {
		_, _ = f.Client.KeepAliveOnce(rctx, clientv3.LeaseID(in.Kvs[0].Lease))
	}
	s.Log.Info("pre-reboot by the holder: slot renewed", "id", f.Node, "slot_key", p.Key, "ttl_sec", ka.TTL)
	return AlreadyHeld, nil
}

func orErr(err error, s string) error {
	if err != nil {
		return err
	}
	return errors.New(s)
}

// freeOld deletes a holder's old slot and its in-flight record: it asked
// again, so it did not reboot.
func (s *Server) freeOld(f slot.Fleet, p *slot.Parsed) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*f.RPCTimeout)
	defer cancel()
	ikey := slot.InflightKey(f.NS, f.Node)
	resp, err := f.Client.Get(ctx, ikey)
	if err == nil && len(resp.Kvs) > 0 && resp.Kvs[0].Lease != 0 {
		_ = slot.Free(ctx, f.Client, clientv3.LeaseID(resp.Kvs[0].Lease))
	}
	if err := slot.Free(ctx, f.Client, clientv3.LeaseID(p.Lease)); err != nil && !errors.Is(err, slot.ErrExpired) {
		s.Log.Warn("cannot free the holder's old reboot slot; it expires with its lease", "id", f.Node, "err", err)
	}
	s.Log.Info("pre-reboot by the holder after its slot's first TTL was refused: its old slot is freed", "id", f.Node, "slot_key", p.Key)
}

// revokeOld revokes the old slot's lease once the re-admitted slot moved
// to a new one (it holds nothing now).
func (s *Server) revokeOld(f slot.Fleet, p *slot.Parsed) {
	ctx, cancel := context.WithTimeout(context.Background(), f.RPCTimeout)
	defer cancel()
	_ = slot.Free(ctx, f.Client, clientv3.LeaseID(p.Lease))
}

func groupName(g string) string {
	if g == "" {
		return "the ungrouped lock"
	}
	return "group " + g
}

// seat queues for a seat of the group's lock, at most SeatTimeout.
func (s *Server) seat(ctx context.Context, f slot.Fleet) (*lock.Held, error) {
	cfg := s.Config
	cfg.NodeName, cfg.Group = f.Node, f.Group
	o := lock.FromConfig(cfg, f.BootID, "")
	o.Purpose, o.Candidate = "fleetlock pre-reboot", true
	if f.Rules.MaxHolders.Percent > 0 {
		if n, err := f.Seats(ctx); err == nil {
			o.MaxHolders = n
		}
	} else {
		o.MaxHolders = max(1, f.Rules.MaxHolders.N)
	}
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
		// Its place in the group's line, which a daemon or pipeline that
		// joined the line later yields to (lib/slot groupBudget).
		f.Enqueue(ctx, s.ticketTTL())
		return nil, refuse(http.StatusLocked, KindSemaphoreFull, fmt.Sprintf("the line of lock %s is busy: other nodes hold its seats (see crd-lock status); this client keeps its place in the group's line, ask again later", o.Key))
	case exitcode.Config:
		return nil, refuse(http.StatusInternalServerError, KindMisconfigured, err.Error())
	}
	return nil, refuse(http.StatusServiceUnavailable, KindEtcdUnavailable, err.Error())
}

// SteadyState is UnlockIfHeld: it frees client id's slot, only if it is
// the client's own (boot_id "fleetlock:<id>"), in whichever group, with its
// in-flight record, and gives up the client's place in its group's line. A slot that had run out before the client came back is
// a failure (docs/rollout.md): its in-flight record becomes a failure
// record.
func (s *Server) SteadyState(ctx context.Context, id, group string) (Result, error) {
	lg := s.LockGroup(group)
	f := s.fleet(id, lg)
	rctx, cancel := context.WithTimeout(ctx, 4*f.RPCTimeout)
	defer cancel()
	x := slot.Completion{Client: f.Client, NS: f.NS, BootID: f.BootID, WaveBakeSec: s.Config.Rollout.WaveBakeSec,
		FailureWindowSec: s.Config.Rollout.FailureWindowSec, Now: s.Now}
	freed, err := x.CompleteByBoot(rctx, f.Key(), f.BootID, lg, f.Wave)
	if err == nil || errors.Is(err, slot.ErrNotOurs) || errors.Is(err, slot.ErrExpired) {
		// In steady state the client needs no reboot: it leaves its
		// group's line (a place kept after a 423).
		if derr := f.Dequeue(rctx); derr != nil {
			s.Log.Warn("steady-state: cannot give up the client's place in its group's line; it ends with its lease", "id", id, "err", derr)
		}
		_, _ = f.Client.Delete(rctx, FreshKey(f.NS, f.Node))
	}
	switch {
	case errors.Is(err, slot.ErrNotOurs):
		s.Log.Warn("steady-state: the slot under this id is another machine's; left alone", "id", id, "err", err)
		return NotHeld, nil
	case errors.Is(err, slot.ErrExpired):
		s.Log.Warn("steady-state: the client's reboot slot had run out before it came back: recorded as a failure of the rollout", "id", id, "slot_key", f.Key())
		return NotHeld, nil
	case err != nil:
		return "", s.etcdErr("freeing the reboot slot "+f.Key(), err)
	case !freed:
		return NotHeld, nil
	}
	s.Log.Info("reboot slot freed", "id", id, "group", group, "slot_key", f.Key())
	return Unlocked, nil
}

// notifyHalted sends rollout_halted: this server's admission recorded the
// halt, so it alone sends it.
func (s *Server) notifyHalted(ctx context.Context, v slotinfo.Verdict) {
	s.Log.Error(v.Reason, "event", "rollout_halted", "failures", len(v.Failures))
	snd := slotnotify.NewSender(s.Config, strings.TrimSuffix(s.Config.LockKey, "/"), s.now, s.Log)
	if !snd.Wants(config.NotifyRolloutHalted) {
		return
	}
	snd.Send(notifications.Fields{Event: config.NotifyRolloutHalted, Reason: "halted", Detail: v.Reason})
	snd.Wait()
}

func (s *Server) etcdErr(what string, err error) *Error {
	return refuse(http.StatusServiceUnavailable, KindEtcdUnavailable, fmt.Sprintf("%s at %s: %s", what, strings.Join(s.Client.Endpoints(), ","), oneLine(err)))
}
