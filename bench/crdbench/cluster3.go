package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
)

// etcdCluster is a 3-member etcd on loopback, as a production etcd runs,
// for the fleet simulation (make bench-scale).
type etcdCluster struct {
	endpoints []string
	// metrics are the members' plain-HTTP /metrics listeners (the client
	// port asks for a client certificate in a TLS run).
	metrics []string
	pids    []int
	cmds    []*exec.Cmd
	// certs is set in a TLS run: https client URLs, client certificates
	// required.
	certs *etcdtest.Certs
}

// startCluster starts members etcd processes in dir and waits until every
// member answers. With certs the client URLs are https:// and every client
// must present a certificate of certs.CA (peers stay plain on loopback).
func startCluster(bin, dir string, members int, certs *etcdtest.Certs) (*etcdCluster, error) {
	type urls struct{ name, client, peer, metrics string }
	var ms []urls
	var initial []string
	for i := range members {
		cp, err := freePort()
		if err != nil {
			return nil, err
		}
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		mp, err := freePort()
		if err != nil {
			return nil, err
		}
		scheme := "http"
		if certs != nil {
			scheme = "https"
		}
		u := urls{fmt.Sprintf("m%d", i), fmt.Sprintf("%s://127.0.0.1:%d", scheme, cp), fmt.Sprintf("http://127.0.0.1:%d", pp), fmt.Sprintf("http://127.0.0.1:%d", mp)}
		ms = append(ms, u)
		initial = append(initial, u.name+"="+u.peer)
	}
	c := &etcdCluster{certs: certs}
	for _, m := range ms {
		md := filepath.Join(dir, m.name)
		if err := os.MkdirAll(md, 0o700); err != nil {
			c.stop()
			return nil, err
		}
		lf, err := os.Create(filepath.Join(md, "etcd.log"))
		if err != nil {
			c.stop()
			return nil, err
		}
		args := []string{"--name", m.name, "--data-dir", filepath.Join(md, "data"),
			"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
			"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
			"--listen-metrics-urls", m.metrics,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "crdbench", "--log-level", "warn"}
		if certs != nil {
			args = append(args, "--cert-file", certs.ServerCert, "--key-file", certs.ServerKey,
				"--trusted-ca-file", certs.CA, "--client-cert-auth")
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = lf, lf
		// Pdeathsig: a benchmark stopped by a signal (its deferred stops
		// never run) leaves no member behind, busy with the fleet's keys.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			lf.Close()
			c.stop()
			return nil, fmt.Errorf("starting etcd member %s: %w", m.name, err)
		}
		go func() { _ = cmd.Wait(); lf.Close() }()
		c.cmds = append(c.cmds, cmd)
		c.pids = append(c.pids, cmd.Process.Pid)
		c.endpoints = append(c.endpoints, m.client)
		c.metrics = append(c.metrics, m.metrics)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, ep := range c.endpoints {
		for {
			cl, err := c.clientOf([]string{ep}, 2*time.Second)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err = cl.Status(ctx, ep)
				cancel()
				cl.Close()
			}
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				c.stop()
				return nil, fmt.Errorf("etcd member %s not ready after 60 s: %w (logs in %s)", ep, err, dir)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return c, nil
}

func (c *etcdCluster) stop() {
	for _, cmd := range c.cmds {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// client is a client of every member.
func (c *etcdCluster) client() (*clientv3.Client, error) {
	return c.clientOf(c.endpoints, 5*time.Second)
}

func (c *etcdCluster) clientOf(endpoints []string, dial time.Duration) (*clientv3.Client, error) {
	cc := clientv3.Config{Endpoints: endpoints, DialTimeout: dial, Logger: zap.NewNop()}
	if c.certs != nil {
		t, err := c.certs.ClientTLS()
		if err != nil {
			return nil, err
		}
		cc.TLS = t
	}
	return clientv3.New(cc)
}

// usage is the members' summed VmRSS (MiB) and CPU time (clock ticks).
func (c *etcdCluster) usage() (rss float64, ticks int64) {
	for _, pid := range c.pids {
		r, _ := rssMiB(pid)
		t, _, _ := cpuTicks(pid)
		rss += r
		ticks += t
	}
	return rss, ticks
}

// served is what the members' /metrics say they served clients, summed.
type served struct {
	// sentBytes is etcd_network_client_grpc_sent_bytes_total: every byte
	// etcd sent to clients (responses, the reads included).
	sentBytes float64
	// requests is grpc_server_msg_received_total: every unary request and
	// every message on a stream (a LeaseKeepAlive, a watch request).
	requests float64
	// applyTxn is, per member, etcd_server_apply_duration_seconds_sum of
	// the write transactions (op "Txn"): the time its serial apply loop
	// spent on them.
	applyTxn []float64
}

func (s served) minus(o served) served {
	d := served{sentBytes: s.sentBytes - o.sentBytes, requests: s.requests - o.requests}
	for i, a := range s.applyTxn {
		if i < len(o.applyTxn) {
			a -= o.applyTxn[i]
		}
		d.applyTxn = append(d.applyTxn, a)
	}
	return d
}

// slowestApply is the largest member's applyTxn, in seconds.
func (s served) slowestApply() float64 {
	m := 0.0
	for _, a := range s.applyTxn {
		m = max(m, a)
	}
	return m
}

// scrape reads every member's /metrics.
func (c *etcdCluster) scrape() (served, error) {
	var sum served
	for _, ep := range c.metrics {
		resp, err := http.Get(ep + "/metrics")
		if err != nil {
			return sum, err
		}
		s, err := parseServed(resp.Body)
		resp.Body.Close()
		if err != nil {
			return sum, fmt.Errorf("%s/metrics: %w", ep, err)
		}
		sum.sentBytes += s.sentBytes
		sum.requests += s.requests
		sum.applyTxn = append(sum.applyTxn, s.applyTxn...)
	}
	return sum, nil
}

// parseServed sums the two counters over their labels in a Prometheus
// text exposition.
func parseServed(r io.Reader) (served, error) {
	var s served
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = line[:i]
			_, rest, _ = strings.Cut(line[strings.LastIndexByte(line, '}'):], " ")
		}
		var dst *float64
		switch name {
		case "etcd_network_client_grpc_sent_bytes_total":
			dst = &s.sentBytes
		case "grpc_server_msg_received_total":
			dst = &s.requests
		case "etcd_server_apply_duration_seconds_sum":
			if !strings.Contains(line, `op="Txn"`) {
				continue
			}
			if s.applyTxn == nil {
				s.applyTxn = []float64{0}
			}
			dst = &s.applyTxn[0]
		default:
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return s, fmt.Errorf("%q: %w", line, err)
		}
		*dst += v
		seen[name] = true
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if !seen["etcd_network_client_grpc_sent_bytes_total"] || !seen["grpc_server_msg_received_total"] {
		return s, fmt.Errorf("no etcd_network_client_grpc_sent_bytes_total or grpc_server_msg_received_total")
	}
	return s, nil
}
