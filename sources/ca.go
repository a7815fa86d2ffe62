package sources

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"unique"
)

// ValidatePEM checks that pemData holds at least one certificate and only
// certificates that parse. It exists because several upstream clients
// accept a broken CA bundle silently.
func ValidatePEM(pemData []byte) error {
	n := 0
	rest := pemData
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("pem block %d is %q, not CERTIFICATE", n+1, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("pem block %d: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no PEM certificate found")
	}
	return nil
}

// ValidateCAData checks that caData is standard base64 of a PEM bundle, the
// form of caData in an Argo CD cluster Secret.
func ValidateCAData(caData string) error {
	_, err := ParseCAData(caData)
	return err
}

// CA is the CA bundle of a cluster's API server, immutable and held
// compactly: the DER bytes of its certificates when the bundle is canonical
// (only CERTIFICATE blocks without headers, as pem.Encode writes them: 64
// columns, a newline after each line, nothing between or around them, and
// its base64 canonical too), else its PEM bytes as given, else (base64
// that does not encode back to itself, e.g. with line breaks) the base64
// text as given. Either way PEM and Data give back exactly what it was
// made from. A self-signed RSA 2048 CA takes ~0.75 KiB instead of the
// ~1.4 KiB of its base64 (768 bytes of heap instead of 1,536).
//
// The zero CA is no CA: the server presents a publicly trusted
// certificate. CAs are compared with ==: two CAs made from the same bundle
// are equal.
type CA struct {
	// h holds, when the CA is not empty, a form byte (caDER, caPEM,
	// caBase64) followed by the bundle in that form. A handle, not the
	// string: every CA of one bundle in the process shares one copy (see
	// interned), and a handle is comparable and as cheap to copy.
	h unique.Handle[string]
}

// v is the CA's form byte and bundle, empty for no CA.
func (ca CA) v() string {
	if ca.h == (unique.Handle[string]{}) {
		return ""
	}
	return ca.h.Value()
}

// The forms of a CA.
const (
	// caDER is each certificate's DER bytes, preceded by their length (an
	// unsigned varint).
	caDER = 'd'
	// caPEM is the PEM bytes as given.
	caPEM = 'p'
	// caBase64 is the base64 text as given.
	caBase64 = 'b'
)

// ParseCAData returns the CA of caData, standard base64 of a PEM bundle
// (the form of caData in an Argo CD cluster Secret, of EKS's
// certificateAuthority.data and of a kubeconfig's
// certificate-authority-data). It fails as ValidateCAData does: on
// anything but base64 of one or more certificates that parse.
func ParseCAData(caData string) (CA, error) {
	raw, err := base64.StdEncoding.DecodeString(caData)
	if err != nil {
		return CA{}, fmt.Errorf("not base64: %w", err)
	}
	if err := ValidatePEM(raw); err != nil {
		return CA{}, err
	}
	return newCA(caData, raw), nil
}

// ParsePEMCA returns the CA of a PEM bundle; it fails as ValidatePEM does.
func ParsePEMCA(pemData []byte) (CA, error) {
	if err := ValidatePEM(pemData); err != nil {
		return CA{}, err
	}
	return newCA("", pemData), nil
}

// CAFromData returns the CA of caData without validating it: what is not
// base64 of a PEM bundle is held as given. It is for fixtures and data
// validated elsewhere; upstream data goes through ParseCAData.
func CAFromData(caData string) CA {
	if caData == "" {
		return CA{}
	}
	raw, err := base64.StdEncoding.DecodeString(caData)
	if err != nil {
		return interned(string(caBase64) + caData)
	}
	return newCA(caData, raw)
}

// newCA returns the CA of the PEM bundle raw, in its most compact form that
// gives back raw and, when caData is not empty, caData, the base64 text raw
// was decoded from.
func newCA(caData string, raw []byte) CA {
	if len(raw) == 0 && caData == "" {
		return CA{}
	}
	if caData != "" && base64.StdEncoding.EncodeToString(raw) != caData {
		return interned(string(caBase64) + caData)
	}
	if der, ok := canonicalDER(raw); ok {
		return interned(string(der))
	}
	return interned(string(caPEM) + string(raw))
}

// interned returns the CA of v, sharing its bytes with every other CA of
// the same bundle in the process: a fleet's CA is held by the leader's
// listing and by the ledger view every replica answers from (decoded from
// the informer), and at 10,000 distinct CAs each copy costs ~12 MiB.
func interned(v string) CA { return CA{h: unique.Make(v)} }

// canonicalDER returns the caDER form of raw when raw is one or more
// CERTIFICATE blocks exactly as pem.Encode writes them, and nothing else.
func canonicalDER(raw []byte) ([]byte, bool) {
	out := make([]byte, 1, 1+len(raw)*3/4)
	out[0] = caDER
	rest := raw
	for len(rest) > 0 {
		block, next := pem.Decode(rest)
		if block == nil || block.Type != "CERTIFICATE" || len(block.Headers) > 0 {
			return nil, false
		}
		// pem.Decode skips text before a block and accepts other line
		// lengths and line ends: the block must be all of what it read, as
		// pem.Encode writes it.
		if !bytes.Equal(rest[:len(rest)-len(next)], appendPEM(nil, block.Bytes)) {
			return nil, false
		}
		out = binary.AppendUvarint(out, uint64(len(block.Bytes)))
		out = append(out, block.Bytes...)
		rest = next
	}
	return out, len(out) > 1
}

const (
	pemBegin = "-----BEGIN CERTIFICATE-----\n"
	pemEnd   = "-----END CERTIFICATE-----\n"
)

// pemLen is the length of the PEM block pem.Encode writes for a
// certificate of n DER bytes.
func pemLen(n int) int {
	b := base64.StdEncoding.EncodedLen(n)
	return len(pemBegin) + b + (b+63)/64 + len(pemEnd)
}

// appendPEM appends the CERTIFICATE block of der to b, as pem.Encode
// writes it.
func appendPEM(b, der []byte) []byte {
	b = append(b, pemBegin...)
	for len(der) > 0 {
		line := der[:min(len(der), 48)] // 48 bytes: 64 columns of base64
		b = base64.StdEncoding.AppendEncode(b, line)
		b = append(b, '\n')
		der = der[len(line):]
	}
	return append(b, pemEnd...)
}

// eachDER calls f with the DER bytes of each certificate of the caDER
// form v (without its form byte).
func eachDER(v string, f func(der string)) {
	for len(v) > 0 {
		n, k := binary.Uvarint([]byte(v[:min(len(v), binary.MaxVarintLen64)]))
		f(v[k : k+int(n)])
		v = v[k+int(n):]
	}
}

// IsZero reports whether ca is no CA.
func (ca CA) IsZero() bool { return ca.v() == "" }

// PEM returns the PEM bundle, a new slice each call; nil for no CA, or for
// a CA made by CAFromData from text that is not base64.
func (ca CA) PEM() []byte {
	if ca.v() == "" {
		return nil
	}
	body := ca.v()[1:]
	switch ca.v()[0] {
	case caDER:
		size := 0
		eachDER(body, func(der string) { size += pemLen(len(der)) })
		out := make([]byte, 0, size)
		eachDER(body, func(der string) { out = appendPEM(out, []byte(der)) })
		return out
	case caPEM:
		return []byte(body)
	default: // caBase64
		raw, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return nil
		}
		return raw
	}
}

// Data returns the bundle as standard base64 of its PEM, the form of
// caData in an Argo CD cluster Secret; empty for no CA. It is the text the
// CA was made from, byte for byte.
func (ca CA) Data() string {
	if ca.v() == "" {
		return ""
	}
	if ca.v()[0] == caBase64 {
		return ca.v()[1:]
	}
	return base64.StdEncoding.EncodeToString(ca.PEM())
}

// String returns Data.
func (ca CA) String() string { return ca.Data() }

// MarshalJSON encodes the CA as the JSON string of Data, as a caData
// string field was encoded.
func (ca CA) MarshalJSON() ([]byte, error) { return json.Marshal(ca.Data()) }

// UnmarshalJSON decodes a JSON string as CAFromData does; null or an empty
// string is no CA.
func (ca *CA) UnmarshalJSON(b []byte) error {
	var s *string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s == nil {
		*ca = CA{}
		return nil
	}
	*ca = CAFromData(*s)
	return nil
}
