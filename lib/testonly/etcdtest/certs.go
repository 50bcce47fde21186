package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Certs are the PEM files of a test PKI: a CA, a server certificate for
// 127.0.0.1/localhost and a client certificate, all signed by the CA. Keys are
// written with mode 0600, as lib/etcd demands. CAKey signs more client
// certificates (IssueClientCert).
type Certs struct {
	CA, CAKey             string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// GenerateCerts writes a fresh CA, server and client certificate into dir.
func GenerateCerts(dir string) (*Certs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "clusterrebootd test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	c := &Certs{
		CA: filepath.Join(dir, "ca.pem"), CAKey: filepath.Join(dir, "ca-key.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	if err := writePEM(c.CA, "CERTIFICATE", caDER, 0o644); err != nil {
		return nil, err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(c.CAKey, "EC PRIVATE KEY", caKeyDER, 0o600); err != nil {
		return nil, err
	}
	localhost := []string{"localhost"}
	if err := leaf(caCert, caKey, 2, "etcd-server", localhost, x509.ExtKeyUsageServerAuth, c.ServerCert, c.ServerKey); err != nil {
		return nil, err
	}
	if err := leaf(caCert, caKey, 3, "crd-client", localhost, x509.ExtKeyUsageClientAuth, c.ClientCert, c.ClientKey); err != nil {
		return nil, err
	}
	return c, nil
}

// IssueClientCert writes one more client certificate signed by the CA of c,
// with common name cn and the DNS names dnsNames (none: no DNS name), and
// its key (mode 0600).
func (c *Certs) IssueClientCert(certFile, keyFile, cn string, dnsNames ...string) error {
	caPEM, err := os.ReadFile(c.CA)
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(c.CAKey)
	if err != nil {
		return err
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return errors.New("etcdtest: the CA's certificate or key is not PEM")
	}
	caCert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return err
	}
	caKey, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return err
	}
	return leaf(caCert, caKey, serial.Int64()+4, cn, dnsNames, x509.ExtKeyUsageClientAuth, certFile, keyFile)
}

// leaf writes a certificate for 127.0.0.1 and dnsNames, signed by the CA.
func leaf(caCert *x509.Certificate, caKey *ecdsa.PrivateKey, serial int64, cn string, dnsNames []string, usage x509.ExtKeyUsage, certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writePEM(keyFile, "EC PRIVATE KEY", keyDER, 0o600)
}

func writePEM(file, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

// ClientTLS is a client configuration presenting the client certificate.
func (c *Certs) ClientTLS() (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
	if err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(c.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("etcdtest: no CA certificate")
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
