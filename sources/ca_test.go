package sources_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testca"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// rewrap returns the CERTIFICATE block of der with base64 lines of width
// columns instead of pem.Encode's 64.
func rewrap(der []byte, width int) []byte {
	b64 := base64.StdEncoding.EncodeToString(der)
	var b strings.Builder
	b.WriteString("-----BEGIN CERTIFICATE-----\n")
	for len(b64) > 0 {
		n := min(width, len(b64))
		b.WriteString(b64[:n] + "\n")
		b64 = b64[n:]
	}
	b.WriteString("-----END CERTIFICATE-----\n")
	return []byte(b.String())
}

// wrap76 inserts a newline every 76 characters of s, as `base64` does.
func wrap76(s string) string {
	var b strings.Builder
	for len(s) > 76 {
		b.WriteString(s[:76] + "\n")
		s = s[76:]
	}
	b.WriteString(s)
	return b.String()
}

// TestCARoundTrip checks that a CA gives back, byte for byte, the PEM and
// the base64 it was made from, whatever their layout, and that it holds
// canonical bundles as DER.
func TestCARoundTrip(t *testing.T) {
	cert1, der1, _ := newCert(t, "ca-one")
	cert2, _, _ := newCert(t, "ca-two")
	withHeaders := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Comment": "x"}, Bytes: der1})
	b64 := base64.StdEncoding.EncodeToString

	tests := []struct {
		name     string
		pem      []byte
		caData   string // default: b64(pem)
		wantForm byte
	}{
		{name: "one certificate", pem: cert1, wantForm: 'd'},
		{name: "two certificates", pem: append(append([]byte(nil), cert1...), cert2...), wantForm: 'd'},
		{name: "same certificate twice", pem: append(append([]byte(nil), cert1...), cert1...), wantForm: 'd'},
		{name: "CRLF line ends", pem: bytes.ReplaceAll(cert1, []byte("\n"), []byte("\r\n")), wantForm: 'p'},
		{name: "text before the block", pem: append([]byte("subject=CN = ca-one\n"), cert1...), wantForm: 'p'},
		{name: "text between blocks", pem: append(append(append([]byte(nil), cert1...), "# two\n"...), cert2...), wantForm: 'p'},
		{name: "blank line after", pem: append(append([]byte(nil), cert1...), '\n'), wantForm: 'p'},
		{name: "no final newline", pem: bytes.TrimSuffix(cert1, []byte("\n")), wantForm: 'p'},
		{name: "76 columns", pem: rewrap(der1, 76), wantForm: 'p'},
		{name: "headers", pem: withHeaders, wantForm: 'p'},
		{name: "base64 wrapped at 76 columns", pem: cert1, caData: wrap76(b64(cert1)), wantForm: 'b'},
		{name: "base64 with a trailing newline", pem: cert1, caData: b64(cert1) + "\n", wantForm: 'b'},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caData := tt.caData
			if caData == "" {
				caData = b64(tt.pem)
			}
			ca, err := sources.ParseCAData(caData)
			require.NoError(t, err)
			assert.Equal(t, caData, ca.Data(), "base64 as given")
			assert.Equal(t, caData, ca.String())
			assert.Equal(t, string(tt.pem), string(ca.PEM()), "PEM as given")
			form, _ := sources.CAForm(ca)
			assert.Equal(t, string(tt.wantForm), string(form))
			assert.Equal(t, ca, sources.CAFromData(caData), "the same CA, unchecked")
			if tt.caData == "" {
				fromPEM, err := sources.ParsePEMCA(tt.pem)
				require.NoError(t, err)
				assert.Equal(t, ca, fromPEM, "the same CA from PEM")
			}

			// JSON as a caData string field.
			got, err := json.Marshal(struct {
				CA sources.CA `json:"caData,omitzero"`
			}{ca})
			require.NoError(t, err)
			want, err := json.Marshal(struct {
				CAData string `json:"caData,omitempty"`
			}{caData})
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))
			var back struct {
				CA sources.CA `json:"caData"`
			}
			require.NoError(t, json.Unmarshal(got, &back))
			assert.Equal(t, ca, back.CA)
		})
	}
}

// TestCAFromDataKeepsAnything checks that CAFromData, for fixtures, holds
// what it is given, valid or not.
func TestCAFromDataKeepsAnything(t *testing.T) {
	for _, in := range []string{"Q0EtQQ==", "Z29vZA==", "!!", "-----BEGIN CERTIFICATE-----", "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t", "QR=="} {
		ca := sources.CAFromData(in)
		assert.Equal(t, in, ca.Data(), in)
		assert.False(t, ca.IsZero(), in)
		if raw, err := base64.StdEncoding.DecodeString(in); err == nil {
			assert.Equal(t, raw, ca.PEM(), in)
		} else {
			assert.Nil(t, ca.PEM(), in)
		}
	}
	assert.True(t, sources.CAFromData("").IsZero())
	assert.Empty(t, sources.CA{}.Data())
	assert.Nil(t, sources.CA{}.PEM())

	got, err := json.Marshal(struct {
		CA sources.CA `json:"caData,omitzero"`
	}{})
	require.NoError(t, err)
	assert.JSONEq(t, `{}`, string(got), "no CA, no caData")
	var back struct {
		CA sources.CA `json:"caData"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"caData":null}`), &back))
	assert.True(t, back.CA.IsZero())
	require.Error(t, json.Unmarshal([]byte(`{"caData":1}`), &back))
}

// TestParseCADataErrors checks that ParseCAData and ParsePEMCA fail as
// ValidateCAData and ValidatePEM do, with no CA.
func TestParseCADataErrors(t *testing.T) {
	cert, der, _ := newCert(t, "ca")
	corrupt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der[:len(der)/2]})
	for _, caData := range []string{
		"", "!!", "not base64 at all!", string(cert), base64.StdEncoding.EncodeToString(cert)[:21],
		base64.StdEncoding.EncodeToString([]byte("hello")), base64.StdEncoding.EncodeToString(corrupt),
	} {
		ca, err := sources.ParseCAData(caData)
		require.Error(t, err, caData)
		assert.EqualError(t, err, sources.ValidateCAData(caData).Error())
		assert.True(t, ca.IsZero())
		if raw, decErr := base64.StdEncoding.DecodeString(caData); decErr == nil {
			ca, err := sources.ParsePEMCA(raw)
			require.Error(t, err)
			assert.EqualError(t, err, sources.ValidatePEM(raw).Error())
			assert.True(t, ca.IsZero())
		}
	}
}

// TestCASize checks that an RSA 2048 CA is held as its DER bytes, ~75% of
// its base64 (the size class of a ~1.1 KiB string is 1,152 bytes instead
// of 1,536 for ~1.4 KiB of base64).
func TestCASize(t *testing.T) {
	signer, err := testca.NewSigner()
	require.NoError(t, err)
	der, err := signer.DER(1)
	require.NoError(t, err)
	caData := testca.CAData(der)
	ca, err := sources.ParseCAData(caData)
	require.NoError(t, err)
	form, size := sources.CAForm(ca)
	assert.Equal(t, "d", string(form))
	assert.Equal(t, len(der)+3, size, "a form byte, a 2-byte length, the DER")
	assert.Less(t, size*4, len(caData)*3)
	t.Logf("caData %d bytes, held as %d", len(caData), size)
}
