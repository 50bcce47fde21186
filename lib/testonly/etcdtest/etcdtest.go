// Package etcdtest starts throwaway etcd servers on random loopback ports for
// tests: either the real server binary (the truth: a pinned etcd build or
// Debian's etcd-server) or an embedded one (go.etcd.io/etcd/server/v3/embed,
// for speed). It also generates test certificates and sets up etcd
// authentication. Only test and benchmark code (bench/) imports it.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Options say which server to start.
type Options struct {
	// Binary is the path of an etcd server binary; empty starts an embedded
	// server in this process.
	Binary string
	// Dir is the data directory (created; a fresh temp directory is best).
	Dir string
	// TLS, when set, serves https:// and requires client certificates signed by
	// its CA.
	TLS *Certs
	// LogFile receives the binary server's stdout and stderr (default Dir/etcd.log).
	LogFile string
}

// Server is a running single-member etcd.
type Server struct {
	// Endpoint is the client URL, http:// or https:// on 127.0.0.1.
	Endpoint string
	// PID is the server process (0 for an embedded server).
	PID int

	cmd  *exec.Cmd
	emb  *embed.Etcd
	done chan struct{}
	// logFile is the binary's log, read when it fails to start.
	logFile string
}

// Start starts a server and waits until it answers (at most 30 s).
//
// The ports are found free and then bound by etcd, so another process (any
// outgoing connection takes an ephemeral port from the same range) can take
// one in between; seen once in a full test run. A server that could not bind
// is started again on new ports, up to three times.
func Start(o Options) (*Server, error) {
	var err error
	for attempt := 1; ; attempt++ {
		var s *Server
		s, err = start(o)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return s, err
		}
		if rerr := os.RemoveAll(filepath.Join(o.Dir, "data")); rerr != nil {
			return nil, rerr
		}
	}
}

func start(o Options) (*Server, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	clientPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if o.TLS != nil {
		scheme = "https"
	}
	client := fmt.Sprintf("%s://127.0.0.1:%d", scheme, clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	var s *Server
	if o.Binary != "" {
		s, err = startBinary(o, client, peer)
	} else {
		s, err = startEmbedded(o, client, peer)
	}
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(o.TLS, 30*time.Second); err != nil {
		s.Stop()
		if s.logFile != "" {
			if b, rerr := os.ReadFile(s.logFile); rerr == nil && strings.Contains(string(b), "address already in use") {
				return nil, fmt.Errorf("%w: address already in use (etcd's log)", err)
			}
		}
		return nil, err
	}
	return s, nil
}

func startBinary(o Options, client, peer string) (*Server, error) {
	data := filepath.Join(o.Dir, "data")
	args := []string{
		"--name", "crd-test",
		"--data-dir", data,
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "crd-test=" + peer,
		"--initial-cluster-state", "new",
		"--log-level", "warn",
	}
	if o.TLS != nil {
		args = append(args, "--cert-file", o.TLS.ServerCert, "--key-file", o.TLS.ServerKey,
			"--trusted-ca-file", o.TLS.CA, "--client-cert-auth")
	}
	logFile := o.LogFile
	if logFile == "" {
		logFile = filepath.Join(o.Dir, "etcd.log")
	}
	lf, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Binary, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	// Its own process group, so a test killed mid-way does not leave it
	// sharing the terminal's signals; Pdeathsig, so a process stopped by a
	// signal or a test binary's timeout (its deferred stops never run)
	// leaves no etcd behind: a stopped crdbench left its own running for
	// as long as the next benchmark. (The signal follows the thread that
	// started it; no goroutine here locks its thread and exits.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("etcdtest: start %s: %w", o.Binary, err)
	}
	s := &Server{Endpoint: client, PID: cmd.Process.Pid, cmd: cmd, done: make(chan struct{}), logFile: logFile}
	go func() {
		_ = cmd.Wait()
		lf.Close()
		close(s.done)
	}()
	return s, nil
}

func startEmbedded(o Options, client, peer string) (*Server, error) {
	cfg := embed.NewConfig()
	cfg.Name = "crd-test"
	cfg.Dir = filepath.Join(o.Dir, "data")
	cu, _ := url.Parse(client)
	pu, _ := url.Parse(peer)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	if o.TLS != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{
			CertFile: o.TLS.ServerCert, KeyFile: o.TLS.ServerKey,
			TrustedCAFile: o.TLS.CA, ClientCertAuth: true,
		}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, errors.New("etcdtest: embedded etcd not ready after 30s")
	}
	return &Server{Endpoint: client, emb: e}, nil
}

func (s *Server) waitReady(certs *Certs, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	cfg := clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	if certs != nil {
		tc, err := certs.ClientTLS()
		if err != nil {
			return err
		}
		cfg.TLS = tc
	}
	for {
		if s.done != nil {
			select {
			case <-s.done:
				return fmt.Errorf("etcdtest: etcd server exited before it was ready (see its log)")
			default:
			}
		}
		c, err := clientv3.New(cfg)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = c.Get(ctx, "/health-probe")
			cancel()
			c.Close()
			if err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdtest: etcd at %s not ready after %s: %v", s.Endpoint, limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop ends the server (SIGTERM, SIGKILL after 10 s) and waits for it.
func (s *Server) Stop() {
	if s.emb != nil {
		s.emb.Close()
		return
	}
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for
// a server another process binds. It is drawn below the kernel's ephemeral
// range (net.ipv4.ip_local_port_range, 32768-60999 by default): a port in
// that range can be taken between this check and the server's bind by any
// outgoing connection of any process, and in one clean-clone make test an
// etcd member dialling its peers took the port chosen for the third member,
// which then failed to start. A port below the range is taken only by a
// listener that asks for it. No port is returned twice by one process.
func FreePort() (int, error) {
	low := ephemeralLow()
	portsMu.Lock()
	defer portsMu.Unlock()
	if low > 11000 {
		for range 200 {
			p := 10000 + rand.IntN(low-10000)
			if handedOut[p] {
				continue
			}
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				continue // taken
			}
			_ = l.Close()
			handedOut[p] = true
			return p, nil
		}
	}
	// No room below the range (or all taken): the kernel's choice.
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !handedOut[p] {
			handedOut[p] = true
			return p, nil
		}
	}
	return 0, errors.New("etcdtest: no free port on 127.0.0.1")
}

var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1024 {
		return 32768
	}
	return n
}

// Client opens a plain client (no auth) to the server, for test setup.
func (s *Server) Client(certs *Certs) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if certs != nil {
		tc, err := certs.ClientTLS()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	return clientv3.New(cfg)
}

// EnableAuth creates the root user (password rootPassword), a role that may
// read and write only keys under prefix, a user with that role, and turns
// authentication on — the same steps docs/security.md gives as etcdctl
// commands.
func EnableAuth(ctx context.Context, c *clientv3.Client, rootPassword, role, user, password, prefix string) error {
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.RoleAdd(ctx, role); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, role, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := c.UserAdd(ctx, user, password); return err },
		func() error { _, err := c.UserGrantRole(ctx, user, role); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("etcdtest: auth setup step %d: %w", i+1, err)
		}
	}
	return nil
}
