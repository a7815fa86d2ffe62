// Package testca makes CA certificates of the kind clusters have (RSA 2048,
// self-signed), in the forms the sources receive them, for tests and
// cmd/loadgen. Nothing the service runs imports it.
package testca

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// Signer makes CA certificates with one RSA 2048 key: generating a key per
// certificate would take minutes for 10,000 of them. Safe for concurrent
// use.
type Signer struct{ key *rsa.PrivateKey }

// NewSigner generates the key.
func NewSigner() (*Signer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return &Signer{key: key}, nil
}

// DER returns the DER of a self-signed CA certificate with this serial and
// a subject naming it, valid from an hour ago for a day.
func (s *Signer) DER(serial int64) ([]byte, error) {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: fmt.Sprintf("kubernetes-ca-%d", serial)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &s.key.PublicKey, s.key)
	if err != nil {
		return nil, fmt.Errorf("create certificate: %w", err)
	}
	return der, nil
}

// CAData is the base64 of der's PEM: the form caData takes.
func CAData(der []byte) string {
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
