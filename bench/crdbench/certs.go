package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certFiles are a throw-away CA and the certificates of a TLS run of the
// 3-member etcd (make bench-scale): the members' server certificate and the
// nodes' one client certificate, ECDSA P-256 as etcd's own guide makes them.
type certFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// makeCerts writes a CA, a server certificate for 127.0.0.1 and a client
// certificate into dir.
func makeCerts(dir string) (certFiles, error) {
	f := certFiles{CA: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "crdbench CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return f, err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certPath, keyPath string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		t := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, t, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyPath, "EC PRIVATE KEY", kder)
	}
	if err := leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, f.ServerCert, f.ServerKey); err != nil {
		return f, err
	}
	return f, leaf(3, "crdbench-node", x509.ExtKeyUsageClientAuth, f.ClientCert, f.ClientKey)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

// clientTLS is the bench's own client configuration for a TLS run.
func (f certFiles) clientTLS() (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
