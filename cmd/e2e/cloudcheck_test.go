package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
)

// secrets returns the deployment's Secrets by the cluster they are for.
func (c *cloudEnv) secrets() (map[string]corev1.Secret, error) {
	l, err := e.kube.CoreV1().Secrets(argoNS).List(context.Background(), metav1.ListOptions{LabelSelector: clustersecret.LabelOwner + "=" + cloudOwnerID})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Secret{}
	for _, s := range l.Items {
		out[s.Annotations[clustersecret.AnnotationCluster]] = s
	}
	return out, nil
}

// secretsAre checks that the deployment has exactly one Secret per cluster
// of servers, with that server, phase ready and the state given.
func (c *cloudEnv) secretsAre(servers, states map[string]string) error {
	secrets, err := c.secrets()
	if err != nil {
		return err
	}
	if !slices.Equal(names(secrets), names(servers)) {
		return fmt.Errorf("Secrets for %v, want %v", names(secrets), names(servers))
	}
	for name, server := range servers {
		s := secrets[name]
		if got := string(s.Data["server"]); got != server {
			return fmt.Errorf("Secret %s: server %q, want %q", s.Name, got, server)
		}
		if p, st := s.Labels[clustersecret.LabelPhase], s.Labels[clustersecret.LabelState]; p != "ready" || st != states[name] {
			return fmt.Errorf("Secret %s: phase %q state %q, want ready %q", s.Name, p, st, states[name])
		}
	}
	return nil
}

// appsAre checks that the ApplicationSet has one Application per cluster of
// servers, cloud-<cluster>, in project default, targeting that server,
// which is its Secret's.
func (c *cloudEnv) appsAre(servers map[string]string) error {
	apps, err := e.apps(cloudAppSet)
	if err != nil {
		return err
	}
	want := map[string]string{}
	for name, server := range servers {
		want["cloud-"+name] = server
	}
	if !slices.Equal(names(apps), names(want)) {
		return fmt.Errorf("Applications %v, want %v", names(apps), names(want))
	}
	secrets, err := c.secrets()
	if err != nil {
		return err
	}
	for name, server := range servers {
		a := apps["cloud-"+name]
		if a.Server != server || a.Project != "default" {
			return fmt.Errorf("Application %s: server %q project %q, want %q default", a.Name, a.Server, a.Project, server)
		}
		if s := string(secrets[name].Data["server"]); s != server {
			return fmt.Errorf("Application %s: its cluster's Secret has server %q", a.Name, s)
		}
	}
	return nil
}

// cloudParam is what the test reads of one parameter set of the answer.
type cloudParam struct {
	Name, Server, Source, Provider, Tenant, Phase, State string
}

// params asks the deployment what Argo CD asks it, by cluster name.
func (c *cloudEnv) params() (map[string]cloudParam, error) {
	body := `{"applicationSetName":"` + cloudAppSet + `","input":{"parameters":{"tenant":"` + cloudTenant + `"}}}`
	var ps []cloudParam
	if err := getParams(c.addr, cloudToken, []byte(body), &ps); err != nil {
		return nil, err
	}
	out := map[string]cloudParam{}
	for _, p := range ps {
		out[p.Name] = p
	}
	return out, nil
}

// shows checks that the cluster is served with phase and state: in the
// plugin answer (with its server) and on its Secret's labels.
func (c *cloudEnv) shows(name, server, phase, state string) error {
	ps, err := c.params()
	if err != nil {
		return err
	}
	if p, ok := ps[name]; !ok || p.Phase != phase || p.State != state || p.Server != server {
		return fmt.Errorf("plugin answer for %s: %+v (listed %v), want phase %q state %q server %s", name, p, ok, phase, state, server)
	}
	secrets, err := c.secrets()
	if err != nil {
		return err
	}
	s := secrets[name]
	if s.Labels[clustersecret.LabelPhase] != phase || s.Labels[clustersecret.LabelState] != state {
		return fmt.Errorf("Secret %s of %s: phase %q state %q, want %q %q", s.Name, name, s.Labels[clustersecret.LabelPhase], s.Labels[clustersecret.LabelState], phase, state)
	}
	return nil
}

// statusDoc reads the deployment's /status.
func (c *cloudEnv) statusDoc() (*statusDoc, error) {
	resp, err := getStatus(http.DefaultClient, c.addr, cloudToken)
	if err != nil {
		return nil, err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/status: %s", resp.Status)
	}
	var doc statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode /status: %w", err)
	}
	return &doc, nil
}

// duplicate checks whether /status lists the rancher source's listing of
// name as a duplicate of the aws listing of name, by CloudID (want), and
// that it reports no name conflict on name either way.
func (c *cloudEnv) duplicate(name string, want bool) error {
	doc, err := c.statusDoc()
	if err != nil {
		return err
	}
	for _, k := range doc.Conflicts {
		if k.Name == name {
			return fmt.Errorf("/status reports a name conflict on %s: %+v", name, k)
		}
	}
	found := false
	for _, d := range doc.Duplicates {
		if d.Name == name && d.Source == "rancher" {
			if d.KeptName != name || d.KeptSource != "aws" || d.Reason != "cloudID" {
				return fmt.Errorf("/status duplicate %+v, want kept aws %s by cloudID", d, name)
			}
			found = true
		}
	}
	if found != want {
		return fmt.Errorf("/status duplicates %+v: rancher %s listed %v, want %v", doc.Duplicates, name, found, want)
	}
	return nil
}

// servedFrom checks that the plugin answer serves name once, from source
// at server.
func (c *cloudEnv) servedFrom(name, source, server string) error {
	ps, err := c.params()
	if err != nil {
		return err
	}
	if p, ok := ps[name]; !ok || p.Source != source || p.Server != server {
		return fmt.Errorf("plugin answer for %s: %+v (listed %v), want source %s server %s", name, p, ok, source, server)
	}
	return nil
}

// noSecretOf checks that the deployment has no Secret for a cluster of
// source.
func (c *cloudEnv) noSecretOf(source string) error {
	l, err := e.kube.CoreV1().Secrets(argoNS).List(context.Background(), metav1.ListOptions{LabelSelector: clustersecret.LabelOwner + "=" + cloudOwnerID})
	if err != nil {
		return err
	}
	for _, s := range l.Items {
		if s.Labels[clustersecret.LabelSource] == source {
			return fmt.Errorf("Secret %s for %s of source %s (server %s)", s.Name, s.Annotations[clustersecret.AnnotationCluster], source, s.Data["server"])
		}
	}
	return nil
}

// servedOnce checks that name is served once, from the EKS source at
// server: in the plugin answer and by the only Secret for name, none being
// for a Rancher cluster.
func (c *cloudEnv) servedOnce(name, server string) error {
	if err := errors.Join(c.servedFrom(name, "aws", server), c.noSecretOf("rancher")); err != nil {
		return err
	}
	l, err := e.kube.CoreV1().Secrets(argoNS).List(context.Background(), metav1.ListOptions{LabelSelector: clustersecret.LabelOwner + "=" + cloudOwnerID})
	if err != nil {
		return err
	}
	var of []string
	for _, s := range l.Items {
		if s.Annotations[clustersecret.AnnotationCluster] == name {
			of = append(of, s.Name)
			if s.Labels[clustersecret.LabelSource] != "aws" || string(s.Data["server"]) != server {
				return fmt.Errorf("Secret %s of %s: source %q server %q, want aws %s", s.Name, name, s.Labels[clustersecret.LabelSource], s.Data["server"], server)
			}
		}
	}
	if len(of) != 1 {
		return fmt.Errorf("Secrets for %s: %v, want one", name, of)
	}
	return nil
}

// cloudCounter counts the listings of a source, n0 when a change was made.
type cloudCounter struct {
	name string
	n    func() int
	n0   int
}

// staysWith is stays over the listings of the sources counted: check holds
// throughout (fatal at once), want once each counted three listings since
// the change, until each counted more than listings.
func (c *cloudEnv) staysWith(t *testing.T, counters []cloudCounter, listings int, check, want func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(listings+5) * 3 * cloudInterval)
	wanted := false
	progress := func() (string, bool, bool) {
		var parts []string
		three, done := true, true
		for _, k := range counters {
			d := k.n() - k.n0
			parts = append(parts, fmt.Sprintf("%d %s", d, k.name))
			three = three && d >= 3
			done = done && d > listings
		}
		return strings.Join(parts, " and ") + " listing(s)", three, done
	}
	for {
		at, three, done := progress()
		if err := check(); err != nil {
			t.Fatalf("after %s: %v\n%s", at, err, c.logs())
		}
		if three {
			if err := want(); err != nil {
				t.Fatalf("after %s: %v\n%s", at, err, c.logs())
			}
			wanted = true
		}
		if wanted && done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s by %s, want %d each\n%s", at, deadline.Format(time.TimeOnly), listings+1, c.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cloudSteady is a cluster's Application and Secret as they must stay
// while it has not left.
type cloudSteady struct {
	name   string
	app    app
	secret corev1.Secret
}

func (c *cloudEnv) steadyOf(t *testing.T, name string) *cloudSteady {
	t.Helper()
	apps, err := e.apps(cloudAppSet)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := c.secrets()
	if err != nil {
		t.Fatal(err)
	}
	a, ok := apps["cloud-"+name]
	s, ok2 := secrets[name]
	if !ok || !ok2 {
		t.Fatalf("%s: Application %v, Secret %v", name, ok, ok2)
	}
	return &cloudSteady{name: name, app: a, secret: s}
}

// check returns why the cluster's Application or Secret is not what it
// was: the same objects (UIDs), destination, data, annotations, and labels
// but for the phase and state.
func (st *cloudSteady) check() error {
	apps, err := e.apps(cloudAppSet)
	if err != nil {
		return err
	}
	switch a, ok := apps[st.app.Name]; {
	case !ok:
		return fmt.Errorf("Application %s was deleted", st.app.Name)
	case a != st.app:
		return fmt.Errorf("Application %s changed: %+v, was %+v", st.app.Name, a, st.app)
	}
	s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), st.secret.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("Secret %s of %s: %w", st.secret.Name, st.name, err)
	}
	return sameSecret(s, &st.secret)
}

// stays checks, through listings e0+1 .. e0+listings of EKS and a0+1 ..
// a0+listings of AKS, that check holds throughout (fatal at once), and
// that want holds once two listings of each source completed since the
// change (the Secret's labels follow the inventory asynchronously).
func (c *cloudEnv) stays(t *testing.T, e0, a0, listings int, check, want func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(listings+5) * 3 * cloudInterval)
	wanted := false
	for {
		ne, na := c.fake.EKSListings(), c.fake.AKSListings()
		if err := check(); err != nil {
			t.Fatalf("after %d EKS and %d AKS listing(s): %v\n%s", ne-e0, na-a0, err, c.logs())
		}
		if ne >= e0+3 && na >= a0+3 {
			if err := want(); err != nil {
				t.Fatalf("after %d EKS and %d AKS listing(s): %v\n%s", ne-e0, na-a0, err, c.logs())
			}
			wanted = true
		}
		if wanted && ne > e0+listings && na > a0+listings {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d EKS and %d AKS listings by %s, want %d each\n%s", ne-e0, na-a0, deadline.Format(time.TimeOnly), listings+1, c.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
