package e2e

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
)

// The ARO clusters of TestAROAgentClusters, each reached through an Argo CD
// agent (argoproj-labs/argocd-agent, pull model) whose name is not the
// cluster's: served, a cluster is named after its agent.
var (
	// bound by the hub with its id as ARM spells it (`az aro show`), and
	// tagged by its owner with that same agent
	agentPayments = agentCluster{CloudAROCluster{Sub: agentSubA, RG: "rg-aro-agents", Name: "aro-payments-edge", Provisioning: "Succeeded"},
		"payments-edge", "tagged"}
	// bound with its id in upper case: ids are compared case-insensitively
	agentRetail = agentCluster{CloudAROCluster{Sub: agentSubA, RG: "rg-aro-agents", Name: "aro-retail-edge", Provisioning: "Succeeded"},
		"retail-edge", "upper"}
	// an agent that registered itself with the principal (its Secret the
	// principal's: a bearer token), bound with its id in lower case, in the
	// other subscription
	agentFactory = agentCluster{CloudAROCluster{Sub: agentSubB, RG: "rg-factory", Name: "aro-factory-edge", Provisioning: "Succeeded"},
		"factory-edge", "self-registered"}
	// tagged by its owner with its agent, whose Secret the hub has not
	// bound: not served until the test binds it
	agentWarehouse = agentCluster{CloudAROCluster{Sub: agentSubB, RG: "rg-warehouse", Name: "aro-warehouse-edge", Provisioning: "Succeeded"},
		"warehouse-edge", "unbound"}
	// no agent at all: never served
	agentLab = CloudAROCluster{Sub: agentSubB, RG: "rg-lab", Name: "aro-lab", Provisioning: "Succeeded"}
	// the push cluster of the hybrid hub: its Secret is ours
	agentPush = StaticCluster{Name: "push-onprem", Server: "https://push-onprem.e2e-agent.example.com", Labels: map[string]string{"env": "e2e"}}
)

// the ARO endpoint's two subscriptions
const (
	agentSubA = "4e6a8c0d-2f1b-4d3e-8a5c-7b9d1e3f5a60"
	agentSubB = "8c1e3a5b-7d9f-4b2a-a6c8-0e2f4a6b8d9c"
)

// agentCluster is an ARO cluster, the agent that runs in it, and how the
// test registers and binds that agent.
type agentCluster struct {
	CloudAROCluster
	agent string
	// how: "tagged" (agentctl's Secret, bound, the cluster tagged with the
	// agent), "upper" (agentctl's, bound with the id in upper case),
	// "self-registered" (the principal's Secret, bound with the id in
	// lower case), "unbound" (agentctl's, not bound, the cluster tagged)
	how string
}

// withTags is the cluster as ARM lists it: env=e2e, and its owner's tag
// naming its agent when it has one.
func (c agentCluster) withTags() CloudAROCluster {
	aro := c.CloudAROCluster
	aro.Tags = map[string]string{"env": "e2e"}
	if c.how == "tagged" || c.how == "unbound" {
		aro.Tags["argocd-agent-name"] = c.agent
	}
	return aro
}

// TestAROAgentClusters runs a deployment of its own (its own configuration,
// port, owner id, Lease, plugin ConfigMap and ApplicationSet; the cloud
// deployment's fakes) over an aro source in agent mode and a static source
// of push clusters, with Secret sync on (a hybrid hub) and no
// secrets.argocdVersion: the service warns that such a hub needs Argo CD
// 3.4. In Argo CD's namespace, the agents' Secrets as argocd-agentctl
// agent create writes them (a client certificate of the principal's CA)
// and as the principal writes a self-registered agent's (a bearer token),
// created before the deployment starts; a watch from a List of them on.
//
// The plugin answer serves exactly the ARO clusters whose agent Secret the
// hub bound (annotated with the cluster's ARM id, in any case), each under
// its agent's name and its agent Secret's server verbatim (the
// ?agentName= query included), labelled with the agent; a cluster whose
// owner tagged it with an agent the hub did not bind, and one with no
// agent, are listed unserved by /status with the reason, not in the answer.
// Argo CD's real ApplicationSet controller makes one Application per
// served agent cluster, destination.name the agent's name, which it
// resolved (util/argo.GetDestinationCluster) before creating it; the same
// code in argocd-cluster-check resolves each name to the agent's Secret
// (its server, labels and annotations), the one cluster Secret of that
// name. The service wrote its Secret for the push cluster, none for an
// agent cluster. The hub binds the unbound agent: the cluster is served
// and gets its Application. Through SteadyListings more listings nothing
// changes. No credential of an agent's Secret shows in the answer,
// /status or the log; and the watch saw no write to an agent's Secret but
// the test's own binding.
func TestAROAgentClusters(t *testing.T) {
	start := time.Now()
	sc := newAgentScenario(t)
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"no secrets.argocdVersion on a hybrid hub: the service warns that Argo CD 3.4 is needed", sc.warns},
		{"the plugin answer serves the bound agents' clusters under the agent's name and server", sc.answers},
		{"a cluster tagged with an agent the hub did not bind, and one with no agent: unserved, with the reason", sc.unserved},
		{"the ApplicationSet: one Application per bound agent cluster, destination.name the agent", sc.applications},
		{"Argo CD's code resolves each destination name to the agent's Secret", sc.resolves},
		{"our Secrets: the push cluster's, none for an agent's cluster", sc.ourSecrets},
		{"the hub binds the tagged cluster's agent: the cluster is served and gets its Application", sc.binds},
		{"through more listings nothing changes", sc.steady},
		{"no credential of an agent's Secret in the answer, /status or the log", sc.noCredentials},
		{"the agents' Secrets: no write but the test's own binding", sc.untouched},
	} {
		if !t.Run(step.name, step.run) {
			t.FailNow()
		}
	}
	t.Logf("agent scenario took %s (%d ARO listings, %d events on the agents' Secrets)", time.Since(start).Round(100*time.Millisecond),
		sc.a.Fake.AROListings(), sc.w.Events())
}

// agentScenario is the state TestAROAgentClusters' steps share.
type agentScenario struct {
	a *AgentEnv
	w *AgentSecretWatch
	// served are the clusters the answer must serve, by agent; ids the id
	// each agent's Secret is annotated with (none: not bound); all every
	// agent
	served map[string]agentCluster
	ids    map[string]string
	all    []string
	// creds are the credentials of the agents' Secrets
	creds []string
}

// newAgentScenario lists the ARO clusters and the push cluster, creates
// the agents' Secrets (registered and bound as each cluster's how says),
// starts the watch on them, then the deployment.
func newAgentScenario(t *testing.T) *agentScenario {
	t.Helper()
	sc := &agentScenario{a: e.StartAgent(t), served: map[string]agentCluster{}, ids: map[string]string{}}
	clusters := []agentCluster{agentPayments, agentRetail, agentFactory, agentWarehouse}
	listed := []CloudAROCluster{agentLab}
	for _, c := range clusters {
		listed = append(listed, c.withTags())
		sc.all = append(sc.all, c.agent)
	}
	sc.a.SetARO(listed...)
	sc.a.Fake.SetAROSubscriptions(agentSubA, agentSubB)
	sc.a.WritePush(t, agentPush)
	for _, c := range clusters {
		mk := sc.a.AgentctlSecret
		if c.how == "self-registered" {
			mk = sc.a.SelfRegisteredSecret
		}
		s, cr := mk(t, c.agent)
		sc.creds = append(sc.creds, cr.Values()...)
		switch c.how {
		case "tagged":
			sc.ids[c.agent] = c.ID()
		case "upper":
			sc.ids[c.agent] = strings.ToUpper(c.ID())
		case "self-registered":
			sc.ids[c.agent] = strings.ToLower(c.ID())
		}
		sc.a.CreateAgentSecret(t, s, sc.ids[c.agent])
		if sc.ids[c.agent] != "" {
			sc.served[c.agent] = c
		}
	}
	sc.w = e.WatchAgentSecrets(t)
	if err := listsAgents(sc.w, sc.all); err != nil {
		t.Fatal(err)
	}
	sc.a.Start(t)
	sc.a.Eventually(t, 30*time.Second, "/readyz of the agent deployment", func() error { return GetOK("http://" + sc.a.Addr + "/readyz") })
	return sc
}

// warns checks the warning of a hybrid hub whose Argo CD version is not
// stated, in the deployment's log.
func (sc *agentScenario) warns(t *testing.T) {
	for _, l := range strings.Split(sc.a.Log(), "\n") {
		if strings.Contains(l, "Argo CD 3.4.0 or later") && strings.Contains(l, "secrets.argocdVersion") && strings.Contains(l, AgentAROSource) {
			t.Logf("warned: %s", l)
			return
		}
	}
	t.Fatalf("no warning that a hybrid hub needs Argo CD 3.4.0 (naming secrets.argocdVersion and the source %s) in the log\n%s", AgentAROSource, sc.a.Logs())
}

func (sc *agentScenario) answers(t *testing.T) {
	sc.a.Eventually(t, 30*time.Second, "the bound agents' clusters and the push cluster in the answer", func() error {
		return agentAnswer(sc.a, sc.served)
	})
}

func (sc *agentScenario) unserved(t *testing.T) {
	sc.a.Eventually(t, 15*time.Second, "/status lists them unserved", func() error {
		return errors.Join(
			agentUnserved(sc.a, agentWarehouse.Name, agentWarehouse.ID(), fmt.Sprintf("agent %q is registered but not bound to this cluster", agentWarehouse.agent)),
			agentUnserved(sc.a, agentLab.Name, agentLab.ID(), "agent not registered"))
	})
}

// applications applies the ApplicationSet: Argo CD's controller resolves
// each destination name (util/argo.GetDestinationCluster) before it
// creates the Application.
func (sc *agentScenario) applications(t *testing.T) {
	sc.a.Apply(t)
	sc.a.Eventually(t, 30*time.Second, "one Application per bound agent cluster", func() error { return agentApps(sc.a, sc.served) })
}

func (sc *agentScenario) resolves(t *testing.T) {
	for _, agent := range Names(sc.served) {
		agentResolves(t, agent, sc.ids[agent])
	}
}

func (sc *agentScenario) ourSecrets(t *testing.T) {
	if err := agentOurSecrets(sc.a, sc.all); err != nil {
		t.Fatalf("%v\n%s", err, sc.a.Logs())
	}
}

// binds annotates the unbound agent's Secret with its cluster's id, in
// lower case, as the hub does: the one write to an agent's Secret the
// watch expects.
func (sc *agentScenario) binds(t *testing.T) {
	id := strings.ToLower(agentWarehouse.ID())
	sc.w.Expect(sc.a.BindAgent(t, AgentSecretName(agentWarehouse.agent), id), "bind")
	sc.ids[agentWarehouse.agent], sc.served[agentWarehouse.agent] = id, agentWarehouse
	sc.a.Eventually(t, 30*time.Second, agentWarehouse.agent+" served and its Application made", func() error {
		return errors.Join(agentAnswer(sc.a, sc.served), agentApps(sc.a, sc.served))
	})
	if reason, listed, err := sc.a.Unserved(AgentAROSource, agentWarehouse.Name); err != nil || listed {
		t.Fatalf("/status still lists %s unserved (%q) or fails: %v", agentWarehouse.Name, reason, err)
	}
	agentResolves(t, agentWarehouse.agent, id)
}

// steady checks, through SteadyListings ARO listings and more, that the
// Applications keep their UIDs and that the answer, our Secrets and the
// unserved cluster stay as they are.
func (sc *agentScenario) steady(t *testing.T) {
	apps, err := sc.a.Apps()
	if err != nil {
		t.Fatal(err)
	}
	n0 := sc.a.Fake.AROListings()
	e.Holds(t, time.Duration(SteadyListings+1)*AgentInterval, "the agents' clusters, their Applications and our Secrets", func() error {
		now, err := sc.a.Apps()
		if err == nil && !maps.Equal(now, apps) {
			err = fmt.Errorf("Applications %+v, were %+v", now, apps)
		}
		return errors.Join(err, agentAnswer(sc.a, sc.served), agentOurSecrets(sc.a, sc.all),
			agentUnserved(sc.a, agentLab.Name, agentLab.ID(), "agent not registered"))
	})
	if n := sc.a.Fake.AROListings() - n0; n < SteadyListings {
		t.Fatalf("%d ARO listings, want %d", n, SteadyListings)
	}
}

func (sc *agentScenario) noCredentials(t *testing.T) {
	answer, err := sc.a.Answer()
	if err != nil {
		t.Fatal(err)
	}
	status, _, err := sc.a.Status()
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"the plugin answer": answer, "/status": status, "the log": sc.a.Log()} {
		for _, c := range sc.creds {
			if strings.Contains(text, c) {
				t.Errorf("%s holds a credential of an agent's Secret (%.12s…)", what, c)
			}
		}
	}
}

func (sc *agentScenario) untouched(t *testing.T) {
	if err := sc.w.Check(); err != nil {
		t.Fatal(err)
	}
}

// listsAgents checks that the watch's List saw every agent's Secret the
// test created.
func listsAgents(w *AgentSecretWatch, agents []string) error {
	var got []string
	for _, s := range w.Listed {
		got = append(got, s.Name)
	}
	for _, agent := range agents {
		if !slices.Contains(got, AgentSecretName(agent)) {
			return fmt.Errorf("the watch's List has %v, not %s", got, AgentSecretName(agent))
		}
	}
	return nil
}

// agentAnswer checks the plugin answer: for source aro, exactly the
// clusters of served (agent → cluster), each under its agent's name, its
// agent Secret's server verbatim, labelled with the agent, ready; for every
// source, those and the push cluster.
func agentAnswer(a *AgentEnv, served map[string]agentCluster) error {
	ps, err := a.Params(map[string]any{"source": AgentAROSource})
	if err != nil {
		return err
	}
	if !slices.Equal(Names(ps), Names(served)) {
		return fmt.Errorf("plugin answer for source %s: %v, want the bound agents %v", AgentAROSource, Names(ps), Names(served))
	}
	for agent := range served {
		p := ps[agent]
		switch {
		case p.Server != AgentServer(agent):
			return fmt.Errorf("plugin answer for %s: server %q, want its agent Secret's %q", agent, p.Server, AgentServer(agent))
		case p.Metadata.Labels[AgentLabel] != agent:
			return fmt.Errorf("plugin answer for %s: metadata.labels %v, want %s=%s", agent, p.Metadata.Labels, AgentLabel, agent)
		case p.Provider != "aro" || p.Phase != "ready" || p.State != "Succeeded":
			return fmt.Errorf("plugin answer for %s: provider %q phase %q state %q, want aro ready Succeeded", agent, p.Provider, p.Phase, p.State)
		}
	}
	all, err := a.Params(nil)
	if err != nil {
		return err
	}
	want := append(Names(served), agentPush.Name)
	slices.Sort(want)
	if !slices.Equal(Names(all), want) {
		return fmt.Errorf("plugin answer: %v, want %v", Names(all), want)
	}
	if p := all[agentPush.Name]; p.Server != agentPush.Server || p.Source != AgentPushSource || p.Metadata.Labels[AgentLabel] != "" {
		return fmt.Errorf("plugin answer for the push cluster: %+v, want source %s server %s, no agent label", p, AgentPushSource, agentPush.Server)
	}
	return nil
}

// agentUnserved checks that /status lists the ARO cluster name (its id
// id) unserved, its reason holding want and the id to bind.
func agentUnserved(a *AgentEnv, name, id, want string) error {
	reason, listed, err := a.Unserved(AgentAROSource, name)
	switch {
	case err != nil:
		return err
	case !listed:
		return fmt.Errorf("/status does not list %s unserved", name)
	case !strings.Contains(reason, want) || !strings.Contains(reason, strings.ToLower(id)):
		return fmt.Errorf("/status: %s unserved because %q, want %q and its id %s", name, reason, want, strings.ToLower(id))
	}
	return nil
}

// agentApps checks that the ApplicationSet has one Application per agent
// of served, in project default, targeting the agent by name (no server),
// labelled with the agent from the answer's metadata.labels.
func agentApps(a *AgentEnv, served map[string]agentCluster) error {
	apps, err := a.Apps()
	if err != nil {
		return err
	}
	var want []string
	for agent := range served {
		want = append(want, AgentAppName(agent))
	}
	slices.Sort(want)
	if !slices.Equal(Names(apps), want) {
		return fmt.Errorf("Applications %v, want %v", Names(apps), want)
	}
	for agent := range served {
		app := apps[AgentAppName(agent)]
		if app.DestName != agent || app.DestServer != "" || app.Project != "default" || app.Agent != agent {
			return fmt.Errorf("Application %s: %+v, want destination.name %s, no server, project default, label agent=%s", app.Name, app, agent, agent)
		}
	}
	return nil
}

// agentResolves checks that Argo CD's code resolves the destination name
// agent to the agent's Secret: its server, its labels (the agent's name)
// and annotations (skip-reconcile, and the hub's binding to id; Argo CD
// drops managed-by); and that the agent's Secret is the only cluster
// Secret with the agent's name or server.
func agentResolves(t *testing.T, agent, id string) {
	t.Helper()
	r := e.ArgoCDResolve(t, agent)
	switch {
	case !r.OK:
		t.Fatalf("Argo CD does not resolve %s: %s: %s", agent, r.Kind, r.Error)
	case r.Name != agent || r.Server != AgentServer(agent):
		t.Errorf("%s resolves to %s at %s, want the agent's Secret's server %s", agent, r.Name, r.Server, AgentServer(agent))
	case r.Labels[AgentLabel] != agent || r.Annotations["argocd.argoproj.io/skip-reconcile"] != "true" || r.Annotations[AgentClusterIDAnnotation] != id:
		t.Errorf("%s resolves to a cluster with labels %v, annotations %v: not the agent's Secret bound to %s", agent, r.Labels, r.Annotations, id)
	}
	secrets, err := e.ClusterSecrets()
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, s := range secrets {
		if string(s.Data["name"]) == agent || string(s.Data["server"]) == AgentServer(agent) {
			named = append(named, s.Name)
		}
	}
	if !slices.Equal(named, []string{AgentSecretName(agent)}) {
		t.Errorf("cluster Secrets with the name or the server of %s: %v, want only %s", agent, named, AgentSecretName(agent))
	}
}

// agentOurSecrets checks the deployment's Secrets: the push cluster's
// only, none with an agent's name, server, Secret name or label.
func agentOurSecrets(a *AgentEnv, agents []string) error {
	ours, err := a.Secrets()
	if err != nil {
		return err
	}
	push := StaticSecret(AgentPushSource, agentPush)
	if !slices.Equal(Names(ours), []string{push}) {
		return fmt.Errorf("our Secrets %v, want the push cluster's %s only", Names(ours), push)
	}
	if s := ours[push]; string(s.Data["server"]) != agentPush.Server || string(s.Data["name"]) != agentPush.Name {
		return fmt.Errorf("Secret %s: name %q server %q, want %s %s", push, s.Data["name"], s.Data["server"], agentPush.Name, agentPush.Server)
	}
	for _, s := range ours {
		for _, agent := range agents {
			if string(s.Data["name"]) == agent || string(s.Data["server"]) == AgentServer(agent) || s.Name == AgentSecretName(agent) || s.Labels[AgentLabel] != "" {
				return fmt.Errorf("our Secret %s (name %q, server %q, labels %v) is for agent %s", s.Name, s.Data["name"], s.Data["server"], s.Labels, agent)
			}
		}
	}
	return nil
}
