package sources

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"
)

// NormalizeServer checks that s is an absolute http(s) URL with a host and
// returns it without trailing slashes, the form Argo CD stores. Nothing else
// is changed: Argo CD compares servers as strings, so case and port stay as
// the upstream wrote them.
func NormalizeServer(s string) (string, error) {
	// Errors never quote the URL: a malformed one may carry user info.
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("invalid server url: %w", err)
	}
	if u.User != nil {
		return "", fmt.Errorf("server url must not carry user info")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", fmt.Errorf("server url scheme must be https or http")
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("server url has no host")
	}
	if strings.ContainsAny(s, "?#") || u.Opaque != "" {
		return "", fmt.Errorf("server url must not have a query or fragment")
	}
	if strings.ContainsFunc(s, unicode.IsSpace) { // "https://h/ /" would keep a space
		return "", fmt.Errorf("server url must not contain whitespace")
	}
	return s, nil
}

// ServerKey is the form of a server URL that two spellings of one API
// server share: scheme and host in lower case, no trailing dot on the
// host, no default port, no leading zeros in the port, no trailing slash. Clusters whose servers have one
// key are one server (dedupe, and the clash with a foreign Secret). A
// query (an agent's resource proxy, ?agentName=<agent>) is part of the key:
// every agent of a principal shares its host.
func ServerKey(s string) string {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return strings.ToLower(s)
	}
	host, port := strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), u.Port()
	if n, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(n) // Go dials "0443" as 443
	}
	scheme := strings.ToLower(u.Scheme)
	if port == "443" && scheme == "https" || port == "80" && scheme == "http" {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	key := scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/")
	if u.RawQuery != "" {
		key += "?" + u.RawQuery
	}
	return key
}
