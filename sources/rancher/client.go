package rancher

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/rancher/norman/clientbase"
	"github.com/rancher/norman/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// conn is a norman client for one token and CA: the transport that trusts
// Rancher and the schemas read from /v3. It holds the token, so it is never
// logged or printed.
type conn struct {
	token     string
	caPEM     []byte
	transport http.RoundTripper
	opts      *clientbase.ClientOpts
	types     map[string]types.Schema
}

func (c *conn) close() {
	if t, ok := c.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// connect binds l to the client for token and caPEM: the previous one when
// neither changed, else a new one, bootstrapped with l's context.
func (s *Source) connect(l *listing, token string, caPEM []byte) error {
	if c := s.conn; c != nil {
		if c.token == token && bytes.Equal(c.caPEM, caPEM) {
			l.use(c)
			return nil
		}
		s.log.Info("token or CA changed; rebuilding the rancher client", "token", s.cfg.Token.String())
		c.close()
		s.conn = nil
	}
	c := &conn{
		token: token, caPEM: caPEM, transport: s.transport(caPEM),
		opts: &clientbase.ClientOpts{URL: s.apiURL, TokenKey: token, Timeout: s.timeout},
	}
	l.use(c)
	if err := l.bootstrap(c); err != nil {
		c.close()
		return err
	}
	l.use(c)
	s.conn = c
	return nil
}

// transport is the base transport: system roots, or caFile's bundle, or
// the test client's transport.
func (s *Source) transport(caPEM []byte) http.RoundTripper {
	if s.base != nil {
		return s.base
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	if caPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM) // validated by readCAFile
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return t
}

// listing is the state of one listing: its context and the norman
// operations bound to it.
type listing struct {
	s        *Source
	ctx      context.Context
	ops      *clientbase.APIOperations
	pages    int
	requests int
}

func (s *Source) newListing(ctx context.Context) *listing {
	return &listing{s: s, ctx: ctx}
}

// use binds the listing to c: a shallow copy of the norman operations whose
// HTTP client carries this listing's context.
func (l *listing) use(c *conn) {
	l.ops = &clientbase.APIOperations{
		Opts:   c.opts,
		Types:  c.types,
		Client: &http.Client{Transport: &listingTransport{l: l, base: c.transport}},
	}
}

// bootstrap does what clientbase.NewAPIClient does, with the listing's
// context and origin checks: GET /v3 for the X-Api-Schemas link, then the
// schemas.
func (l *listing) bootstrap(c *conn) error {
	req, err := http.NewRequestWithContext(l.ctx, http.MethodGet, l.s.apiURL, nil)
	if err != nil {
		return &listError{kind: kindSchema, err: fmt.Errorf("get /v3: %w", err)}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	resp, err := l.ops.Client.Do(req)
	if err != nil {
		return l.fail("get /v3", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return l.fail("get /v3", &clientbase.APIError{StatusCode: resp.StatusCode, Status: resp.Status})
	}
	link := resp.Header.Get("X-Api-Schemas")
	if link == "" {
		return &listError{kind: kindSchema, err: errors.New("get /v3: no X-Api-Schemas header: is url a Rancher server?")}
	}
	schemasURL, err := l.onOrigin(link)
	if err != nil {
		return &listError{kind: kindSchema, err: fmt.Errorf("get /v3: X-Api-Schemas: %w", err)}
	}
	var col types.SchemaCollection
	if err := l.ops.DoGet(schemasURL, nil, &col); err != nil {
		return l.fail("get /v3 schemas", err)
	}
	c.types = make(map[string]types.Schema, len(col.Data))
	for _, sc := range col.Data {
		c.types[sc.ID] = sc
	}
	sc, ok := c.types["cluster"]
	collection := sc.Links[clientbase.COLLECTION]
	if !ok || collection == "" || !slices.Contains(sc.CollectionMethods, http.MethodGet) {
		return &listError{kind: kindSchema, err: errors.New("get /v3 schemas: no listable cluster type (may the token list clusters?)")}
	}
	if collection, err = l.onOrigin(collection); err != nil {
		return &listError{kind: kindSchema, err: fmt.Errorf("get /v3 schemas: cluster collection link: %w", err)}
	}
	links := make(map[string]string, len(sc.Links))
	for k, v := range sc.Links {
		links[k] = v
	}
	links[clientbase.COLLECTION] = collection
	sc.Links = links
	c.types["cluster"] = sc
	return nil
}

// cacerts reads Rancher's cacerts setting (an unauthenticated route): the
// PEM of Rancher's private CA, empty for a publicly trusted certificate.
func (l *listing) cacerts() (rancherCA, error) {
	var setting struct {
		ID    string `json:"id"`
		Value string `json:"value"`
	}
	if err := l.ops.DoGet(l.s.apiURL+"/settings/cacerts", nil, &setting); err != nil {
		return rancherCA{}, l.fail("get /v3/settings/cacerts", err)
	}
	if setting.ID != "cacerts" {
		return rancherCA{}, &listError{kind: kindDecode, err: errors.New("get /v3/settings/cacerts: the answer is not the cacerts setting")}
	}
	if strings.TrimSpace(setting.Value) == "" {
		return rancherCA{}, nil
	}
	ca, err := sources.ParsePEMCA([]byte(setting.Value))
	if err != nil {
		return rancherCA{Problem: fmt.Sprintf("rancher's cacerts setting is not a usable CA bundle: %v", err)}, nil
	}
	return rancherCA{CA: ca}, nil
}

// clusters fetches every page of /v3/clusters, following pagination.next.
// Any failed page fails the listing: a missing page is not an empty one.
func (l *listing) clusters(filters map[string]any) ([]Cluster, error) {
	var all []Cluster
	seenIDs := map[string]bool{}
	seenLinks := map[string]bool{}
	col := &clusterCollection{}
	err := l.ops.DoList("cluster", &types.ListOpts{Filters: filters}, col)
	for page := 1; ; page++ {
		what := fmt.Sprintf("get /v3/clusters page %d", page)
		if err != nil {
			return nil, l.fail(what, err)
		}
		if col.Type != "collection" {
			return nil, &listError{kind: kindDecode, err: fmt.Errorf("%s: the answer is not a collection", what)}
		}
		l.pages++
		l.s.metrics.pages.Inc()
		for i := range col.Data {
			id := col.Data[i].ID
			if id == "" {
				return nil, &listError{kind: kindDecode, err: fmt.Errorf("%s: a cluster has no id", what)}
			}
			if seenIDs[id] {
				return nil, &listError{kind: kindPagination, err: fmt.Errorf("%s: cluster %s listed twice (the list changed while it was paged)", what, id)}
			}
			seenIDs[id] = true
			col.Data[i].Conditions = keepConditions(col.Data[i].Conditions)
		}
		all = append(all, col.Data...)
		next := ""
		if col.Pagination != nil {
			next = col.Pagination.Next
		}
		if next == "" {
			// partial: true without next is the last page.
			return all, nil
		}
		link, lerr := l.onOrigin(next)
		if lerr != nil {
			return nil, &listError{kind: kindDecode, err: fmt.Errorf("%s: next link: %w", what, lerr)}
		}
		if seenLinks[link] {
			return nil, &listError{kind: kindPagination, err: fmt.Errorf("%s: next link points back at an earlier page", what)}
		}
		seenLinks[link] = true
		col = &clusterCollection{}
		err = l.ops.DoNext(link, col)
	}
}

// onOrigin returns link on the configured scheme and host: a link Rancher
// builds from a proxy's headers may name another host or plain http, and
// the token must go nowhere else. The first rewrite is logged.
func (l *listing) onOrigin(link string) (string, error) {
	u, err := url.Parse(link)
	if err != nil {
		return "", errors.New("invalid url")
	}
	if sameOrigin(u, l.s.origin) && u.User == nil {
		return link, nil
	}
	if !l.s.warnedOrigin && u.Host != "" {
		l.s.warnedOrigin = true
		l.s.log.Warn("rancher returned a link on another scheme or host; requesting it on the configured url instead (check the proxy's X-Forwarded-* headers)",
			"linkOrigin", u.Scheme+"://"+u.Host)
	}
	r := *u
	r.Scheme, r.Host, r.User = l.s.origin.Scheme, l.s.origin.Host, nil
	return r.String(), nil
}

// sameOrigin compares scheme and host, with default ports made explicit.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(hostPort(a), hostPort(b))
}

func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if strings.EqualFold(u.Scheme, "https") {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// otherOriginError is a request refused because its URL is outside the
// configured server.
type otherOriginError struct{}

func (otherOriginError) Error() string {
	return "refused to send a request outside the configured rancher url"
}

// listingTransport is the RoundTripper of one listing. norman builds its
// requests without a context: this attaches the listing's, bounds each
// request (body included) by the request timeout, and refuses any URL
// outside the configured origin (a redirect, say) before the token leaves.
type listingTransport struct {
	l    *listing
	base http.RoundTripper
}

func (t *listingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer func() { _ = req.Body.Close() }()
	}
	if !sameOrigin(req.URL, t.l.s.origin) {
		return nil, otherOriginError{}
	}
	t.l.requests++
	ctx, cancel := context.WithTimeout(t.l.ctx, t.l.s.timeout)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// listError is a failed listing with the kind counted in errors_total.
type listError struct {
	kind string
	err  error
}

func (e *listError) Error() string { return e.err.Error() }
func (e *listError) Unwrap() error { return e.err }

// fail turns an error of a request into a short one with its kind. It
// never passes norman's text on: that quotes whole response bodies.
func (l *listing) fail(what string, err error) error {
	var (
		apiErr *clientbase.APIError
		syn    *json.SyntaxError
		typ    *json.UnmarshalTypeError
		ne     net.Error
		origin otherOriginError
	)
	switch {
	case errors.As(err, &apiErr):
		status := fmt.Sprintf("%d %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode))
		if apiErr.StatusCode == http.StatusUnauthorized || apiErr.StatusCode == http.StatusForbidden {
			return &listError{kind: kindAuth, err: fmt.Errorf("%s: rancher %s rejected the token from %s (%s)",
				what, l.s.origin, l.s.cfg.Token.String(), status)}
		}
		return &listError{kind: kindHTTP, err: fmt.Errorf("%s: rancher answered %s", what, status)}
	case errors.As(err, &origin):
		return &listError{kind: kindOrigin, err: fmt.Errorf("%s: %w", what, origin)}
	case errors.Is(err, context.Canceled):
		return &listError{kind: kindCanceled, err: fmt.Errorf("%s: %w", what, context.Canceled)}
	case errors.Is(err, context.DeadlineExceeded):
		if l.ctx.Err() == nil {
			return &listError{kind: kindTimeout, err: fmt.Errorf("%s: no answer within requestTimeout %s: %w", what, l.s.timeout, context.DeadlineExceeded)}
		}
		return &listError{kind: kindTimeout, err: fmt.Errorf("%s: %w", what, context.DeadlineExceeded)}
	case errors.As(err, &syn):
		return &listError{kind: kindDecode, err: fmt.Errorf("%s: malformed JSON at byte %d", what, syn.Offset)}
	case errors.As(err, &typ):
		return &listError{kind: kindDecode, err: fmt.Errorf("%s: unexpected JSON %s at %s", what, typ.Value, typ.Field)}
	}
	if tlsErr := tlsError(err); tlsErr != nil {
		return &listError{kind: kindTLS, err: fmt.Errorf("%s: %s", what, tlsErr.Error())}
	}
	if errors.As(err, &ne) && ne.Timeout() {
		return &listError{kind: kindTimeout, err: fmt.Errorf("%s: timed out", what)}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the URL
	}
	if strings.Contains(err.Error(), "Failed to parse") {
		return &listError{kind: kindDecode, err: fmt.Errorf("%s: malformed JSON", what)}
	}
	return &listError{kind: kindNetwork, err: fmt.Errorf("%s: %s", what, err.Error())}
}

// tlsError returns the certificate or handshake error within err, if any.
func tlsError(err error) error {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		alert    tls.AlertError
	)
	switch {
	case errors.As(err, &verify):
		return verify
	case errors.As(err, &unknown):
		return unknown
	case errors.As(err, &hostname):
		return hostname
	case errors.As(err, &invalid):
		return invalid
	case errors.As(err, &record):
		return record
	case errors.As(err, &alert):
		return alert
	}
	return nil
}
