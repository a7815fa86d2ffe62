package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

var invalidDNSNameChars = regexp.MustCompile(`[^-a-z0-9.]`)

// NormalizedName is Argo CD's utils.SanitizeName of name, what its cluster
// generator gives as nameNormalized and what Application names are made
// of: lower case, every character other than [-a-z0-9.] replaced by '-',
// at most 253 characters, leading and trailing '-' and '.' trimmed. Two
// clusters whose names normalize alike would make one Application name.
func NormalizedName(name string) string {
	name = strings.ToLower(name)
	if strings.ContainsFunc(name, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '.' }) {
		name = invalidDNSNameChars.ReplaceAllString(name, "-")
	}
	if len(name) > 253 {
		name = name[:253]
	}
	return strings.Trim(name, "-.")
}

// HashedName is a deterministic, DNS-safe Kubernetes object name, unique
// per identity: readable lower-cased, every other character replaced by
// '-', cut to fit 253 characters, then a short hash of identity. Two
// identities never share a name through the readable part ("aws"+"prod-eu"
// and "aws-prod"+"eu" differ in the hash), and the name does not change
// when only the readable part would (a cluster renamed keeps its object).
func HashedName(readable, identity string) string {
	name := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(readable), "-"), "-")
	sum := sha256.Sum256([]byte(identity))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	const maxLen = 253
	if len(name) > maxLen-len(suffix) {
		name = strings.TrimRight(name[:maxLen-len(suffix)], "-")
	}
	return name + suffix
}
