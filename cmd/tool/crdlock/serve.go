package crdlock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/fleetlock"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// DefaultFleetLockListen is where `crd-lock serve fleetlock` listens unless
// told otherwise: loopback (a reverse proxy or --listen opens it up), on
// the port airlock uses, so a Zincati configuration can move over unchanged.
const DefaultFleetLockListen = "127.0.0.1:3333"

// ServeResult is the JSON line of crd-lock serve fleetlock, written when it
// stops.
type ServeResult struct {
	base
	Service string `json:"service"`
	Listen  string `json:"listen,omitempty"`
	TLS     bool   `json:"tls"`
	// ClientCerts says client certificates were required (--tls-client-ca).
	ClientCerts bool `json:"client_certs,omitempty"`
	// Stopped says why the server ended: signal.
	Stopped string `json:"stopped,omitempty"`
}

// Text renders the result for humans.
func (r *ServeResult) Text(w io.Writer) error {
	report.Line(w, "service", r.Service)
	report.Line(w, "listen", r.Listen)
	report.Line(w, "result", r.ExitName)
	if r.Error != "" {
		report.Line(w, "error", r.Error)
	}
	return nil
}

// runServe is `crd-lock serve fleetlock`: a FleetLock server (lib/fleetlock)
// for Fedora CoreOS and Flatcar nodes, on this configuration's lock, until
// SIGINT or SIGTERM.
func runServe(ctx context.Context, o *serveOpts, args []string, stdout, stderr io.Writer) error {
	res := &ServeResult{base: base{Header: report.Header{Tool: tool}, Subcommand: "serve"}}
	format := report.JSON
	finish := func(err error) error { return finishResult(stdout, format, res, err) }
	// Shared flags may come before the service's name too
	// (`crd-lock --config C serve fleetlock` is `serve --config C fleetlock`).
	if shared, after := cli.SplitShared(args); len(shared) > 0 && len(after) > 0 && after[0] == "fleetlock" {
		args = append([]string{"fleetlock"}, append(shared, after[1:]...)...)
	}
	rest := args
	switch {
	case len(args) > 0 && args[0] == "fleetlock":
		rest = args[1:]
	case len(args) > 0 && helpOrVersion(args[0]):
		// `crd-lock serve --help`: the help of its only service.
	default:
		return finish(exitcode.Errorf(exitcode.Config, "crd-lock: serve: name the service: crd-lock serve fleetlock [flags] (the only one; see man crd-lock)"))
	}
	res.Service = "fleetlock"
	fs, f := o.fs, &o.f
	listen, certFile, keyFile, clientCA, defaultGroup, seatTimeout := o.listen, o.certFile, o.keyFile, o.clientCA, o.defaultGroup, o.seatTimeout
	clientID, ticketTTL := o.clientID, o.ticketTTL
	cfg, key, err := f.setup(fs, rest, stdout, &format, "serve fleetlock")
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	res.Node, res.Key = cfg.NodeName, key
	if err != nil {
		return finish(err)
	}
	if *defaultGroup != "" && fleetlock.CheckGroup(*defaultGroup) != nil {
		return finish(exitcode.Errorf(exitcode.Config, "crd-lock: serve fleetlock: --default-group %q: use 1 to 63 letters, digits, '.' or '-'", *defaultGroup))
	}
	if *seatTimeout <= 0 {
		return finish(exitcode.Errorf(exitcode.Config, "crd-lock: serve fleetlock: --seat-timeout %s must be positive", *seatTimeout))
	}
	if *ticketTTL < 2*time.Second {
		return finish(exitcode.Errorf(exitcode.Config, "crd-lock: serve fleetlock: --ticket-ttl %s must be at least 2s (an etcd lease)", *ticketTTL))
	}
	switch *clientID {
	case fleetlock.IdentityCN, fleetlock.IdentityDNS, fleetlock.IdentityNone:
	default:
		return finish(exitcode.Errorf(exitcode.Config, "crd-lock: serve fleetlock: --tls-client-id %q: use cn, dns or none", *clientID))
	}
	tlsConf, err := serverTLS(*certFile, *keyFile, *clientCA)
	if err != nil {
		return finish(err)
	}
	res.TLS, res.ClientCerts = tlsConf != nil, *clientCA != ""
	logger, err := f.common.Logger(stderr, tool)
	if err != nil {
		return finish(err)
	}
	client, err := f.connect(ctx, cfg)
	if err != nil {
		return finish(err)
	}
	defer client.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return finish(exitcode.Errorf(exitcode.Config, "crd-lock: serve fleetlock: cannot listen on --listen %s: %v; choose a free host:port", *listen, err))
	}
	res.Listen = ln.Addr().String()
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	} else if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		logger.Warn("serving plain HTTP beyond loopback: anyone who reaches this port can take and free reboot slots; give --tls-cert/--tls-key (and --tls-client-ca) or put a TLS reverse proxy in front", "listen", res.Listen)
	}
	s := &fleetlock.Server{Client: client, Config: cfg, DefaultGroupMapsTo: *defaultGroup, SeatTimeout: *seatTimeout, TicketTTL: *ticketTTL, Log: logger}
	if *clientCA != "" {
		// With client certificates, a client takes and frees only its own
		// slot: the certificate names the id it may ask for.
		s.ClientIdentity = *clientID
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: *seatTimeout + 60*time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("serving FleetLock", "listen", res.Listen, "tls", res.TLS, "client_certs", res.ClientCerts,
		"lock", cfg.LockKey, "max_holders", cfg.MaxHolders, "reboot_slot_ttl_sec", cfg.RebootSlotTTLSec, "default_group", *defaultGroup)
	var serveErr error
	select {
	case <-ctx.Done():
		res.Stopped = "signal"
	case serveErr = <-served:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if serveErr == nil {
		serveErr = <-served
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return finish(exitcode.Errorf(exitcode.Internal, "crd-lock: serve fleetlock: server on %s failed: %v", res.Listen, serveErr))
	}
	logger.Info("FleetLock server stopped", "why", res.Stopped)
	return finish(nil)
}

// serverTLS is the server's TLS configuration (nil: plain HTTP).
func serverTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, exitcode.Errorf(exitcode.Config, "crd-lock: serve fleetlock: give --tls-cert and --tls-key together")
	}
	if certFile == "" {
		if clientCA != "" {
			return nil, exitcode.Errorf(exitcode.Config, "crd-lock: serve fleetlock: --tls-client-ca needs --tls-cert and --tls-key: client certificates are checked over TLS only")
		}
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, exitcode.Errorf(exitcode.Config, "crd-lock: serve fleetlock: --tls-cert %s / --tls-key %s: %v", certFile, keyFile, err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, exitcode.Errorf(exitcode.Config, "crd-lock: serve fleetlock: --tls-client-ca: %v", exitcode.PathCause(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, exitcode.Errorf(exitcode.Config, "crd-lock: serve fleetlock: --tls-client-ca %s holds no PEM certificate", clientCA)
		}
		conf.ClientCAs, conf.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// helpOrVersion reports whether arg asks for the help or the version.
func helpOrVersion(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "-V", "-version", "--version":
		return true
	}
	return false
}
