package sources

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
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
	raw, err := base64.StdEncoding.DecodeString(caData)
	if err != nil {
		return fmt.Errorf("not base64: %w", err)
	}
	return ValidatePEM(raw)
}
