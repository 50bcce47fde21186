// Package etcd is the one way every clusterrebootd tool and the daemon connect
// to etcd: endpoints, mutual TLS, etcd authentication and the dial timeout
// come from the configuration; the connection is verified before it is
// returned, so an unreachable cluster fails fast with exit code 7 and one line
// naming the endpoints and the class of failure (connection refused, timeout,
// TLS, auth).
//
// Secrets (the password, key material) never reach an error, a log line or
// JSON: the etcd client's own logging is silenced and errors are built from
// the endpoints and the failure class only.
package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Options is what Connect needs, built from the configuration by OptionsFrom.
type Options struct {
	// Endpoints are the etcd client URLs (etcd_endpoints).
	Endpoints []string
	// TLS is etcd_tls: CA, client certificate and key for mutual TLS.
	TLS config.TLS
	// Username and PasswordFile enable etcd authentication.
	Username     string
	PasswordFile string
	// DialTimeout bounds the connection check (etcd_dial_timeout_sec).
	DialTimeout time.Duration
	// Namespace is the key prefix everything the product writes lives under.
	Namespace string
	// Source names the configuration file in error messages.
	Source string
	// OneConnection opens one connection instead of one per endpoint:
	// gRPC's pick_first over the endpoints in random order, the next one
	// tried 250 ms after the last (Happy Eyeballs) or when it fails. For a
	// short-lived step run by every node every interval (publish): with
	// TLS each connection is a handshake etcd pays for, and clientv3's
	// round_robin opens one to every endpoint. A long-lived client (the
	// lock, a held slot) keeps round_robin, which moves requests off a
	// member that stops answering without reconnecting.
	OneConnection bool
}

// oneConnection replaces clientv3's round_robin (set by its resolver, so
// the resolver's service config is disabled) with pick_first over a
// shuffled list, which spreads the nodes over the members.
const oneConnection = `{"loadBalancingConfig": [{"pick_first": {"shuffleAddressList": true}}]}`

// OptionsFrom builds Options from the configuration; source names the file.
func OptionsFrom(cfg config.Config, source string) Options {
	dial := time.Duration(cfg.EtcdDialTimeoutSec) * time.Second
	if dial <= 0 {
		dial = 5 * time.Second
	}
	return Options{
		Endpoints:    cfg.EtcdEndpoints,
		TLS:          cfg.EtcdTLS,
		Username:     cfg.EtcdUsername,
		PasswordFile: cfg.EtcdPasswordFile,
		DialTimeout:  dial,
		Namespace:    Namespace(cfg),
		Source:       source,
	}
}

// Namespace is etcd_namespace or, when that is empty, the directory of
// lock_key plus "/" (lock_key /cluster/clusterrebootd/lock gives
// /cluster/clusterrebootd/). It always ends in "/".
func Namespace(cfg config.Config) string {
	ns := cfg.EtcdNamespace
	if ns == "" {
		ns = path.Dir(strings.TrimSuffix(cfg.LockKey, "/"))
	}
	if !strings.HasSuffix(ns, "/") {
		ns += "/"
	}
	return ns
}

// CheckKey returns a configuration error (exit 2) unless key lies inside the
// namespace: with an etcd role that grants only the namespace, a key outside
// it would fail at run time with "permission denied".
func CheckKey(namespace, key, source string) error {
	if !strings.HasPrefix(key, namespace) || key == namespace {
		return exitcode.Errorf(exitcode.Config, "etcd: lock key %q is outside etcd_namespace %q (%s): move lock_key under the namespace or change etcd_namespace", key, namespace, source)
	}
	return nil
}

// Connect opens a client from the configuration and verifies that the cluster
// answers within etcd_dial_timeout_sec. Errors carry exit code 2 (a local file
// is unusable) or 7 (the cluster cannot be reached or refuses us).
func Connect(ctx context.Context, cfg config.Config, source string) (*clientv3.Client, error) {
	return ConnectOptions(ctx, OptionsFrom(cfg, source))
}

// ConnectOne is Connect with one connection (Options.OneConnection).
func ConnectOne(ctx context.Context, cfg config.Config, source string) (*clientv3.Client, error) {
	o := OptionsFrom(cfg, source)
	o.OneConnection = true
	return ConnectOptions(ctx, o)
}

// ConnectOptions is Connect with explicit options.
func ConnectOptions(ctx context.Context, o Options) (*clientv3.Client, error) {
	if len(o.Endpoints) == 0 {
		return nil, exitcode.Errorf(exitcode.Config, "etcd: etcd_endpoints is empty in %s: list at least one client URL such as https://etcd-1:2379", o.Source)
	}
	cc := clientv3.Config{
		Endpoints:   o.Endpoints,
		DialTimeout: o.DialTimeout,
		Logger:      zap.NewNop(),
		// Keep the connection honest: a silent peer is noticed by gRPC pings.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: o.DialTimeout,
	}
	if o.OneConnection {
		cc.DialOptions = []grpc.DialOption{grpc.WithDisableServiceConfig(), grpc.WithDefaultServiceConfig(oneConnection)}
	}
	tlsConf, err := tlsConfig(o)
	if err != nil {
		return nil, err
	}
	cc.TLS = tlsConf
	if o.Username != "" {
		pw, err := readSecret(o.PasswordFile, "etcd_password_file", o.Source)
		if err != nil {
			return nil, err
		}
		cc.Username, cc.Password = o.Username, pw
	}
	// The caller's deadline (crd-lock hold --timeout) bounds the connection
	// check too: it must not take etcd_dial_timeout_sec when less is left.
	dial := o.DialTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < dial {
		dial = max(time.Until(dl), 10*time.Millisecond)
		cc.DialTimeout = dial
	}
	client, err := clientv3.New(cc)
	if err != nil {
		return nil, Unavailable(o.Endpoints, err)
	}
	vctx, cancel := context.WithTimeout(ctx, dial)
	defer cancel()
	// One key at the namespace's own name: it needs read permission on the
	// namespace (a role granted the prefix has it), so it checks
	// reachability, TLS and auth at once, and costs etcd the same whatever
	// the size of the fleet (a count over the prefix walked every key).
	_, err = client.Get(vctx, o.Namespace, clientv3.WithCountOnly())
	if err != nil {
		client.Close()
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, exitcode.Errorf(exitcode.Interrupted, "etcd: interrupted while connecting to %s", strings.Join(o.Endpoints, ","))
		}
		if ctx.Err() == nil && Classify(err) == ClassTimeout {
			if cause := diagnose(o.Endpoints, tlsConf, dial); cause != nil {
				err = cause
			}
		}
		return nil, Unavailable(o.Endpoints, err)
	}
	return client, nil
}

// tlsConfig builds the client TLS configuration: mutual TLS from etcd_tls, or
// the system roots when an https:// endpoint is used without etcd_tls.
func tlsConfig(o Options) (*tls.Config, error) {
	https := false
	for _, ep := range o.Endpoints {
		if strings.HasPrefix(ep, "https://") {
			https = true
		} else if o.TLS.Enabled {
			return nil, exitcode.Errorf(exitcode.Config, "etcd: endpoint %q is not https:// but etcd_tls.enabled is true in %s: use https:// endpoints", ep, o.Source)
		}
	}
	if !o.TLS.Enabled {
		if https {
			return &tls.Config{MinVersion: tls.VersionTLS12}, nil
		}
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLS.CAFile != "" {
		pem, err := os.ReadFile(o.TLS.CAFile)
		if err != nil {
			return nil, exitcode.Errorf(exitcode.Config, "etcd: etcd_tls.ca_file %s: %v", o.TLS.CAFile, errors.Unwrap(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, exitcode.Errorf(exitcode.Config, "etcd: etcd_tls.ca_file %s holds no PEM certificate", o.TLS.CAFile)
		}
		conf.RootCAs = pool
	}
	if (o.TLS.CertFile == "") != (o.TLS.KeyFile == "") {
		return nil, exitcode.Errorf(exitcode.Config, "etcd: etcd_tls needs both cert_file and key_file (or neither) in %s", o.Source)
	}
	if o.TLS.CertFile != "" {
		if err := checkPrivate(o.TLS.KeyFile, "etcd_tls.key_file"); err != nil {
			return nil, err
		}
		pair, err := tls.LoadX509KeyPair(o.TLS.CertFile, o.TLS.KeyFile)
		if err != nil {
			return nil, exitcode.Errorf(exitcode.Config, "etcd: etcd_tls.cert_file %s / key_file %s: %s", o.TLS.CertFile, o.TLS.KeyFile, sanitizeTLSError(err))
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

// sanitizeTLSError keeps tls.LoadX509KeyPair's reason but never key bytes
// (it does not print them today; this keeps it that way).
func sanitizeTLSError(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "-----BEGIN"); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}

// checkPrivate refuses a secret file that group or others can read or write.
func checkPrivate(file, field string) error {
	st, err := os.Stat(file)
	if err != nil {
		return exitcode.Errorf(exitcode.Config, "etcd: %s %s: %v", field, file, errors.Unwrap(err))
	}
	if st.Mode().Perm()&0o077 != 0 {
		return exitcode.Errorf(exitcode.Config, "etcd: %s %s has mode %04o: group/others must not read it; run chmod 600 %s", field, file, st.Mode().Perm(), file)
	}
	return nil
}

// readSecret reads a password file that only its owner may read; one trailing
// newline is dropped.
func readSecret(file, field, source string) (string, error) {
	if file == "" {
		return "", exitcode.Errorf(exitcode.Config, "etcd: etcd_username is set but %s is empty in %s: name a file holding the password", field, source)
	}
	if err := checkPrivate(file, field); err != nil {
		return "", err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", exitcode.Errorf(exitcode.Config, "etcd: %s %s: %v", field, file, errors.Unwrap(err))
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		// etcd would answer "user name is empty" (exit 7): the problem is here.
		return "", exitcode.Errorf(exitcode.Config, "etcd: %s %s is empty: write the password into it (one line, mode 0600)", field, file)
	}
	return pw, nil
}

// Unavailable wraps an etcd error as exit code 7 with one line naming the
// endpoints and the failure class.
func Unavailable(endpoints []string, err error) error {
	class := Classify(err)
	return exitcode.New(exitcode.EtcdUnavailable, &Error{Endpoints: endpoints, Class: class, Err: err})
}

// Error is an etcd failure with its class; its text names the endpoints, the
// class, the cause and what to check.
type Error struct {
	Endpoints []string
	Class     Class
	Err       error
}

func (e *Error) Error() string {
	cause := oneLine(e.Err)
	if len(e.Endpoints) == 1 {
		// The diagnosis names each endpoint it probed; with one, the
		// prefix already did.
		cause = strings.TrimPrefix(cause, e.Endpoints[0]+": ")
	}
	return fmt.Sprintf("etcd: %s at %s: %s; %s", e.Class, strings.Join(e.Endpoints, ","), cause, e.Class.hint())
}

func (e *Error) Unwrap() error { return e.Err }

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Class is the kind of an etcd failure, as printed in error lines.
type Class string

// The failure classes.
const (
	ClassRefused     Class = "connection refused"
	ClassUnresolved  Class = "name does not resolve"
	ClassTimeout     Class = "timeout"
	ClassTLS         Class = "TLS failure"
	ClassAuth        Class = "authentication failed"
	ClassPermission  Class = "permission denied"
	ClassUnavailable Class = "unavailable"
)

func (c Class) hint() string {
	switch c {
	case ClassRefused:
		return "is etcd running there? check etcd_endpoints"
	case ClassUnresolved:
		return "check the host names in etcd_endpoints and this node's DNS (/etc/resolv.conf, /etc/hosts)"
	case ClassTimeout:
		return "check etcd_endpoints, the network and etcd_dial_timeout_sec"
	case ClassTLS:
		return "check etcd_tls (ca_file, cert_file, key_file) and the https:// endpoints"
	case ClassAuth:
		return "check etcd_username and etcd_password_file"
	case ClassPermission:
		return "the etcd user's role does not cover this key: with per-node roles (packaging/etcd-rbac.sh) a node writes only its own keys, " +
			"and pause, resume, hold and request need the operator's user (--config naming its credentials); see docs/security.md"
	default:
		return "check the etcd cluster's health"
	}
}

// Classify sorts an etcd client error into a Class by its message, which is
// all gRPC gives for connection-level failures.
func Classify(err error) Class {
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "permission denied") && !strings.Contains(msg, "connect:"):
		return ClassPermission
	case strings.Contains(msg, "authentication failed"), strings.Contains(msg, "invalid auth token"),
		strings.Contains(msg, "user name is empty"), strings.Contains(msg, "user name not found"),
		strings.Contains(msg, "authentication is not enabled"):
		return ClassAuth
	case strings.Contains(msg, "x509"), strings.Contains(msg, "tls:"), strings.Contains(msg, "certificate"),
		strings.Contains(msg, "handshake"), strings.Contains(msg, "first record does not look like"):
		return ClassTLS
	case strings.Contains(msg, "connection refused"):
		return ClassRefused
	case strings.Contains(msg, "no such host"), strings.Contains(msg, "produced zero addresses"),
		strings.Contains(msg, "server misbehaving"), strings.Contains(msg, "temporary failure in name resolution"):
		return ClassUnresolved
	case strings.Contains(msg, "deadline exceeded"), strings.Contains(msg, "timeout"), strings.Contains(msg, "i/o timeout"):
		return ClassTimeout
	default:
		return ClassUnavailable
	}
}
