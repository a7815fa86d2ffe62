// Package generator serves Argo CD's ApplicationSet plugin generator API
// (POST /api/v1/getparams.execute) from the inventory's snapshots, plus the
// operations endpoints /healthz, /readyz, /metrics and /status.
//
// Every answer is a memory read: each cluster is encoded once per snapshot
// version, and a filter's answer is the selection of those encodings it
// matches, cached per snapshot version and input and written straight from
// the shared encoding.
package generator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// GetParamsPath is the path Argo CD calls, below the base URL of the plugin
// ConfigMap.
const GetParamsPath = "/api/v1/getparams.execute"

// MaxBodyBytes bounds a request body; larger bodies get 413.
const MaxBodyBytes = 1 << 20

// StaleHeader names, on a 200, the selected sources whose latest listing
// failed; their last complete listing was served.
const StaleHeader = "X-Cluster-Discovery-Stale"

// Inventory is what the server reads from sources/inventory.
type Inventory interface {
	Snapshot() *inventory.Snapshot
	Status() inventory.Status
}

// Options configure a Server.
type Options struct {
	Inventory Inventory
	Tokens    *TokenSet
	// Providers are the registered provider names: the values
	// input.parameters.provider accepts, listed in this order when it
	// names another.
	Providers []sources.Provider
	// PathPrefix is put before GetParamsPath, e.g. "/discovery".
	PathPrefix string
	Logger     *slog.Logger
	// Registerer receives the HTTP metrics; Gatherer is served on /metrics.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Version is shown on /status.
	Version string
	// SecretsStatus, when set, is shown on /status under "secrets".
	SecretsStatus func() any
	// Ready, when set, decides /readyz: 200 while it returns nil, else 503
	// with its error. It says whether this replica can answer at all (a
	// 503 with our message is an answer); nil means ready once every source
	// has completed a listing.
	Ready func() error
	// Current, when set, is asked before each answer whether the
	// inventory's snapshot is the ledger's current one (a replica whose
	// watch on the ledger has stopped is not): an error is answered 503
	// with its message, and Argo CD keeps every Application.
	Current func(context.Context) error
}

// Server is the plugin API and the operations endpoints.
type Server struct {
	opts   Options
	logger *slog.Logger
	// ignoredKeys remembers the unknown top-level request keys already
	// logged: each is logged once.
	ignoredKeys onceKeys
	cache       *responseCache
	metrics     *httpMetrics
	bufs        sync.Pool
}

// New returns a server. Mount its handlers with APIHandler and OpsHandler,
// or both on one listener with Handler.
func New(opts Options) (*Server, error) {
	if opts.Inventory == nil || opts.Tokens == nil {
		return nil, fmt.Errorf("inventory and tokens are required")
	}
	if len(opts.Providers) == 0 {
		return nil, fmt.Errorf("providers are required")
	}
	opts.Providers = slices.Clone(opts.Providers)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.NewRegistry()
	}
	prefix, err := NormalizePrefix(opts.PathPrefix)
	if err != nil {
		return nil, err
	}
	opts.PathPrefix = prefix
	m, err := newHTTPMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	s := &Server{opts: opts, logger: opts.Logger, cache: newResponseCache(4096), metrics: m}
	s.bufs.New = func() any { return new(bytes.Buffer) }
	return s, nil
}

var prefixRE = regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)*$`)

// NormalizePrefix returns prefix with one leading and no trailing slash,
// or "" for none.
func NormalizePrefix(prefix string) (string, error) {
	p := strings.TrimRight(strings.TrimSpace(prefix), "/")
	if p != "" && !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if !prefixRE.MatchString(p) {
		return "", fmt.Errorf("path prefix %q: only path segments of letters, digits and ._~- are allowed", prefix)
	}
	return p, nil
}

// Handler serves the API and the operations endpoints on one listener.
// There /status, which names every cluster and why it is held or not
// served, needs the plugin API's bearer token: whoever reaches the API
// (Argo CD's network) is not thereby an operator. The probes and /metrics
// stay open.
func (s *Server) Handler() http.Handler { return s.newEcho(true, true) }

// APIHandler serves only the plugin API.
func (s *Server) APIHandler() http.Handler { return s.newEcho(true, false) }

// OpsHandler serves only /healthz, /readyz, /metrics and /status, all
// open (server.opsListen: an address the operator keeps to the cluster).
func (s *Server) OpsHandler() http.Handler { return s.newEcho(false, true) }

func (s *Server) newEcho(api, ops bool) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.Use(s.observe)
	if api {
		e.POST(s.opts.PathPrefix+GetParamsPath, s.getParams)
	}
	if ops {
		e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
		e.GET("/readyz", s.readyz)
		status := s.status
		if api {
			status = s.withToken(status)
		}
		e.GET("/status", status)
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{})))
	}
	return e
}

// message is the error body; Argo CD shows its "message" in the
// ApplicationSet's conditions.
type message struct {
	Message string `json:"message"`
}

func writeMessage(c echo.Context, code int, msg string) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(message{Message: msg}) // a struct of one string cannot fail
	return c.JSONBlob(code, b.Bytes())
}

// errorHandler renders echo's own errors (404, 405) as {"message": ...}.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, msg := http.StatusInternalServerError, "internal error"
	var he *echo.HTTPError
	if errors.As(err, &he) {
		code = he.Code
		msg = http.StatusText(code)
		if code == http.StatusMethodNotAllowed {
			msg = "method not allowed: use POST " + s.opts.PathPrefix + GetParamsPath
		}
		if code == http.StatusNotFound {
			msg = "not found: the plugin API is POST " + s.opts.PathPrefix + GetParamsPath
		}
	} else {
		s.logger.Error("request failed", "path", c.Path(), "error", err.Error())
	}
	_ = writeMessage(c, code, msg)
}

// observe counts requests by route and status code and times them.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := s.recovering(next, c)
		if err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "other"
		}
		status := c.Response().Status
		s.metrics.observe(route, status, time.Since(start))
		if s.logger.Enabled(c.Request().Context(), slog.LevelDebug) {
			s.logger.Debug("request", "method", c.Request().Method, "path", c.Request().URL.Path,
				"status", status, "took", time.Since(start).String())
		}
		return nil
	}
}

// recovering calls next, and turns a panic in it into a 500 with a
// message, logged once with its stack: net/http would cut the connection
// and log to stderr instead. Either way Argo CD keeps what it has; this
// one says why. (echo's Recover middleware does the same with an
// allocation per request, which the cached answers do not afford.)
func (s *Server) recovering(next echo.HandlerFunc, c echo.Context) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if r == http.ErrAbortHandler { //nolint:errorlint // net/http's sentinel, compared as net/http does
			panic(r)
		}
		s.logger.Error("request panicked", "path", c.Path(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		err = echo.NewHTTPError(http.StatusInternalServerError)
	}()
	return next(c)
}

// authorize checks the bearer token and writes the 401 itself.
// withToken serves next only to a request with a valid bearer token.
func (s *Server) withToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !s.authorize(c) {
			return nil // answered 401
		}
		return next(c)
	}
}

func (s *Server) authorize(c echo.Context) bool {
	h := c.Request().Header.Get(echo.HeaderAuthorization)
	const scheme = "bearer "
	if len(h) < len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="argocd-cluster-discovery"`)
		_ = writeMessage(c, http.StatusUnauthorized, "missing bearer token (Authorization: Bearer <token>): set token in the plugin ConfigMap to a reference of the token Secret key")
		return false
	}
	token := strings.TrimSpace(h[len(scheme):])
	if s.opts.Tokens.Valid(token) {
		return true
	}
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="argocd-cluster-discovery", error="invalid_token"`)
	msg := "invalid bearer token"
	if strings.HasPrefix(token, "$") {
		// Argo CD sends the reference itself when it cannot resolve it. It
		// is not echoed: a token rotated in before this process reloads
		// its tokens may start with "$" too, and Argo CD shows this
		// message in the ApplicationSet's conditions.
		msg = "invalid bearer token: Argo CD sent a value starting with \"$\" (not shown here), which means it could not resolve the token of the plugin ConfigMap; " +
			"for $plugin.<name>.token the key must exist in argocd-secret, for $<secret>:<key> the Secret must exist in Argo CD's namespace " +
			"with label app.kubernetes.io/part-of: argocd and hold the key"
	}
	_ = writeMessage(c, http.StatusUnauthorized, msg)
	return false
}

func (s *Server) getParams(c echo.Context) error {
	if !s.authorize(c) {
		return nil
	}
	req := c.Request()
	if req.ContentLength > MaxBodyBytes {
		return writeMessage(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxBodyBytes))
	}
	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer s.bufs.Put(buf)
	if _, err := buf.ReadFrom(http.MaxBytesReader(c.Response(), req.Body, MaxBodyBytes)); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return writeMessage(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxBodyBytes))
		}
		return writeMessage(c, http.StatusBadRequest, "cannot read request body")
	}
	body := buf.Bytes()

	if s.opts.Current != nil {
		// before the snapshot is read: a view that catches up meanwhile
		// answers from the ledger's current book
		if err := s.opts.Current(req.Context()); err != nil {
			return s.fail(c, "", &UnavailableError{Reason: err.Error()})
		}
	}
	snap := s.opts.Inventory.Snapshot()
	if res, ok := s.cache.getBody(snap.Version, body); ok {
		return s.writeResult(c, res)
	}
	parsed, err := ParseRequest(body, s.opts.Providers)
	if err != nil {
		return s.fail(c, parsed.ApplicationSetName, err)
	}
	f, appSet := parsed.Filter, parsed.ApplicationSetName
	fresh, full := s.ignoredKeys.firstSeen(parsed.IgnoredKeys)
	for _, k := range fresh {
		s.logger.Info("ignoring an unknown top-level key in a plugin request (a newer Argo CD may send it)", "key", k, "applicationSet", appSet)
	}
	if full {
		s.logger.Info("100 distinct unknown top-level keys logged; further ones are not logged")
	}
	res, ok := s.cache.getFilter(snap.Version, f.Key())
	if !ok {
		if res, err = render(snap, &f, s.cache.encoded); err != nil {
			return s.fail(c, appSet, err)
		}
		s.cache.putFilter(snap.Version, f.Key(), res)
		s.logger.Debug("parameters rendered", "applicationSet", appSet, "snapshot", snap.Version, "clusters", res.Count)
	}
	s.cache.putBody(snap.Version, body, res)
	return s.writeResult(c, res)
}

func (s *Server) fail(c echo.Context, appSet string, err error) error {
	var ie *InputError
	var ue *UnavailableError
	switch {
	case errors.As(err, &ie):
		s.logger.Info("rejected plugin request", "applicationSet", appSet, "reason", ie.Error())
		return writeMessage(c, http.StatusBadRequest, ie.Error())
	case errors.As(err, &ue):
		c.Response().Header().Set("Retry-After", "10")
		return writeMessage(c, http.StatusServiceUnavailable, ue.Error())
	}
	return err
}

// jsonContentType is shared read-only by every answer.
var jsonContentType = []string{echo.MIMEApplicationJSON}

func (s *Server) writeResult(c echo.Context, res Result) error {
	h := c.Response().Header()
	// No Content-Length: net/http sets it for small bodies and streams large
	// ones chunked, which measured 20-25% faster over loopback at 10,000
	// clusters (see BenchmarkGetParams). WriteTo writes in chunks of up to
	// 32 KiB, or a longer run of consecutive clusters at once.
	h[echo.HeaderContentType] = jsonContentType
	if res.stale != nil {
		h[StaleHeader] = res.stale
	}
	c.Response().WriteHeader(http.StatusOK)
	_, err := res.WriteTo(c.Response())
	return err
}

func (s *Server) readyz(c echo.Context) error {
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			return writeMessage(c, http.StatusServiceUnavailable, err.Error())
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	}
	snap := s.opts.Inventory.Snapshot()
	var waiting []string
	for _, st := range snap.Sources {
		if !st.Synced {
			waiting = append(waiting, st.Name)
		}
	}
	if len(waiting) > 0 {
		return writeMessage(c, http.StatusServiceUnavailable, "waiting for the first listing of: "+strings.Join(waiting, ", "))
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) status(c echo.Context) error {
	st := s.opts.Inventory.Status()
	c.Response().Header().Set(echo.HeaderContentType, "application/json; charset=UTF-8")
	c.Response().WriteHeader(http.StatusOK)
	enc := json.NewEncoder(c.Response())
	enc.SetIndent("", "  ")
	var secrets any
	if s.opts.SecretsStatus != nil {
		secrets = s.opts.SecretsStatus()
	}
	return enc.Encode(struct {
		Version string `json:"version"`
		inventory.Status
		Secrets any `json:"secrets,omitempty"`
	}{s.opts.Version, st, secrets})
}
