package fleetlock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// setup starts a FleetLock server for lock <ns>lock (max_holders 1 unless
// mutate says otherwise) on the embedded etcd, behind httptest.
func setup(t *testing.T, mutate func(*Server)) (*Server, client, *clientv3.Client) {
	t.Helper()
	c := testsupport.NewClient(t, embedded.Endpoint)
	ns := "/t/" + strings.ReplaceAll(t.Name(), "/", "-") + "/"
	cfg := config.Default()
	cfg.LockKey, cfg.MaxHolders, cfg.LockTTLSec, cfg.EtcdDialTimeoutSec = ns+"lock", config.Count(1), 5, 3
	s := &Server{Client: c, Config: cfg, SeatTimeout: 2 * time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mutate != nil {
		mutate(s)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = c.Delete(ctx, ns, clientv3.WithPrefix())
	})
	return s, newTestClient(t, hs.URL+"/", "zincati"), c
}

// daemonSlot takes a reboot slot for a clusterrebootd node as the daemon
// and `crd-lock hold --reboot-slot` do: seat, count, guarded take.
func daemonSlot(t *testing.T, c *clientv3.Client, cfg config.Config, node, group string) (*slot.Reboot, slot.Fleet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.NodeName, cfg.Group = node, group
	boot, machine := "boot-"+node, "machine-"+node
	held, err := lock.Acquire(ctx, c, lock.FromConfig(cfg, boot, machine))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	f := slot.FromConfig(c, cfg, boot, machine, slot.ViaDaemon)
	a := slot.Admission{Fleet: f, Seat: held}
	out, err := a.Admit(ctx)
	if err != nil {
		t.Fatalf("daemon %s counts %s: cannot take a slot: %v", node, out.Count.Describe(), err)
	}
	return out.Reboot, f
}

func want(t *testing.T, what string, got reply, status int, kind string) {
	t.Helper()
	if got.Status != status || got.Kind != kind {
		t.Fatalf("%s: status %d kind %q (%s), want %d %q", what, got.Status, got.Kind, got.Value, status, kind)
	}
}

func TestProtocolErrors(t *testing.T) {
	_, cl, _ := setup(t, nil)
	body := `{"client_params":{"id":"a","group":"default"}}`
	hdr := map[string]string{"fleet-lock-protocol": "true"}
	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
		body               string
		status             int
		kind               string
	}{
		{"GET", http.MethodGet, "v1/pre-reboot", hdr, body, 405, KindMethodNotAllowed},
		{"PUT", http.MethodPut, "v1/steady-state", hdr, body, 405, KindMethodNotAllowed},
		{"unknown path", http.MethodPost, "v1/reboot", hdr, body, 404, KindNotFound},
		{"v2", http.MethodPost, "v2/pre-reboot", hdr, body, 404, KindNotFound},
		{"no header", http.MethodPost, "v1/pre-reboot", nil, body, 400, KindMissingHeader},
		{"header false", http.MethodPost, "v1/steady-state", map[string]string{"fleet-lock-protocol": "false"}, body, 400, KindMissingHeader},
		{"not JSON", http.MethodPost, "v1/pre-reboot", hdr, `id=a`, 400, KindInvalidBody},
		{"empty body", http.MethodPost, "v1/pre-reboot", hdr, ``, 400, KindInvalidBody},
		{"no client_params", http.MethodPost, "v1/pre-reboot", hdr, `{"id":"a","group":"default"}`, 400, KindInvalidBody},
		{"client_params not an object", http.MethodPost, "v1/pre-reboot", hdr, `{"client_params":"a"}`, 400, KindInvalidBody},
		{"too large", http.MethodPost, "v1/pre-reboot", hdr, `{"x":"` + strings.Repeat("a", 20000) + `"}`, 400, KindInvalidBody},
		{"no id", http.MethodPost, "v1/pre-reboot", hdr, `{"client_params":{"group":"default"}}`, 400, KindInvalidID},
		{"empty id", http.MethodPost, "v1/steady-state", hdr, `{"client_params":{"id":"","group":"default"}}`, 400, KindInvalidID},
		{"id with slash", http.MethodPost, "v1/pre-reboot", hdr, `{"client_params":{"id":"a/../b","group":"default"}}`, 400, KindInvalidID},
		{"id with space", http.MethodPost, "v1/pre-reboot", hdr, `{"client_params":{"id":"a b","group":"default"}}`, 400, KindInvalidID},
		{"no group", http.MethodPost, "v1/pre-reboot", hdr, `{"client_params":{"id":"a"}}`, 400, KindInvalidGroup},
		{"group with underscore", http.MethodPost, "v1/pre-reboot", hdr, `{"client_params":{"id":"a","group":"a_b"}}`, 400, KindInvalidGroup},
		{"group with slash", http.MethodPost, "v1/steady-state", hdr, `{"client_params":{"id":"a","group":"a/b"}}`, 400, KindInvalidGroup},
		{"group too long", http.MethodPost, "v1/pre-reboot", hdr, `{"client_params":{"id":"a","group":"` + strings.Repeat("g", 64) + `"}}`, 400, KindInvalidGroup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want(t, tc.name, cl.raw(tc.method, cl.base+tc.path, tc.header, []byte(tc.body)), tc.status, tc.kind)
		})
	}
}

func TestLockUnlock(t *testing.T) {
	s, zincati, c := setup(t, nil)
	flatcar := newTestClient(t, strings.TrimSuffix(zincati.base, "/"), "flatcar")
	ctx := context.Background()

	r := zincati.preReboot("a", "default")
	want(t, "first pre-reboot", r, 200, "")
	if r.Result != Locked {
		t.Fatalf("result %q, want locked", r.Result)
	}
	got, err := c.Get(ctx, slot.Key(s.Config.Namespace(), "a"))
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("no slot for a: %v", err)
	}
	p := slot.Parse(s.Config.Namespace(), string(got.Kvs[0].Key), got.Kvs[0].Value, got.Kvs[0].Lease, got.Kvs[0].ModRevision)
	if !p.Bound || p.BootID != "fleetlock:a" || p.Lock != s.Config.LockKey || p.Group != "" || p.Lease == 0 {
		t.Fatalf("slot value %+v: want boot_id fleetlock:a, lock %s, the ungrouped lock, a lease", p, s.Config.LockKey)
	}
	ttl, err := c.TimeToLive(ctx, clientv3.LeaseID(p.Lease))
	if err != nil || ttl.GrantedTTL != 1800 {
		t.Fatalf("slot lease granted %d s (%v), want reboot_slot_ttl_sec 1800", ttl.GrantedTTL, err)
	}

	// Recursive: the holder asking again gets 200, every tick.
	for range 3 {
		if r := zincati.preReboot("a", "default"); r.Status != 200 || r.Result != AlreadyHeld {
			t.Fatalf("re-sent pre-reboot: %d %q %s, want 200 already_held", r.Status, r.Result, r.Value)
		}
	}
	// Another client waits: the group's one slot is taken.
	want(t, "b while a holds", flatcar.preReboot("b", "default"), 423, KindSemaphoreFull)
	// steady-state frees only the caller's slot.
	want(t, "steady-state b", flatcar.steadyState("b", "default"), 200, "")
	want(t, "b still refused", zincati.preReboot("b", "default"), 423, KindSemaphoreFull)
	if r := zincati.steadyState("a", "default"); r.Status != 200 || r.Result != Unlocked {
		t.Fatalf("steady-state a: %d %q, want 200 unlocked", r.Status, r.Result)
	}
	if r := zincati.steadyState("a", "default"); r.Status != 200 || r.Result != NotHeld {
		t.Fatalf("steady-state a again: %d %q, want 200 not_held", r.Status, r.Result)
	}
	if r := flatcar.preReboot("b", "default"); r.Status != 200 || r.Result != Locked {
		t.Fatalf("b after a's steady-state: %d %q %s, want 200 locked", r.Status, r.Result, r.Value)
	}
	// The seats were short-lived: none is left in the line.
	info, err := lock.Entries(ctx, c, s.Config.LockKey)
	if err != nil || len(info.Holders)+len(info.Waiters) != 0 {
		t.Fatalf("seats left behind: %+v (%v)", info, err)
	}
}

// A FleetLock client and clusterrebootd nodes count against one max_holders,
// both ways, and the smallest max_holders in the line counts.
func TestCountedWithDaemonSlots(t *testing.T) {
	s, cl, c := setup(t, func(s *Server) { s.Config.MaxHolders = config.Count(2) })
	cfg := s.Config
	cfg.MaxHolders = config.Count(1)
	d1, _ := daemonSlot(t, c, cfg, "d1", "")
	// d1's slot says max_holders 1: the smallest counts, the server's 2 does not.
	want(t, "pre-reboot beside d1 (max_holders 1)", cl.preReboot("f1", "default"), 423, KindSemaphoreFull)
	ctx := context.Background()
	if err := slot.Abort(ctx, c, d1.Leases); err != nil {
		t.Fatal(err)
	}
	cfg.MaxHolders = config.Count(2)
	daemonSlot(t, c, cfg, "d2", "")
	want(t, "pre-reboot beside d2 (max_holders 2)", cl.preReboot("f1", "default"), 200, "")
	want(t, "a third node", cl.preReboot("f2", "default"), 423, KindSemaphoreFull)

	// The other way: a daemon counts the FleetLock client's slot.
	cfg.NodeName = "d3"
	f := slot.FromConfig(c, cfg, "boot-d3", "machine-d3", slot.ViaDaemon)
	n, err := f.Count(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if f.Decide(n).Admit || !strings.Contains(n.Describe(), "f1(slot)") {
		t.Fatalf("daemon d3 counts %s, want f1's slot counted and the group full", n.Describe())
	}
}

// A group is a budget of its own; "default" is the ungrouped lock.
func TestGroupBudget(t *testing.T) {
	s, cl, c := setup(t, nil)
	want(t, "workers w1", cl.preReboot("w1", "workers"), 200, "")
	want(t, "workers w2", cl.preReboot("w2", "workers"), 423, KindSemaphoreFull)
	want(t, "default d1", cl.preReboot("d1", "default"), 200, "")
	// A daemon of group workers counts w1.
	cfg := s.Config
	cfg.NodeName, cfg.Group = "n1", "workers"
	n, err := slot.FromConfig(c, cfg, "boot-n1", "m-n1", slot.ViaDaemon).Count(context.Background(), "")
	if err != nil || slot.FromConfig(c, cfg, "boot-n1", "m-n1", slot.ViaDaemon).Decide(n).Admit {
		t.Fatalf("daemon of group workers counts %s (%v), want full", n.Describe(), err)
	}
	// A client that changed group holds its slot in the old one.
	want(t, "w1 in another group", cl.preReboot("w1", "db"), 409, KindIDConflict)
	want(t, "steady-state w1 (any group)", cl.steadyState("w1", "db"), 200, "")
	want(t, "workers w2 after w1", cl.preReboot("w2", "workers"), 200, "")
}

// "default" can map to a lock group instead of the ungrouped lock.
func TestDefaultGroupMapping(t *testing.T) {
	s, cl, c := setup(t, func(s *Server) { s.DefaultGroupMapsTo = "fcos" })
	want(t, "default", cl.preReboot("a", "default"), 200, "")
	want(t, "fcos", cl.preReboot("b", "fcos"), 423, KindSemaphoreFull)
	got, err := c.Get(context.Background(), slot.Key(s.Config.Namespace(), "a"))
	if err != nil || len(got.Kvs) != 1 || !strings.Contains(string(got.Kvs[0].Value), `"group":"fcos"`) {
		t.Fatalf("slot of a: %v %v, want group fcos", got, err)
	}
}

func TestPauseRefuses(t *testing.T) {
	s, cl, c := setup(t, nil)
	ctx := context.Background()
	want(t, "holder before the pause", cl.preReboot("a", "default"), 200, "")
	if _, err := c.Put(ctx, slot.PauseKey(s.Config.Namespace()), `{"reason":"incident 42","by":"ops"}`); err != nil {
		t.Fatal(err)
	}
	want(t, "steady-state a", cl.steadyState("a", "default"), 200, "")
	r := cl.preReboot("b", "default")
	want(t, "paused", r, 423, KindPaused)
	if !strings.Contains(r.Value, "incident 42") {
		t.Fatalf("value %q does not name the pause's reason", r.Value)
	}
	if _, err := c.Delete(ctx, slot.PauseKey(s.Config.Namespace())); err != nil {
		t.Fatal(err)
	}
	want(t, "resumed", cl.preReboot("b", "default"), 200, "")
}

func TestPolicyRefuses(t *testing.T) {
	_, cl, _ := setup(t, func(s *Server) { s.Config.ClusterPolicies.MinHealthyAbsolute = 1 })
	want(t, "no healthy node would stay", cl.preReboot("a", "default"), 423, KindPolicy)
}

// A clusterrebootd node's name is not a FleetLock client's: its slot is
// refused to the client and left alone by steady-state.
func TestIDConflict(t *testing.T) {
	s, cl, c := setup(t, func(s *Server) { s.Config.MaxHolders = config.Count(3) })
	cfg := s.Config
	daemonSlot(t, c, cfg, "n1", "")
	want(t, "pre-reboot as n1", cl.preReboot("n1", "default"), 409, KindIDConflict)
	want(t, "steady-state as n1", cl.steadyState("n1", "default"), 200, "")
	got, err := c.Get(context.Background(), slot.Key(s.Config.Namespace(), "n1"))
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("the daemon's slot n1 was deleted by a FleetLock steady-state (%v)", err)
	}
}

// A busy line (a seat held by a node checking its health) makes the
// request give up after the seat timeout: the client asks again.
func TestBusyLine(t *testing.T) {
	s, cl, c := setup(t, func(s *Server) { s.SeatTimeout = time.Second })
	cfg := s.Config
	cfg.NodeName = "pipeline"
	held, err := lock.Acquire(context.Background(), c, lock.FromConfig(cfg, "boot-p", "m-p"))
	if err != nil {
		t.Fatal(err)
	}
	want(t, "seat held by another node", cl.preReboot("a", "default"), 423, KindSemaphoreFull)
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	want(t, "seat free", cl.preReboot("a", "default"), 200, "")
}

// A client that never sends steady-state frees its slot when the slot's
// lease runs out: with the failure budget turned off, the next client gets
// it (airlock's semaphore would stay blocked until someone edits etcd);
// with the default budget of one failure, the lost client halts the
// rollout: no client gets a slot until an operator resumes.
func TestSlotExpires(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxFailures int
		wantKind    string
	}{
		{"failure budget off: the place is freed", 0, ""},
		{"default failure budget: the rollout halts", 1, KindHalted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cl, _ := setup(t, func(s *Server) {
				s.SlotTTL = 2 * time.Second
				s.Config.Rollout.MaxFailures = config.Count(tc.maxFailures)
			})
			want(t, "a", cl.preReboot("a", "default"), 200, "")
			want(t, "b while a holds", cl.preReboot("b", "default"), 423, KindSemaphoreFull)
			deadline := time.Now().Add(15 * time.Second)
			for {
				r := cl.preReboot("b", "default")
				if r.Status == 200 && tc.wantKind == "" {
					return
				}
				if r.Kind == tc.wantKind && tc.wantKind != "" {
					if !strings.Contains(r.Value, "a (slot_expired") {
						t.Fatalf("halted, but the reason does not name a: %s", r.Value)
					}
					return
				}
				if r.Kind != KindSemaphoreFull || time.Now().After(deadline) {
					t.Fatalf("b: %d %s %s long after a's slot TTL of 2s, want %q", r.Status, r.Kind, r.Value, tc.wantKind)
				}
				time.Sleep(250 * time.Millisecond)
			}
		})
	}
}

// A 200 to the holder's pre-reboot always means a whole TTL ahead: while
// the slot is younger than its TTL it is renewed; once older it is
// admitted again through every rule (a new lease, a whole TTL) or refused,
// and then freed: the client asks, so it did not reboot.
func TestRenewBounded(t *testing.T) {
	var offset time.Duration
	s, cl, c := setup(t, func(s *Server) {
		s.SlotTTL = 6 * time.Second
		s.Now = func() time.Time { return time.Now().Add(offset) }
	})
	ctx := context.Background()
	key := slot.Key(s.Config.Namespace(), "a")
	lease := func() (clientv3.LeaseID, int64) {
		t.Helper()
		got, err := c.Get(ctx, key)
		if err != nil || len(got.Kvs) != 1 {
			t.Fatalf("slot %s: %v %v", key, got, err)
		}
		ttl, err := c.TimeToLive(ctx, clientv3.LeaseID(got.Kvs[0].Lease))
		if err != nil {
			t.Fatal(err)
		}
		return clientv3.LeaseID(got.Kvs[0].Lease), ttl.TTL
	}
	want(t, "a", cl.preReboot("a", "default"), 200, "")
	first, _ := lease()
	time.Sleep(2 * time.Second)
	// The answering server's clock is minutes ahead: the slot's age is
	// etcd's (FreshKey's lease), so it is still renewed, not re-admitted.
	offset = 5 * time.Minute
	want(t, "re-send while young, the server's clock ahead", cl.preReboot("a", "default"), 200, "")
	if l, r := lease(); l != first || r < 5 {
		t.Fatalf("after a re-send 2 s into a 6 s slot: lease %x (was %x), %d s left: want it renewed", l, first, r)
	}
	time.Sleep(5 * time.Second) // older than its TTL by etcd's clock
	want(t, "re-send when old: re-admitted", cl.preReboot("a", "default"), 200, "")
	second, r := lease()
	if second == first || r < 5 {
		t.Fatalf("after a re-admission: lease %x (was %x), %d s left: a 200 means a whole TTL ahead, on a new lease", second, first, r)
	}
	if _, err := c.Put(ctx, slot.PauseKey(s.Config.Namespace()), `{"reason":"freeze","by":"op"}`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(6500 * time.Millisecond)
	want(t, "re-send when old, paused", cl.preReboot("a", "default"), 423, KindPaused)
	if got, err := c.Get(ctx, key); err != nil || len(got.Kvs) != 0 {
		t.Fatalf("the refused holder's old slot is still there: %v %v", got.Kvs, err)
	}
}

// Two servers on one etcd give the same answers: all state is in etcd.
func TestTwoServers(t *testing.T) {
	s, one, _ := setup(t, nil)
	hs := httptest.NewServer(&Server{Client: s.Client, Config: s.Config, SeatTimeout: time.Second, Log: s.Log})
	defer hs.Close()
	two := newTestClient(t, hs.URL, "zincati")
	want(t, "a via one", one.preReboot("a", "default"), 200, "")
	if r := two.preReboot("a", "default"); r.Status != 200 || r.Result != AlreadyHeld {
		t.Fatalf("a via two: %d %q, want already_held", r.Status, r.Result)
	}
	want(t, "b via two", two.preReboot("b", "default"), 423, KindSemaphoreFull)
	want(t, "a unlocks via two", two.steadyState("a", "default"), 200, "")
	want(t, "b via one", one.preReboot("b", "default"), 200, "")
}

// With client certificates, the certificate names the only id a client may
// ask for: its common name (or, with IdentityDNS, one of its DNS names).
func TestClientIdentity(t *testing.T) {
	req := func(cn string, dns ...string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, PathPreReboot, nil)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Subject: pkix.Name{CommonName: cn}, DNSNames: dns}}}
		return r
	}
	for _, tc := range []struct {
		name, identity string
		r              *http.Request
		id             string
		ok             bool
	}{
		{"cn matches", IdentityCN, req("node-1"), "node-1", true},
		{"cn differs: another client's slot", IdentityCN, req("node-1"), "node-2", false},
		{"no certificate", IdentityCN, httptest.NewRequest(http.MethodPost, PathPreReboot, nil), "node-1", false},
		{"a DNS name matches", IdentityDNS, req("x", "node-1.example", "node-1"), "node-1", true},
		{"no DNS name matches", IdentityDNS, req("node-1", "node-1.example"), "node-1", false},
		{"not checked", IdentityNone, req("node-1"), "node-2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{ClientIdentity: tc.identity}
			err := s.identity(tc.r, tc.id)
			if (err == nil) != tc.ok {
				t.Fatalf("identity = %v, want ok %v", err, tc.ok)
			}
			if err != nil && (err.Status != http.StatusForbidden || err.Kind != KindIDMismatch) {
				t.Fatalf("refusal %d %s, want 403 %s", err.Status, err.Kind, KindIDMismatch)
			}
		})
	}
}
