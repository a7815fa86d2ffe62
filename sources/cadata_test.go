package sources_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// newCert returns a fresh self-signed ECDSA CA certificate as PEM and DER,
// and its key.
func newCert(t *testing.T, cn string) (pemData, der []byte, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), der, key
}

func TestValidatePEMAndCAData(t *testing.T) {
	cert1, der1, key1 := newCert(t, "ca-one")
	cert2, _, _ := newCert(t, "ca-two")
	ecKey, err := x509.MarshalECPrivateKey(key1)
	require.NoError(t, err)
	pkcs8Key, err := x509.MarshalPKCS8PrivateKey(key1)
	require.NoError(t, err)
	ecKeyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecKey})
	pkcs8PEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8Key})
	corruptPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("definitely not DER")})
	truncatedPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der1[:len(der1)/2]})
	join := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}

	tests := []struct {
		name    string
		pem     []byte
		wantErr string
	}{
		{name: "one certificate", pem: cert1},
		{name: "two certificates", pem: join(cert1, cert2)},
		{name: "same certificate twice", pem: join(cert1, cert1)},

		{name: "empty", pem: nil, wantErr: "no PEM certificate found"},
		{name: "not PEM", pem: []byte("hello, world\n"), wantErr: "no PEM certificate found"},
		{name: "DER without PEM armour", pem: der1, wantErr: "no PEM certificate found"},
		{name: "EC private key", pem: ecKeyPEM, wantErr: `pem block 1 is "EC PRIVATE KEY", not CERTIFICATE`},
		{name: "PKCS8 private key", pem: pkcs8PEM, wantErr: `pem block 1 is "PRIVATE KEY", not CERTIFICATE`},
		{name: "certificate then private key", pem: join(cert1, ecKeyPEM), wantErr: `pem block 2 is "EC PRIVATE KEY"`},
		{name: "corrupt certificate", pem: corruptPEM, wantErr: "pem block 1:"},
		{name: "truncated certificate", pem: truncatedPEM, wantErr: "pem block 1:"},
		{name: "good then corrupt certificate", pem: join(cert1, cert2, corruptPEM), wantErr: "pem block 3:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pemErr := sources.ValidatePEM(tt.pem)
			caErr := sources.ValidateCAData(base64.StdEncoding.EncodeToString(tt.pem))
			if tt.wantErr == "" {
				assert.NoError(t, pemErr)
				assert.NoError(t, caErr)
				return
			}
			require.Error(t, pemErr)
			assert.Contains(t, pemErr.Error(), tt.wantErr)
			require.Error(t, caErr, "caData must fail the same way")
			assert.Contains(t, caErr.Error(), tt.wantErr)
		})
	}
}

func TestValidateCADataEncoding(t *testing.T) {
	cert, _, _ := newCert(t, "ca")
	tests := []struct {
		name    string
		caData  string
		wantErr string
	}{
		{name: "standard base64 of PEM", caData: base64.StdEncoding.EncodeToString(cert)},
		{name: "empty", caData: "", wantErr: "no PEM certificate found"},
		{name: "raw PEM, not base64", caData: string(cert), wantErr: "not base64"},
		{name: "garbage", caData: "not base64 at all!", wantErr: "not base64"},
		{name: "truncated base64", caData: base64.StdEncoding.EncodeToString(cert)[:21], wantErr: "not base64"},
		{name: "base64 of text", caData: base64.StdEncoding.EncodeToString([]byte("just some text")), wantErr: "no PEM certificate found"},
		{name: "double base64", caData: base64.StdEncoding.EncodeToString([]byte(base64.StdEncoding.EncodeToString(cert))), wantErr: "no PEM certificate found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sources.ValidateCAData(tt.caData)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
