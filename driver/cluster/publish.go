package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/atomicfile"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/detect"
	"github.com/clusterrebootd/clusterrebootd/lib/etcd"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/notifications"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/version"
)

// validStates are the states a node may publish.
func validStates() []string {
	return []string{policy.StateIdle, policy.StateNeedsReboot, policy.StateBlocked,
		policy.StateWaiting, policy.StateRebooting, policy.StatePostReboot}
}

// publish writes this node's health record on the publish lease. With
// --read-view it then reads the whole view; without, it reads only the pause
// key, in the same transaction as the write: an idle node's publication
// costs etcd the same whatever the size of the fleet (docs/cluster-protocol.md).
func (s *session) publish(ctx context.Context, a protocol.PublishArgs, res *protocol.PublishResult) error {
	if !slices.Contains(validStates(), a.State) {
		return exitcode.Errorf(exitcode.Config, "crd-lock step publish: --state %q: use one of %s", a.State, strings.Join(validStates(), ", "))
	}
	if a.LastCheck.IsZero() {
		a.LastCheck = s.w.now()
	}
	bootID, machineID, _ := s.w.ids()
	rec := policy.NodeRecord{
		V: policy.ProtocolVersion, Node: s.cfg.NodeName, State: a.State, Reason: oneLine(a.Detail, 200), RebootRequired: a.RebootRequired,
		LastCheck: a.LastCheck.UTC(), Group: s.cfg.Group, Version: version.Get().Version,
		Lock: strings.TrimSuffix(s.cfg.LockKey, "/"), BootID: bootID, MachineID: machineID,
		Wave: s.cfg.Rollout.Wave, Rules: ptr(policy.RulesOf(s.cfg)),
	}
	if !a.RequiredSince.IsZero() {
		since := a.RequiredSince.UTC()
		rec.NeedsRebootSince = &since
	}
	rec.NeedsRebootLease = s.needsLease(ctx, a.RequiredSince)
	s.describeMachine(&rec)
	prev, err := s.recordIsOurs(ctx, rec)
	if err != nil {
		return err
	}
	if prev != nil && prev.Group != s.cfg.Group {
		if err := s.leaveGroup(ctx, prev.Group); err != nil {
			return err
		}
	}
	val, _ := json.Marshal(rec)
	id, old, err := s.publishLease(ctx)
	if err != nil {
		return err
	}
	rctx, cancel := s.rpcCtx(ctx)
	// With the record, the keys this node acts on whatever the view: the
	// pause, and an operator's hold or reboot request for this node. Each
	// is one key: an idle node's cost stays flat as the fleet grows.
	ops := []clientv3.Op{
		clientv3.OpPut(s.nodeKey(), string(val), clientv3.WithLease(id)),
		clientv3.OpGet(s.pauseKey()),
		clientv3.OpGet(slot.HoldKey(s.ns, s.cfg.NodeName)),
		clientv3.OpGet(slot.RequestKey(s.ns, s.cfg.NodeName)),
	}
	// The halts: a few keys, one per writer and scope (lib/slot HaltsDir).
	ops = append(ops, slot.HaltOps(s.ns)...)
	// The index beside the record, on its lease (lib/slot/index.go), and
	// this node's rules key, written only when its rules changed
	// (lib/slot/rules.go).
	ops = append(ops, slot.IndexOps(s.ns, s.cfg.NodeName, a.State, id)...)
	busy := slot.BusyOps(s.ns, rec, prev, id)
	ops = append(ops, busy...)
	withRules := func(rl clientv3.LeaseID) []clientv3.Op {
		if rl == 0 {
			// No week-long lease this time: the record's own, so that
			// the rules are never missing while the node lives; the
			// next publication with the week's lease writes the key again.
			rl = id
		}
		// Last, whether this node's group key is there on this lease: a
		// compare alone answers in a few bytes (a read would return the
		// key; keys only, etcd leaves out the lease too).
		return append(append(slices.Clip(ops), slot.RulesOps(s.ns, s.cfg.NodeName, s.cfg.Group, *rec.Rules, rl)...),
			clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(slot.GroupKey(s.ns, s.cfg.Group, s.cfg.NodeName)), "=", id)}, nil, nil))
	}
	rl := s.rulesLease(ctx)
	resp, err := s.client.Txn(rctx).Then(withRules(rl)...).Commit()
	cancel()
	if rl != 0 && errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The remembered rules lease is gone though renewed within the
		// day (etcd restored from a snapshot, or a new cluster): forget
		// it, grant a new one, write again.
		_ = os.Remove(filepath.Join(s.cfg.StateDir, rulesLeaseFile))
		rctx, cancel = s.rpcCtx(ctx)
		resp, err = s.client.Txn(rctx).Then(withRules(s.rulesLease(ctx))...).Commit()
		cancel()
	}
	if err != nil && len(busy) > 0 && etcd.Classify(err) == etcd.ClassPermission {
		// Only the busy keys differ from an idle publication's grants.
		return exitcode.Errorf(exitcode.EtcdUnavailable, "cluster: etcd refused the health record %s with its wave's key %s: "+
			"let this node's role write its waves' busy keys (packaging/etcd-rbac.sh %s) or publish with the operator's user; nothing is rebooted until it can",
			s.nodeKey(), slot.BusyKey(s.ns, s.cfg.Rollout.Wave, s.cfg.NodeName), waveFlags(prev, s.cfg.Rollout.Wave))
	}
	if err != nil {
		return s.etcdErr(ctx, "writing the health record "+s.nodeKey(), err)
	}
	s.keepGroupKey(ctx, id, resp.Responses[len(resp.Responses)-1].GetResponseTxn().GetSucceeded())
	if old != 0 {
		// The record moved to the new lease; the old one carries nothing now.
		fctx, cancel := s.fresh()
		_, _ = s.client.Revoke(fctx, old)
		cancel()
	}
	s.log.Debug("health record published", "event", "published", "key", s.nodeKey(), "lease_id", fmt.Sprintf("%x", id), "state", a.State)
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		res.Paused = parsePause(kvs[0].Value)
	}
	if o := parseOverrides(slot.HoldsDir(s.ns), resp.Responses[2].GetResponseRange().Kvs); len(o) > 0 {
		res.Hold = &o[0]
	}
	if o := parseOverrides(slot.RequestsDir(s.ns), resp.Responses[3].GetResponseRange().Kvs); len(o) > 0 {
		res.Request = &o[0]
	}
	res.Halted = haltOf(slot.ParseHalts(resp.Responses[4:6]), s.cfg.Group)
	if a.ReadSummary {
		sctx, cancel := context.WithTimeout(ctx, 2*s.rpc)
		// The fleet's counts are shared for an interval (slot.CountsKey):
		// this summary is for the checks before the lock and after the
		// reboot, and the admission counts again under the lock.
		share := time.Duration(s.cfg.HealthPublishIntervalSec) * time.Second
		sum, full, err := slot.Summary(sctx, s.client, s.ns, s.cfg.NodeName, s.cfg.ClusterPolicies.FallbackNodes, s.w.now(), share)
		cancel()
		if err != nil {
			return s.etcdErr(ctx, "reading the cluster's summary under "+s.ns, err)
		}
		res.Summary, res.SummaryFull = &sum, full
		if full {
			s.log.Debug("some health records carry no index (an older version): the summary was read from every record", "event", "summary_full")
		}
	}
	if !a.ReadView {
		return nil
	}
	v, err := s.readView(ctx)
	if err != nil {
		return err
	}
	res.View, res.Paused = &v, v.Paused
	return nil
}

func ptr[T any](v T) *T { return &v }

// waveFlags are etcd-rbac.sh's flags that grant this node's busy keys: its
// wave's, and the wave it left when prev was busy there.
func waveFlags(prev *policy.NodeRecord, wave int) string {
	if prev != nil && slot.Busy(*prev) && prev.Wave != wave {
		return fmt.Sprintf("--wave %d --wave %d", prev.Wave, wave)
	}
	return fmt.Sprintf("--wave %d", wave)
}

// describeMachine adds what only this node knows, for the compliance
// report: the running and the newest installed kernel and the boot time,
// read under root as the kernel and max_uptime detectors read them (a few
// directory listings and one small file, whatever the fleet's size). What
// cannot be read is left out, and logged at debug: the record is published
// all the same.
func (s *session) describeMachine(rec *policy.NodeRecord) {
	env := detect.Env{Root: s.w.root, Uname: s.w.uname}
	running, installed, err := detect.Kernels(env)
	rec.KernelRunning, rec.KernelInstalled = running, installed
	if err != nil {
		s.log.Debug("the health record carries no installed kernel", "event", "kernel_unknown", "error", err.Error())
	}
	up, err := detect.Uptime(env)
	if err != nil {
		s.log.Debug("the health record carries no boot time", "event", "uptime_unknown", "error", err.Error())
		return
	}
	booted := s.w.now().Add(-up).UTC().Truncate(time.Second)
	rec.BootedAt = &booted
}

// recordIsOurs refuses to overwrite a record that another machine publishes
// under this node_name (another machine id), or that another lock's node
// publishes in this namespace: two machines must not merge into one node,
// and two fleets must not share a namespace. The record is left alone; the
// error (exit 2) says what to change. A replaced machine's old record expires
// within three publish intervals. prev is the record it read (nil: none, or
// unreadable), whose group this node's group key leaves when it changed.
func (s *session) recordIsOurs(ctx context.Context, mine policy.NodeRecord) (prev *policy.NodeRecord, err error) {
	rctx, cancel := s.rpcCtx(ctx)
	resp, err := s.client.Get(rctx, s.nodeKey())
	cancel()
	if err != nil {
		return nil, s.etcdErr(ctx, "reading the health record "+s.nodeKey(), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var rec policy.NodeRecord
	if json.Unmarshal(resp.Kvs[0].Value, &rec) != nil {
		return nil, nil // unreadable: ours to replace
	}
	if rec.Lock != "" && rec.Lock != mine.Lock {
		return nil, exitcode.Errorf(exitcode.Config, "cluster: the health record %s belongs to lock %s, this node's lock is %s: two fleets share etcd_namespace %s; give each lock its own etcd_namespace",
			s.nodeKey(), rec.Lock, mine.Lock, s.ns)
	}
	if rec.MachineID != "" && mine.MachineID != "" && rec.MachineID != mine.MachineID {
		return nil, exitcode.Errorf(exitcode.Config, "cluster: node_name %q is used by another machine too (machine id %s, boot id %s publishes %s): give every machine a unique node_name; "+
			"if that machine was replaced, its record expires within %d s",
			s.cfg.NodeName, rec.MachineID, orUnknown(rec.BootID), s.nodeKey(), 3*s.cfg.HealthPublishIntervalSec)
	}
	return &rec, nil
}

// groupKeyRefusedFile, in run_dir, says when etcd last refused this node's
// group key (its modification time): the key is tried again an hour later,
// not at every publication, and the warning logged as often.
const groupKeyRefusedFile = "group-key-refused"

// keepGroupKey writes this node's group key on lease, the record's, unless
// kept (the key is there on that lease: a compare in the record's write),
// in a request of its own (lib/slot GroupOp), so that a role that may not
// write it still publishes its record. Then the admissions with a
// percentage read every record, as before the group keys, and this logs a
// warning once an hour; other failures are left to the next publication.
func (s *session) keepGroupKey(ctx context.Context, lease clientv3.LeaseID, kept bool) {
	if kept {
		return
	}
	refused := filepath.Join(s.cfg.RunDir, groupKeyRefusedFile)
	if st, err := os.Stat(refused); err == nil && time.Since(st.ModTime()) < time.Hour {
		return
	}
	key := slot.GroupKey(s.ns, s.cfg.Group, s.cfg.NodeName)
	rctx, cancel := s.rpcCtx(ctx)
	_, err := s.client.Txn(rctx).Then(slot.GroupOp(s.ns, s.cfg.Group, s.cfg.NodeName, lease)).Commit()
	cancel()
	switch {
	case err == nil:
		_ = os.Remove(refused)
	case etcd.Classify(err) == etcd.ClassPermission:
		_ = os.WriteFile(refused, nil, 0o600)
		s.log.Warn("etcd refused this node's group key: admissions with a percentage budget read every health record until its role may write it; "+
			"run packaging/etcd-rbac.sh --replace (docs/security.md)", "event", "group_key_refused", "key", key)
	default:
		s.log.Debug("the group key was not written; the next publication tries again", "event", "group_key_failed", "key", key, "error", err.Error())
	}
}

// leaveGroup deletes this node's key in group, the group its record named
// before this publication: first, so that no admission counts the node in
// the group it left (lib/slot GroupOp). A key there that etcd will not let
// it delete stops the publication: counted there, it would make that
// group's percentages larger than they are.
func (s *session) leaveGroup(ctx context.Context, group string) error {
	key := slot.GroupKey(s.ns, group, s.cfg.NodeName)
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	resp, err := s.client.Get(rctx, key, clientv3.WithCountOnly())
	if err != nil {
		return s.etcdErr(ctx, "reading "+key, err)
	}
	if resp.Count == 0 {
		return nil
	}
	if _, err := s.client.Delete(rctx, key); err != nil {
		if etcd.Classify(err) == etcd.ClassPermission {
			return exitcode.Errorf(exitcode.EtcdUnavailable, "cluster: this node moved from group %q to %q, and etcd refused to delete its key %s in the group it left: "+
				"let its role write that key (packaging/etcd-rbac.sh --group) or delete the key with the operator's user", group, s.cfg.Group, key)
		}
		return s.etcdErr(ctx, "deleting "+key, err)
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// publishLease returns the lease the record lives on: the one remembered in
// run_dir/publish-lease, renewed once, or a new one when it expired (or its
// TTL no longer matches 3 × health_publish_interval_sec; then old is the
// lease to revoke once the record has moved). A lease is never granted per
// publish: records would pile up leases in etcd.
func (s *session) publishLease(ctx context.Context) (id, old clientv3.LeaseID, err error) {
	ttl := int64(3 * s.cfg.HealthPublishIntervalSec)
	path := filepath.Join(s.cfg.RunDir, leaseFile)
	if b, rerr := os.ReadFile(path); rerr == nil {
		if prev, perr := lock.ParseLeaseID(strings.TrimSpace(string(b))); perr == nil && prev != 0 {
			rctx, cancel := s.rpcCtx(ctx)
			ka, kerr := s.client.KeepAliveOnce(rctx, prev)
			cancel()
			switch {
			case kerr == nil && ka.TTL == ttl:
				return prev, 0, nil
			case kerr == nil:
				s.log.Info("publish lease TTL changed; granting a new lease", "lease_id", fmt.Sprintf("%x", prev), "ttl_sec", ka.TTL, "want_ttl_sec", ttl)
				old = prev
			case errors.Is(kerr, rpctypes.ErrLeaseNotFound):
				s.log.Info("publish lease expired; granting a new one", "lease_id", fmt.Sprintf("%x", prev))
			default:
				return 0, 0, s.etcdErr(ctx, "renewing the publish lease", kerr)
			}
		}
	}
	rctx, cancel := s.rpcCtx(ctx)
	grant, err := s.client.Grant(rctx, ttl)
	cancel()
	if err != nil {
		return 0, 0, s.etcdErr(ctx, "granting the publish lease", err)
	}
	if werr := writeFileAtomic(path, []byte(fmt.Sprintf("%x\n", grant.ID))); werr != nil {
		// The record is still published; without the file the next run
		// grants another lease, and this one expires after 3 intervals.
		s.log.Warn("cannot remember the publish lease; check run_dir", "event", "publish_lease_unsaved", "file", path, "error", werr.Error())
	}
	return grant.ID, old, nil
}

// needsLeaseFile, in run_dir, remembers the lease that times this node's
// need for a reboot: "<lease hex> <needs-since RFC 3339>".
const needsLeaseFile = "needs-reboot-lease"

// needsLeaseTTL is the needs lease's TTL: long enough that its age, etcd's
// granted TTL less its remaining TTL, can be read for any wave_timeout_sec
// a node of the fleet may have (at least a week).
func (s *session) needsLeaseTTL() int64 {
	return int64(max(2*s.cfg.Rollout.WaveTimeoutSec, 7*24*3600))
}

// needsLease is the lease (hex) granted when this node's need for a reboot
// began (since; zero: none now), never renewed: later waves read its age
// from etcd to tell how long the node has needed its reboot, whatever any
// clock says (wave_timeout_sec, docs/rollout.md). One grant per episode,
// nothing per publication. When it cannot be granted the record goes
// without it: the node then holds later waves back without a timeout (the
// safe side).
func (s *session) needsLease(ctx context.Context, since time.Time) string {
	path := filepath.Join(s.cfg.RunDir, needsLeaseFile)
	b, _ := os.ReadFile(path)
	prev, prevSince, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	if since.IsZero() {
		if prev != "" {
			if id, err := lock.ParseLeaseID(prev); err == nil {
				fctx, cancel := s.fresh()
				_, _ = s.client.Revoke(fctx, id)
				cancel()
			}
			_ = os.Remove(path)
		}
		return ""
	}
	stamp := since.UTC().Format(time.RFC3339)
	if prev != "" && prevSince == stamp {
		return prev
	}
	rctx, cancel := s.rpcCtx(ctx)
	g, err := s.client.Grant(rctx, s.needsLeaseTTL())
	cancel()
	if err != nil {
		s.log.Debug("cannot grant the lease that times this node's need for a reboot", "error", err.Error())
		return ""
	}
	id := fmt.Sprintf("%x", int64(g.ID))
	if err := writeFileAtomic(path, []byte(id+" "+stamp+"\n")); err != nil {
		s.log.Warn("cannot remember the lease that times this node's need for a reboot; check run_dir", "file", path, "error", err.Error())
	}
	return id
}

// rulesLeaseFile, in state_dir, remembers the rules key's lease and when it
// was last renewed: "<lease hex> <unix seconds>". In state_dir, not run_dir:
// run_dir is emptied by every reboot, and a node that granted its rules key
// a new lease after each reboot would rewrite the key, move the rules
// keys' stamp and make the next admission of every node read every rules
// key again (lib/slot RulesCache) — once per reboot of the fleet — and
// leave a week-long lease behind each time.
const rulesLeaseFile = "rules-lease"

// rulesLease is the lease of this node's rules key (lib/slot RulesOps): a
// week long, renewed once a day (by this node's clock: it decides only when
// to renew), granted anew when it is gone. 0 when etcd cannot grant one:
// the rules key then goes on the record's lease this time.
func (s *session) rulesLease(ctx context.Context) clientv3.LeaseID {
	path := filepath.Join(s.cfg.StateDir, rulesLeaseFile)
	b, _ := os.ReadFile(path)
	hexID, at, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	id, err := lock.ParseLeaseID(hexID)
	renewed, _ := strconv.ParseInt(at, 10, 64)
	now := s.w.now()
	if err == nil && id != 0 {
		if now.Sub(time.Unix(renewed, 0)) < 24*time.Hour && now.Unix() >= renewed {
			return id
		}
		rctx, cancel := s.rpcCtx(ctx)
		ka, kerr := s.client.KeepAliveOnce(rctx, id)
		cancel()
		if kerr == nil && ka.TTL > 0 {
			_ = writeFileAtomic(path, []byte(fmt.Sprintf("%x %d\n", int64(id), now.Unix())))
			return id
		}
	}
	rctx, cancel := s.rpcCtx(ctx)
	g, err := s.client.Grant(rctx, int64(slot.RulesLeaseTTL/time.Second))
	cancel()
	if err != nil {
		s.log.Debug("cannot grant the rules key's lease", "error", err.Error())
		return 0
	}
	if werr := writeFileAtomic(path, []byte(fmt.Sprintf("%x %d\n", int64(g.ID), now.Unix()))); werr != nil {
		s.log.Warn("cannot remember the rules key's lease; check state_dir", "file", path, "error", werr.Error())
	}
	return g.ID
}

// writeFileAtomic creates path's directory if needed and writes data
// atomically (lib/atomicfile).
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o600)
}

// complete frees this node's reboot slot after its reboot: only the slot
// this machine wrote (lib/slot.Complete, by the lease recorded in
// state_dir), and only once the boot id says the node rebooted. A slot taken
// by a version that recorded no claim is freed only if its value names the
// boot the marker was written in.
func (s *session) complete(ctx context.Context, res *protocol.CompleteResult) error {
	boot, _, err := s.w.ids()
	if err != nil {
		return exitcode.Errorf(exitcode.RebootFailed, "%v; cannot tell whether this node rebooted, so its reboot slot is left to expire", err)
	}
	// A completion is a few requests: the slot, the in-flight record, a
	// late one's failure record, the leases.
	rctx, cancel := context.WithTimeout(ctx, 4*s.rpc)
	defer cancel()
	x := s.completion(boot)
	cl, ok, err := slot.ReadClaim(s.cfg.StateDir)
	if err != nil {
		return err
	}
	if !ok {
		m, merr := reboot.ReadMarker(s.cfg.StateDir)
		if merr != nil {
			s.log.Info("no reboot slot claim and no marker: nothing of this node's to free", "event", "slot_freed", "key", s.slotKey(), "freed", false)
			return nil
		}
		if m.BootID == boot {
			return exitcode.Errorf(exitcode.LockBusy, "cluster: the reboot requested at %s has not happened yet (boot id %s unchanged): the slot stays until the node is back or it expires",
				m.RequestedAt.UTC().Format(time.RFC3339), boot)
		}
		freed, err := x.CompleteByBoot(rctx, s.slotKey(), m.BootID, s.cfg.Group, s.cfg.Rollout.Wave)
		if errors.Is(err, slot.ErrExpired) {
			err = nil
		}
		if errors.Is(err, slot.ErrNotOurs) {
			s.log.Warn("reboot slot left alone", "event", "slot_not_ours", "key", s.slotKey(), "error", err.Error())
		} else if err != nil {
			return s.etcdErr(ctx, "freeing the reboot slot "+s.slotKey(), err)
		}
		res.Freed = freed
		s.log.Info("reboot slot freed", "event", "slot_freed", "key", s.slotKey(), "freed", res.Freed)
		return nil
	}
	freed, err := x.Complete(rctx, cl)
	expired := errors.Is(err, slot.ErrExpired)
	var coded *exitcode.Error
	if errors.As(err, &coded) {
		return err
	}
	if err != nil && !expired {
		return s.etcdErr(ctx, "freeing the reboot slot "+cl.Key, err)
	}
	if err := slot.RemoveClaim(s.cfg.StateDir); err != nil {
		s.log.Warn("cannot remove the reboot slot claim", "event", "slot_claim_error", "error", err.Error())
	}
	res.Freed = freed
	if expired {
		s.log.Info("the reboot slot had already expired", "event", "slot_expired", "key", cl.Key, "slot_ttl_sec", s.cfg.RebootSlotTTLSec)
		return nil
	}
	s.log.Info("reboot slot freed", "event", "slot_freed", "key", cl.Key, "freed", res.Freed)
	return nil
}

// completion is this node's lib/slot.Completion in boot boot.
func (s *session) completion(boot string) slot.Completion {
	return slot.Completion{Client: s.client, NS: s.ns, BootID: boot, WaveBakeSec: s.cfg.Rollout.WaveBakeSec,
		FailureWindowSec: s.cfg.Rollout.FailureWindowSec, Now: s.w.now}
}

// keepSlot renews this node's reboot slot while it is back but failing its
// post-reboot checks: the slot, granted before the reboot, would otherwise
// run out and let the next node follow one that is not healthy again. Only
// this machine's own slot (the claim's lease) is renewed; a slot that
// already expired is not re-taken (that needs the lock).
func (s *session) keepSlot(ctx context.Context, res *protocol.CompleteResult) error {
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	cl, ok, err := slot.ReadClaim(s.cfg.StateDir)
	if err != nil {
		return err
	}
	if !ok {
		s.log.Warn("no reboot slot claim in state_dir: no slot of this node's to keep", "event", "slot_gone", "key", s.slotKey())
		return nil
	}
	ttl, err := slot.Keep(rctx, s.client, cl)
	if errors.Is(err, slot.ErrExpired) {
		s.log.Warn("no reboot slot left to keep: it expired while the node was down; other nodes may reboot",
			"event", "slot_gone", "key", cl.Key, "slot_ttl_sec", s.cfg.RebootSlotTTLSec)
		return nil
	}
	if err != nil {
		return s.etcdErr(ctx, "renewing the reboot slot "+cl.Key, err)
	}
	res.Kept = true
	s.postRebootOverdue(ctx, cl)
	s.keepSilences(ctx, cl.LeaseID(), res)
	s.log.Info("reboot slot kept while the post-reboot checks run or fail", "event", "slot_kept", "key", cl.Key, "ttl_sec", ttl)
	return nil
}

// status reads the view and the lock of this node's group.
func (s *session) status(ctx context.Context, res *protocol.StatusResult) error {
	v, err := s.readView(ctx)
	if err != nil {
		return err
	}
	res.View = v
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	info, err := lock.Status(rctx, s.client, s.lockKey())
	if err != nil {
		return err
	}
	res.Lock = info
	// Lists, never null, in the JSON.
	res.Lock.Holders = append(make([]lockinfo.Entry, 0, len(info.Holders)), info.Holders...)
	res.Lock.Waiters = append(make([]lockinfo.Entry, 0, len(info.Waiters)), info.Waiters...)
	ro, err := s.rolloutStatus(ctx)
	if err != nil {
		return err
	}
	res.Rollout = ro
	return nil
}

// rolloutStatus is the rollout as the admission sees it for this node now
// (lib/slot Count and Decide: the same read and rules, nothing written).
func (s *session) rolloutStatus(ctx context.Context) (*protocol.RolloutStatus, error) {
	bootID, machineID, _ := s.w.ids()
	f := slot.FromConfig(s.client, s.cfg, bootID, machineID, slot.ViaDaemon)
	f.RPCTimeout, f.Now = s.rpc, s.w.now
	n, err := f.CountAll(ctx, "")
	if err != nil {
		return nil, s.etcdErr(ctx, "reading the rollout under "+slot.RolloutDir(s.ns), err)
	}
	v := f.Decide(n)
	e := v.Rules
	ro := &protocol.RolloutStatus{Failures: failuresOf(f.Failures(n, e)), MaxFailures: e.MaxFailures, FailureWindowSec: e.FailureWindowSec, Scope: e.FailureScope,
		MaxHolders: e.MaxHolders, MaxTotal: e.MaxTotal, GroupNodes: v.GroupNodes, FleetNodes: v.FleetNodes, StartsLastHour: n.Rollout.StartCount}
	if h := n.Rollout.HaltOf(s.cfg.Group); h != nil {
		ro.Halted = &protocol.RolloutHalt{Reason: h.Reason, Since: h.Since, By: h.By, Failures: failuresOf(h.Failures)}
	}
	if a := n.Rollout.Ack; a != nil {
		ro.LastResume = &protocol.RolloutResume{By: a.By, Reason: a.Reason, Since: a.Since, Revision: a.Revision, Scope: a.Scope, Failures: []string{}}
	}
	ro.Next = protocol.RolloutNext{Rule: "admit"}
	if !v.Admit {
		ro.Next = protocol.RolloutNext{Rule: v.Rule, Reason: v.Reason, Wait: v.Wait}
		if u := f.Until(ctx, v.Marks); !u.IsZero() {
			ro.Next.Until = &u
		}
	}
	nodes := slot.Progress(n)
	ro.Progress = progressOf(slot.Tally(nodes))
	ro.ETA = etaOf(f.Estimate(n, v, nodes))
	return ro, nil
}

func failuresOf(fs []slotinfo.Failure) []protocol.RolloutFailure {
	out := make([]protocol.RolloutFailure, 0, len(fs))
	for _, x := range fs {
		out = append(out, protocol.RolloutFailure{Node: x.Node, Group: x.Group, Wave: x.Wave, Kind: x.Kind, Detail: x.Detail, At: x.At})
	}
	return out
}

// pause sets the cluster-wide kill switch unless it is already set (an
// existing pause keeps its reason, author and time).
func (s *session) pause(ctx context.Context, a protocol.PauseArgs, res *protocol.PauseResult) error {
	if strings.TrimSpace(a.Reason) == "" {
		return exitcode.Errorf(exitcode.Config, "crd-lock step pause: --reason is required: say why reboots stop (it is shown to every node)")
	}
	if a.Group != nil {
		return exitcode.Errorf(exitcode.Config, "crd-lock step pause: --group is for resume: a pause stops every group (a hold stops one node: clusterrebootd hold)")
	}
	p := policy.Pause{V: policy.ProtocolVersion, Reason: oneLine(a.Reason, 200), By: s.cfg.NodeName, Since: s.w.now().UTC()}
	val, _ := json.Marshal(p)
	rctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	resp, err := s.client.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(s.pauseKey()), "=", 0)).
		Then(clientv3.OpPut(s.pauseKey(), string(val))).
		Else(clientv3.OpGet(s.pauseKey())).Commit()
	if err != nil {
		return s.etcdErr(ctx, "writing "+s.pauseKey(), err)
	}
	res.Changed = resp.Succeeded
	res.Paused = &p
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			res.Paused = parsePause(kvs[0].Value)
		}
	}
	s.log.Info("cluster reboots paused", "event", "paused", "key", s.pauseKey(), "changed", res.Changed, "reason", res.Paused.Reason)
	return nil
}

// resume deletes the cluster-wide kill switch and, when the rollout halted
// itself (a recorded halt, or failures that reach the budget), ends the halt
// too: only with a reason, recorded with who and when (lib/slot Resume), so
// that the failures it names no longer count; with a group (failure_scope
// group), that group's halt alone. A budget spent during a pause is
// recorded and notified as a halt first. A resume without a reason while
// halted changes nothing and says what to do.
func (s *session) resume(ctx context.Context, a protocol.PauseArgs, res *protocol.PauseResult) error {
	bootID, machineID, _ := s.w.ids()
	f := slot.FromConfig(s.client, s.cfg, bootID, machineID, slot.ViaDaemon)
	f.RPCTimeout, f.Now = s.rpc, s.w.now
	r, err := f.Resume(ctx, slot.ResumeRequest{Group: a.Group, By: s.cfg.NodeName, Reason: oneLine(a.Reason, 200)})
	if h := r.Recorded; h != nil {
		// Spent while reboots were paused (no admission looked): the halt
		// was recorded before a resume could lift the pause.
		s.log.Error(h.Reason, "event", "rollout_halted", "reason", protocol.ReasonHalted, "failures", len(h.Failures))
		s.notify(notifications.Fields{Event: config.NotifyRolloutHalted, Reason: protocol.ReasonHalted, Detail: h.Reason})
	}
	var refused *exitcode.Error
	switch {
	case errors.As(err, &refused):
		return fmt.Errorf("clusterrebootd resume: %w", err)
	case err != nil:
		return s.etcdErr(ctx, "resuming the rollout under "+slot.RolloutDir(s.ns), err)
	}
	res.Changed = r.PauseLifted
	s.log.Info("cluster reboots resumed", "event", "resumed", "key", s.pauseKey(), "changed", res.Changed)
	if r.Ack == nil {
		return nil
	}
	ack := r.Ack
	rr := &protocol.RolloutResume{Failures: []string{}, By: ack.By, Reason: ack.Reason, Since: ack.Since, Revision: ack.Revision, Scope: ack.Scope}
	if len(r.Ended) > 0 {
		rr.Halted = r.Ended[0].Reason
	}
	for _, x := range r.Acknowledged {
		if d := fmt.Sprintf("%s (%s)", x.Node, x.Kind); !slices.Contains(rr.Failures, d) {
			rr.Failures = append(rr.Failures, d)
		}
	}
	for _, h := range r.StillHalted {
		if id := slot.ScopeID(h.Scope, h.Group); !slices.Contains(rr.StillHalted, id) {
			rr.StillHalted = append(rr.StillHalted, id)
		}
	}
	rr.Acknowledged = ack.Acknowledged
	res.Rollout, res.Changed = rr, true
	s.log.Warn("the halted rollout was resumed by an operator: its failures no longer count", "event", "rollout_resumed",
		"by", ack.By, "reason", ack.Reason, "scope", ack.Scope, "failures", strings.Join(rr.Failures, ", "), "still_halted", strings.Join(rr.StillHalted, ", "), "revision", ack.Revision)
	return nil
}
