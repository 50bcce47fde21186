package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// handoverNode writes a configuration for one node of a handover trial: a
// reboot is always needed, and the reboot command records the time.
func (b *bench) handoverNode(dir, node, lockKey string) (cfgPath, stampPath string, err error) {
	stampPath = filepath.Join(dir, node+".stamp")
	nd := filepath.Join(dir, node)
	for _, d := range []string{"run", "state"} {
		if err := os.MkdirAll(filepath.Join(nd, d), 0o755); err != nil {
			return "", "", err
		}
	}
	needed := filepath.Join(dir, "reboot-required")
	if err := os.WriteFile(needed, nil, 0o644); err != nil {
		return "", "", err
	}
	cfg := fmt.Sprintf(`node_name: %s
reboot_required_detectors: [{type: file, path: %s}]
etcd_endpoints: [%s]
lock_key: %s
kill_switch_file: %s/disable
state_dir: %s/state
run_dir: %s/run
health_script: /bin/true
reboot_command: [%s, %s]
`, node, needed, b.etcd.Endpoint, lockKey, nd, nd, nd, filepath.Join(b.benchBin, "stamp"), stampPath)
	cfgPath = filepath.Join(nd, "config.yaml")
	return cfgPath, stampPath, os.WriteFile(cfgPath, []byte(cfg), 0o644)
}

// startDaemon starts clusterrebootd run; its stderr goes to logPath.
func (b *bench) startDaemon(cfgPath, logPath string) (*exec.Cmd, error) {
	cmd := exec.Command(filepath.Join(b.bin, "clusterrebootd"), "run", "--config", cfgPath)
	cmd.Env = cleanEnv()
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	return cmd, cmd.Start()
}

func stopCmd(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// waitFor polls cond every 2 ms until it holds or limit passes.
func waitFor(limit time.Duration, cond func() bool) bool {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return cond()
}

func readStamp(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// handoverTrial runs two real daemons (each with its real crd-lock cycle
// child) on one lock: A reboots (its reboot command records the time) and
// keeps its reboot slot, as a rebooting node does; B gets the lock seat and
// waits on a watch for the slot. The slot is then freed the way
// `crd-lock step complete` frees it (the slot and its in-flight record in
// one transaction: a slot that vanished alone would be a lost reboot, and
// the fleet would halt), and the latency is the time from just before that
// transaction to B's reboot command starting.
//
// line is how many others stand in line behind B (a lock entry each) and
// fleet how many health records the fleet has besides A's and B's (B's
// admission under the lock reads only its line's first entries and counts
// the records, lib/slot Count), so trials with one fleet and two lines
// show what the line's length costs the handover.
// The line is filled once B waits, so that it stands behind B.
func (b *bench) handoverTrial(ctx context.Context, c *clientv3.Client, i, line, fleet int) (time.Duration, error) {
	dir := filepath.Join(b.work, "handover", fmt.Sprintf("%d-%d-%d", line, fleet, i))
	ns := fmt.Sprintf("/bench/handover/%d-%d-%d/", line, fleet, i)
	lockKey := ns + "lock"
	cfgA, stampA, err := b.handoverNode(dir, "a", lockKey)
	if err != nil {
		return 0, err
	}
	cfgB, stampB, err := b.handoverNode(dir, "b", lockKey)
	if err != nil {
		return 0, err
	}
	a, err := b.startDaemon(cfgA, filepath.Join(dir, "a.log"))
	defer stopCmd(a)
	if err != nil {
		return 0, err
	}
	if !waitFor(20*time.Second, func() bool { _, ok := readStamp(stampA); return ok }) {
		return 0, fmt.Errorf("handover %d: node a never ran its reboot command; see %s/a.log", i, dir)
	}
	bd, err := b.startDaemon(cfgB, filepath.Join(dir, "b.log"))
	defer stopCmd(bd)
	if err != nil {
		return 0, err
	}
	waiting := func() bool {
		log, _ := os.ReadFile(filepath.Join(dir, "b.log"))
		return bytes.Contains(log, []byte(`"event":"slot_waiting"`))
	}
	if !waitFor(20*time.Second, waiting) {
		return 0, fmt.Errorf("handover %d: node b never waited for the slot; see %s/b.log", i, dir)
	}
	if line > 0 || fleet > 0 {
		lease, err := fillLine(ctx, c, ns, lockKey, line, fleet)
		if err != nil {
			return 0, fmt.Errorf("handover %d: filling the line of %d: %w", i, line, err)
		}
		defer func() { _, _ = c.Revoke(context.Background(), lease) }()
	}
	// Give b time to open its watch after logging.
	time.Sleep(250 * time.Millisecond)
	if _, ok := readStamp(stampB); ok {
		return 0, fmt.Errorf("handover %d: node b rebooted while a's slot was taken", i)
	}
	slotKey := ns + "rebooting/a"
	t0 := time.Now()
	resp, err := c.Txn(ctx).Then(clientv3.OpDelete(slotKey, clientv3.WithPrevKV()),
		clientv3.OpDelete(slot.InflightKey(ns, "a"), clientv3.WithPrevKV())).Commit()
	if err != nil {
		return 0, err
	}
	slotDel, inflightDel := resp.Responses[0].GetResponseDeleteRange(), resp.Responses[1].GetResponseDeleteRange()
	if slotDel.Deleted != 1 {
		return 0, fmt.Errorf("handover %d: no slot %s to release", i, slotKey)
	}
	if !waitFor(20*time.Second, func() bool { _, ok := readStamp(stampB); return ok }) {
		return 0, fmt.Errorf("handover %d: node b never ran its reboot command after the slot was released; see %s/b.log", i, dir)
	}
	for _, kv := range append(slotDel.PrevKvs, inflightDel.PrevKvs...) {
		if kv.Lease != 0 {
			_, _ = c.Revoke(ctx, clientv3.LeaseID(kv.Lease))
		}
	}
	t1, _ := readStamp(stampB)
	return time.Duration(t1 - t0.UnixNano()), nil
}

// fillLine puts line waiters behind the lock's present entries (a lock
// entry each, created after B's, so behind it) and fleet health records
// with their index and rules keys as publish writes them (recordOps), the
// first line of them the waiters' (state waiting), the others idle nodes',
// all on one lease the caller revokes.
func fillLine(ctx context.Context, c *clientv3.Client, ns, lockKey string, line, fleet int) (clientv3.LeaseID, error) {
	lease, err := c.Grant(ctx, 600)
	if err != nil {
		return 0, err
	}
	rules := policy.RulesOf(config.Default())
	now := time.Now().UTC()
	var ops []clientv3.Op
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		_, err := c.Txn(ctx).Then(append(ops, rulesChanged(ns))...).Commit()
		ops = ops[:0]
		return err
	}
	for w := range max(line, fleet) {
		node := fmt.Sprintf("node-%05d", w)
		if w < line {
			ann, _ := json.Marshal(lockinfo.Annotation{Node: node, PID: 1, BootID: "boot-" + node, MachineID: "machine-" + node,
				Purpose: "reboot", MaxHolders: 1, QueuedAt: now, V: lock.ProtocolVersion})
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s/%x", lockKey, 0x7000000000000000+int64(w)), string(ann), clientv3.WithLease(lease.ID)))
		}
		if w < fleet {
			rec := policy.NodeRecord{V: policy.ProtocolVersion, Node: node, State: policy.StateIdle, LastCheck: now, Lock: lockKey,
				BootID: "boot-" + node, MachineID: "machine-" + node, Rules: &rules}
			if w < line {
				rec.State, rec.RebootRequired, rec.NeedsRebootSince = policy.StateWaiting, true, &now
			}
			ops = append(ops, recordOps(ns, "", rec, lease.ID, lease.ID)...)
		}
		if len(ops) >= 90 { // etcd's default --max-txn-ops is 128
			if err := flush(); err != nil {
				return lease.ID, err
			}
		}
	}
	return lease.ID, flush()
}
