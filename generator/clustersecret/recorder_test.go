package clustersecret

// The recording client of the write-path tests (writepath_test.go): it
// keeps each write the reconciler sends and can run another writer's change
// just before one.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// sentWrite is one write request of the reconciler to a Secret.
type sentWrite struct {
	method, secret string
	body           []byte
	entered        time.Time // when the request reached the RoundTripper
	forwarded      time.Time // when it was sent to the API server (zero: never)
	status         int       // the API server's answer (0: none)
}

// recorder records the reconciler's writes to Secrets, optionally delays
// them, and runs a hook before a write is sent.
type recorder struct {
	rt    http.RoundTripper
	delay time.Duration

	mu     sync.Mutex
	before func(w *sentWrite) // run before a write is forwarded
	writes []*sentWrite
}

func (rec *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet || !strings.Contains(r.URL.Path, "/secrets") {
		return rec.rt.RoundTrip(r)
	}
	w := &sentWrite{method: r.Method, entered: time.Now()}
	if _, name, ok := strings.Cut(r.URL.Path, "/secrets/"); ok {
		w.secret = name
	}
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		_ = r.Body.Close()
		w.body = b
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	rec.mu.Lock()
	rec.writes = append(rec.writes, w)
	hook := rec.before
	rec.mu.Unlock()
	if rec.delay > 0 {
		select {
		case <-time.After(rec.delay):
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	if hook != nil {
		hook(w)
	}
	rec.mu.Lock()
	w.forwarded = time.Now()
	rec.mu.Unlock()
	resp, err := rec.rt.RoundTrip(r)
	if resp != nil {
		rec.mu.Lock()
		w.status = resp.StatusCode
		rec.mu.Unlock()
	}
	return resp, err
}

// sent returns a copy of the writes recorded so far (to name, if given).
func (rec *recorder) sent(name string) []sentWrite {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []sentWrite
	for _, w := range rec.writes {
		if name == "" || w.secret == name {
			out = append(out, *w)
		}
	}
	return out
}

// onceBefore runs f before the first write of method to the Secret name.
func (rec *recorder) onceBefore(method, name string, f func()) {
	var once sync.Once
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.before = func(w *sentWrite) {
		if w.method == method && w.secret == name {
			once.Do(f)
		}
	}
}

// decode reads a request body as client-go encoded it (protobuf or JSON).
func decode(t testing.TB, body []byte, into runtime.Object) {
	t.Helper()
	_, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, into)
	require.NoError(t, err)
}

func recordingClient(t testing.TB, delay time.Duration) (kubernetes.Interface, *recorder) {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.QPS, cfg.Burst = 500, 1000
	rec := &recorder{delay: delay}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.rt = rt; return rec })
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c, rec
}

// recordingReconciler is newReconciler writing through a recorder.
func recordingReconciler(t testing.TB, e *env, f *fleet, mut ...func(*Config)) (*Reconciler, *recorder) {
	t.Helper()
	client, rec := recordingClient(t, 0)
	r, err := New(testConfig(e, mut...), client, f.inv, nil, nil, WithInformer(informerFor(t, client, e.ns)))
	require.NoError(t, err)
	return r, rec
}

// edit changes a Secret as another writer would (a person, another
// deployment), through the admin client. It only reports a failure (with
// assert), as it also runs in the reconciler's goroutines.
func (e *env) edit(name string, change func(*corev1.Secret)) {
	assert.NoError(e.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := e.admin.CoreV1().Secrets(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(s)
		_, err = e.admin.CoreV1().Secrets(e.ns).Update(context.Background(), s, metav1.UpdateOptions{})
		return err
	}))
}

func (e *env) get(name string) *corev1.Secret {
	e.t.Helper()
	s, err := e.admin.CoreV1().Secrets(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(e.t, err)
	return s
}
