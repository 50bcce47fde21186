package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// servers are the etcd servers a test runs against: always an embedded one,
// and the real binary named by CRD_TEST_ETCD when set.
func servers(t *testing.T) []string {
	binaries := []string{""}
	if b := os.Getenv("CRD_TEST_ETCD"); b != "" {
		binaries = append(binaries, b)
	}
	return binaries
}

func serverName(binary string) string {
	if binary == "" {
		return "embedded"
	}
	return filepath.Base(filepath.Dir(binary)) + "-" + filepath.Base(binary)
}

func start(t *testing.T, binary string, certs *etcdtest.Certs) *etcdtest.Server {
	t.Helper()
	s, err := etcdtest.Start(etcdtest.Options{Binary: binary, Dir: t.TempDir(), TLS: certs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func cfgFor(endpoint string) config.Config {
	cfg := config.Default()
	cfg.EtcdEndpoints = []string{endpoint}
	cfg.EtcdDialTimeoutSec = 2
	return cfg
}

func TestNamespace(t *testing.T) {
	for _, tc := range []struct{ name, ns, key, want string }{
		{"derived from lock_key", "", "/cluster/clusterrebootd/lock", "/cluster/clusterrebootd/"},
		{"explicit", "/prod/crd/", "/prod/crd/lock", "/prod/crd/"},
		{"explicit without slash", "/prod/crd", "/prod/crd/lock", "/prod/crd/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.EtcdNamespace, cfg.LockKey = tc.ns, tc.key
			if got := Namespace(cfg); got != tc.want {
				t.Errorf("Namespace = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want exitcode.Code
	}{{"/a/lock", exitcode.OK}, {"/a/lock/g", exitcode.OK}, {"/b/lock", exitcode.Config}, {"/a/", exitcode.Config}} {
		t.Run(tc.key, func(t *testing.T) {
			if got := exitcode.CodeOf(CheckKey("/a/", tc.key, "x.yaml")); got != tc.want {
				t.Errorf("CheckKey = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want Class
	}{
		{"etcdserver: permission denied", ClassPermission},
		{"etcdserver: authentication failed, invalid user ID or password", ClassAuth},
		{"tls: failed to verify certificate: x509: certificate signed by unknown authority", ClassTLS},
		{`dial tcp 127.0.0.1:1: connect: connection refused`, ClassRefused},
		{"context deadline exceeded", ClassTimeout},
		{"http://etcd-x:2379: dial tcp: lookup etcd-x on 192.0.2.53:53: no such host", ClassUnresolved},
		{"http://etcd-x:2379: dial tcp: lookup etcd-x: Temporary failure in name resolution", ClassUnresolved},
		{"something else", ClassUnavailable},
	} {
		t.Run(string(tc.want), func(t *testing.T) {
			if got := Classify(errors.New(tc.msg)); got != tc.want {
				t.Errorf("Classify(%q) = %q, want %q", tc.msg, got, tc.want)
			}
			if h := tc.want.hint(); h == "" {
				t.Error("empty hint")
			}
		})
	}
}

func TestConnectPlain(t *testing.T) {
	for _, bin := range servers(t) {
		t.Run(serverName(bin), func(t *testing.T) {
			s := start(t, bin, nil)
			c, err := Connect(context.Background(), cfgFor(s.Endpoint), "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
		})
	}
}

// The caller's deadline bounds the connection check (crd-lock hold
// --timeout 3s must not take etcd_dial_timeout_sec): a peer that accepts
// and never answers, a long dial timeout, a short deadline.
func TestConnectHonoursTheCallersDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // silent: never a byte back
		}
	}()
	cfg := cfgFor("http://" + ln.Addr().String())
	cfg.EtcdDialTimeoutSec = 60
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	begin := time.Now()
	_, err = Connect(ctx, cfg, "test.yaml")
	if exitcode.CodeOf(err) != exitcode.EtcdUnavailable {
		t.Fatalf("Connect = %v, want etcd_unavailable (7), not interrupted", err)
	}
	if d := time.Since(begin); d > 30*time.Second {
		t.Errorf("Connect took %s with a 1 s deadline: the 60 s dial timeout was not capped", d)
	}
}

func TestConnectUnreachable(t *testing.T) {
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ep := fmt.Sprintf("http://127.0.0.1:%d", port)
	cfg := cfgFor(ep)
	cfg.EtcdDialTimeoutSec = 1
	begin := time.Now()
	_, err = Connect(context.Background(), cfg, "test.yaml")
	if exitcode.CodeOf(err) != exitcode.EtcdUnavailable {
		t.Fatalf("Connect = %v, want etcd_unavailable", err)
	}
	if !strings.Contains(err.Error(), ep) || !strings.Contains(err.Error(), string(ClassRefused)) {
		t.Errorf("error %q does not name the endpoint and %q", err, ClassRefused)
	}
	if n := strings.Count(err.Error(), ep); n != 1 {
		t.Errorf("error %q names the endpoint %d times; once is enough", err, n)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("Connect took %s with a 1s dial timeout", d)
	}
}

func TestConnectConfigErrors(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose")
	if err := os.WriteFile(loose, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	newline := filepath.Join(dir, "newline")
	if err := os.WriteFile(newline, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		edit       func(*config.Config)
	}{
		{"empty password file", "etcd_password_file " + empty + " is empty: write the password into it", func(c *config.Config) { c.EtcdUsername, c.EtcdPasswordFile = "u", empty }},
		{"password file of one newline", "etcd_password_file " + newline + " is empty", func(c *config.Config) { c.EtcdUsername, c.EtcdPasswordFile = "u", newline }},
		{"no endpoints", "etcd_endpoints is empty", func(c *config.Config) { c.EtcdEndpoints = nil }},
		{"password file readable by others", "chmod 600", func(c *config.Config) { c.EtcdUsername, c.EtcdPasswordFile = "u", loose }},
		{"username without password file", "etcd_password_file is empty", func(c *config.Config) { c.EtcdUsername = "u" }},
		{"missing password file", "no such file", func(c *config.Config) { c.EtcdUsername, c.EtcdPasswordFile = "u", dir+"/none" }},
		{"tls with http endpoint", "is not https://", func(c *config.Config) { c.EtcdTLS.Enabled = true }},
		{"tls key readable by others", "chmod 600", func(c *config.Config) {
			c.EtcdEndpoints = []string{"https://127.0.0.1:1"}
			c.EtcdTLS = config.TLS{Enabled: true, CertFile: loose, KeyFile: loose}
		}},
		{"tls cert without key", "both cert_file and key_file", func(c *config.Config) {
			c.EtcdEndpoints = []string{"https://127.0.0.1:1"}
			c.EtcdTLS = config.TLS{Enabled: true, CertFile: loose}
		}},
		{"tls missing ca", "ca_file", func(c *config.Config) {
			c.EtcdEndpoints = []string{"https://127.0.0.1:1"}
			c.EtcdTLS = config.TLS{Enabled: true, CAFile: dir + "/none"}
		}},
		{"tls ca not pem", "no PEM certificate", func(c *config.Config) {
			c.EtcdEndpoints = []string{"https://127.0.0.1:1"}
			c.EtcdTLS = config.TLS{Enabled: true, CAFile: loose}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cfgFor("http://127.0.0.1:1")
			tc.edit(&cfg)
			_, err := Connect(context.Background(), cfg, "test.yaml")
			if exitcode.CodeOf(err) != exitcode.Config || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Connect = %v, want a config error mentioning %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error leaks the secret: %v", err)
			}
		})
	}
}

func TestConnectTLS(t *testing.T) {
	for _, bin := range servers(t) {
		t.Run(serverName(bin), func(t *testing.T) {
			certs, err := etcdtest.GenerateCerts(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			s := start(t, bin, certs)
			cfg := cfgFor(s.Endpoint)
			cfg.EtcdTLS = config.TLS{Enabled: true, CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
			t.Run("client certificate accepted", func(t *testing.T) {
				c, err := Connect(context.Background(), cfg, "test.yaml")
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
			})
			t.Run("no client certificate refused", func(t *testing.T) {
				nocert := cfg
				nocert.EtcdTLS.CertFile, nocert.EtcdTLS.KeyFile = "", ""
				_, err := Connect(context.Background(), nocert, "test.yaml")
				if exitcode.CodeOf(err) != exitcode.EtcdUnavailable || !strings.Contains(err.Error(), string(ClassTLS)) {
					t.Fatalf("Connect without a client certificate = %v, want a TLS failure", err)
				}
				t.Logf("refused: %v", err)
			})
			t.Run("unknown CA refused", func(t *testing.T) {
				other, err := etcdtest.GenerateCerts(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				bad := cfg
				bad.EtcdTLS.CAFile = other.CA
				_, err = Connect(context.Background(), bad, "test.yaml")
				if exitcode.CodeOf(err) != exitcode.EtcdUnavailable || !strings.Contains(err.Error(), string(ClassTLS)) {
					t.Fatalf("Connect with a foreign CA = %v, want a TLS failure", err)
				}
			})
		})
	}
}

func TestConnectAuth(t *testing.T) {
	for _, bin := range servers(t) {
		t.Run(serverName(bin), func(t *testing.T) {
			s := start(t, bin, nil)
			admin, err := s.Client(nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			err = etcdtest.EnableAuth(ctx, admin, "rootpw", "clusterrebootd", "crd", "crdpw", "/cluster/clusterrebootd/")
			admin.Close()
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			pwFile := filepath.Join(dir, "pw")
			if err := os.WriteFile(pwFile, []byte("crdpw\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := cfgFor(s.Endpoint)
			// etcd checks passwords with bcrypt: slow under the race detector.
			cfg.EtcdDialTimeoutSec = 15
			cfg.EtcdUsername, cfg.EtcdPasswordFile = "crd", pwFile
			c, err := Connect(ctx, cfg, "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Put(ctx, "/cluster/clusterrebootd/x", "1"); err != nil {
				t.Errorf("write inside the prefix: %v", err)
			}
			_, err = c.Put(ctx, "/elsewhere/x", "1")
			if err == nil || Classify(err) != ClassPermission {
				t.Errorf("write outside the prefix = %v, want permission denied", err)
			}
			if _, err := c.Get(ctx, "/", clientv3.WithPrefix()); err == nil {
				t.Error("read of the whole keyspace allowed, want permission denied")
			}

			wrong := filepath.Join(dir, "wrong")
			if err := os.WriteFile(wrong, []byte("nope"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg.EtcdPasswordFile = wrong
			_, err = Connect(ctx, cfg, "test.yaml")
			if exitcode.CodeOf(err) != exitcode.EtcdUnavailable || !strings.Contains(err.Error(), string(ClassAuth)) {
				t.Fatalf("Connect with a wrong password = %v, want an auth failure", err)
			}
			if strings.Contains(err.Error(), "nope") {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
}

// proxy forwards loopback connections to target and counts those open.
type proxy struct {
	addr string
	open atomic.Int32
}

func newProxy(t *testing.T, target string, forward bool) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &proxy{addr: "http://" + l.Addr().String()}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { in.Close() })
			if !forward { // a member that accepts and never answers
				continue
			}
			out, err := net.Dial("tcp", strings.TrimPrefix(target, "http://"))
			if err != nil {
				in.Close()
				continue
			}
			p.open.Add(1)
			go func() {
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
				<-done
				in.Close()
				out.Close()
				p.open.Add(-1)
			}()
		}
	}()
	return p
}

func openOn(ps []*proxy) int {
	n := 0
	for _, p := range ps {
		n += int(p.open.Load())
	}
	return n
}

// ConnectOne (the publish step's client) holds one connection where
// Connect holds one per endpoint; with two of three members silent it
// still connects, whichever order the shuffle chose.
func TestConnectOneOpensOneConnection(t *testing.T) {
	s := start(t, "", nil)
	var ps []*proxy
	cfg := cfgFor(s.Endpoint)
	cfg.EtcdEndpoints = nil
	for range 3 {
		p := newProxy(t, s.Endpoint, true)
		ps = append(ps, p)
		cfg.EtcdEndpoints = append(cfg.EtcdEndpoints, p.addr)
	}
	ctx := context.Background()
	all, err := Connect(ctx, cfg, "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 5*time.Second, "Connect: one connection per endpoint (3)", func() bool { return openOn(ps) == 3 })
	all.Close()
	testsupport.Eventually(t, 5*time.Second, "no connection open after Close", func() bool { return openOn(ps) == 0 })

	one, err := ConnectOne(ctx, cfg, "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.Put(ctx, "/cluster/clusterrebootd/x", "1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // past Happy Eyeballs' 250 ms steps: no second connection
	if n := openOn(ps); n != 1 {
		t.Errorf("ConnectOne: connections open = %d, want 1", n)
	}
	one.Close()

	cfg.EtcdEndpoints = []string{newProxy(t, "", false).addr, newProxy(t, "", false).addr, cfg.EtcdEndpoints[0]}
	for i := range 5 {
		c, err := ConnectOne(ctx, cfg, "test.yaml")
		if err != nil {
			t.Fatalf("try %d: two members silent, one up: %v", i, err)
		}
		c.Close()
	}
}
