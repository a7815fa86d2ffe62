package rancher

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
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
	link, err := l.schemasLink(c)
	l.s.metrics.Request(opAPIRoot, err)
	if err != nil {
		return err
	}
	err = l.readSchemas(c, link)
	l.s.metrics.Request(opSchemas, err)
	return err
}

// schemasLink is GET /v3: the link to the schemas, on the configured
// origin.
func (l *listing) schemasLink(c *conn) (string, error) {
	req, err := http.NewRequestWithContext(l.ctx, http.MethodGet, l.s.apiURL, nil)
	if err != nil {
		return "", invalid(opAPIRoot, "get /v3: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	resp, err := l.ops.Client.Do(req)
	if err != nil {
		return "", l.fail(opAPIRoot, "get /v3", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", l.failStatus(opAPIRoot, "get /v3", resp.StatusCode)
	}
	link := resp.Header.Get("X-Api-Schemas")
	if link == "" {
		return "", invalid(opAPIRoot, "get /v3: no X-Api-Schemas header: is url a Rancher server?")
	}
	schemasURL, err := l.onOrigin(link)
	if err != nil {
		return "", invalid(opAPIRoot, "get /v3: X-Api-Schemas: %w", err)
	}
	return schemasURL, nil
}

// readSchemas reads the schemas into c and checks that the cluster type
// can be listed; its collection link is put on the configured origin.
func (l *listing) readSchemas(c *conn, link string) error {
	var col types.SchemaCollection
	if err := l.ops.DoGet(link, nil, &col); err != nil {
		return l.fail(opSchemas, "get /v3 schemas", err)
	}
	c.types = make(map[string]types.Schema, len(col.Data))
	for _, sc := range col.Data {
		c.types[sc.ID] = sc
	}
	sc, ok := c.types["cluster"]
	collection := sc.Links[clientbase.COLLECTION]
	if !ok || collection == "" || !slices.Contains(sc.CollectionMethods, http.MethodGet) {
		return invalid(opSchemas, "get /v3 schemas: no listable cluster type (may the token list clusters?)")
	}
	collection, err := l.onOrigin(collection)
	if err != nil {
		return invalid(opSchemas, "get /v3 schemas: cluster collection link: %w", err)
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

// rancherCA is the CA of clusters served through Rancher's proxy: the CA
// that Rancher's certificate chains to (zero for a publicly trusted one),
// or why it cannot be used.
type rancherCA struct {
	// CA is parsed once per listing (newRancherCA, cacerts) so that every
	// cluster behind the proxy shares one (at 10,000 clusters a copy each
	// of an RSA 2048 CA is ~7.5 MiB).
	CA      sources.CA
	Problem string
}

// newRancherCA returns the CA of a PEM bundle, none when it is empty, or
// why it cannot be used.
func newRancherCA(pem string) rancherCA {
	if pem == "" {
		return rancherCA{}
	}
	ca, err := sources.ParsePEMCA([]byte(pem))
	if err != nil {
		return rancherCA{Problem: fmt.Sprintf("rancher's CA is not a usable CA bundle: %v", err)}
	}
	return rancherCA{CA: ca}
}

// cacerts reads Rancher's cacerts setting (an unauthenticated route): the
// PEM of Rancher's private CA, empty for a publicly trusted certificate.
func (l *listing) cacerts() (rancherCA, error) {
	var setting struct {
		ID    string `json:"id"`
		Value string `json:"value"`
	}
	err := l.ops.DoGet(l.s.apiURL+"/settings/cacerts", nil, &setting)
	switch {
	case err != nil:
		err = l.fail(opCACerts, "get /v3/settings/cacerts", err)
	case setting.ID != "cacerts":
		err = invalid(opCACerts, "get /v3/settings/cacerts: the answer is not the cacerts setting")
	}
	l.s.metrics.Request(opCACerts, err)
	if err != nil {
		return rancherCA{}, err
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

// clusterCollection is one page of GET /v3/clusters.
type clusterCollection struct {
	types.Collection
	Data []Cluster `json:"data"`
}

func (c *clusterCollection) collection() *types.Collection { return &c.Collection }
func (c *clusterCollection) items() int                    { return len(c.Data) }

// clusters fetches every page of /v3/clusters.
func (l *listing) clusters(filters map[string]any) ([]Cluster, error) {
	var all []Cluster
	seenIDs := map[string]bool{}
	err := followPages(listingPager[*clusterCollection](l), opClusters, "get /v3/clusters",
		func(col *clusterCollection) error {
			return l.ops.DoList("cluster", &types.ListOpts{Filters: filters}, col)
		},
		func(what string, col *clusterCollection, err error) error {
			if err != nil {
				err = l.fail(opClusters, what, err)
			} else {
				err = l.checkPage(what, col, seenIDs)
			}
			l.s.metrics.Request(opClusters, err)
			if err == nil {
				all = append(all, col.Data...)
			}
			return err
		})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// checkPage checks a page of clusters and counts it: a collection whose
// clusters all have an id not seen on an earlier page. It keeps only the
// conditions the phase reads.
func (l *listing) checkPage(what string, col *clusterCollection, seenIDs map[string]bool) error {
	if col.Type != "collection" {
		return invalid(opClusters, "%s: the answer is not a collection", what)
	}
	l.pages++
	l.s.metrics.pages.Inc()
	for i := range col.Data {
		id := col.Data[i].ID
		if id == "" {
			return invalid(opClusters, "%s: a cluster has no id", what)
		}
		if seenIDs[id] {
			return invalid(opClusters, "%s: cluster %s listed twice (the list changed while it was paged)", what, id)
		}
		seenIDs[id] = true
		col.Data[i].Conditions = keepConditions(col.Data[i].Conditions)
	}
	return nil
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

// readToken reads the token the reference points at. Errors name the
// reference, never the value.
func readToken(ref sources.SecretRef) (string, error) {
	v, err := ref.ReadLocal()
	if err != nil {
		return "", fmt.Errorf("token %w", err)
	}
	if strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", fmt.Errorf("token %s: contains whitespace or control characters", ref.String())
	}
	return v, nil
}

// readCAFile reads and checks a PEM bundle.
func readCAFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := sources.ValidatePEM(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}
