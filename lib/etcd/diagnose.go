package etcd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// diagnose finds out why etcd did not answer. gRPC only says "deadline
// exceeded" while it keeps retrying, so each endpoint is dialled once by
// hand: TCP, then the TLS handshake, then a short read that catches a server
// rejecting our client certificate (TLS 1.3 reports that after the
// handshake). It returns nil when every endpoint looks fine at this level.
func diagnose(endpoints []string, conf *tls.Config, timeout time.Duration) error {
	var errs []string
	for _, ep := range endpoints {
		if err := probe(ep, conf, timeout); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", ep, err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}

func probe(endpoint string, conf *tls.Config, timeout time.Duration) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return fmt.Errorf("not a URL such as https://etcd-1:2379")
	}
	conn, err := net.DialTimeout("tcp", u.Host, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	if u.Scheme != "https" || conf == nil {
		return nil
	}
	c := conf.Clone()
	c.ServerName = u.Hostname()
	c.NextProtos = []string{"h2"}
	tc := tls.Client(conn, c)
	_ = tc.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	_ = tc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := tc.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && strings.Contains(err.Error(), "tls") {
		return fmt.Errorf("TLS: server refused the client certificate: %w", err)
	}
	return nil
}
