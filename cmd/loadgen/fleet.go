package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testca"
)

// The synthetic fleet: every cluster has a tenant, an environment, a region
// and a tier, as labels and fields, and a realistic CA (RSA 2048, the size
// EKS and AKS hand out): its own by default, as every EKS and AKS cluster
// has, so that memory is measured with the caData a real inventory holds.
var (
	tenantCount = 20
	envs        = []string{"prod", "staging", "dev"}
	regions     = []string{"eu-west-1", "eu-central-1", "us-east-1", "westeurope"}
	tiers       = []string{"gold", "silver", "bronze"}
	// sourceNames split the fleet in two static sources.
	sourceNames = []string{"load-a", "load-b"}
)

type cluster struct {
	name, server, source, tenant, env, region, tier string
}

func tenantName(i int) string { return fmt.Sprintf("tenant-%02d", i) }

func fleet(n int) []cluster {
	out := make([]cluster, n)
	for i := range out {
		out[i] = fleetCluster(i)
	}
	return out
}

// fleetCluster is the fleet's cluster i: fleet(n) holds clusters 0 to
// n-1, and fleetCluster(n) is the one a change adds to it.
func fleetCluster(i int) cluster {
	c := cluster{
		tenant: tenantName(i % tenantCount), env: envs[i%len(envs)], region: regions[i%len(regions)],
		tier: tiers[(i/7)%len(tiers)], source: sourceNames[i%len(sourceNames)],
	}
	c.name = fmt.Sprintf("%s-%s-%06d", c.tenant, c.env, i)
	c.server = fmt.Sprintf("https://c%06d.k8s.cluster-discovery.invalid", i)
	return c
}

// input is one kind of request body and the clusters its answer must hold.
type input struct {
	kind  string // all, tenant, selector, source
	body  []byte
	match func(*cluster) bool
	// want is the number of parameter sets in the answer; size and sum
	// are the length and CRC-32C of the verified answer, which every
	// answer under load must have.
	want, size int
	sum        uint32
}

// inputs are the request bodies the connections cycle through, as Argo CD's
// plugin generator sends them: every cluster, each tenant, a label selector
// (alone and with a tenant) and one source.
func inputs() []*input {
	body := func(params string) []byte {
		return []byte(`{"applicationSetName":"load","input":{"parameters":` + params + "}}\n")
	}
	ins := []*input{{kind: "all", body: []byte(`{"applicationSetName":"load","input":{}}` + "\n"), match: func(*cluster) bool { return true }}}
	for t := range tenantCount {
		name := tenantName(t)
		ins = append(ins, &input{kind: "tenant", body: body(`{"tenant":"` + name + `"}`), match: func(c *cluster) bool { return c.tenant == name }})
	}
	prodOrStaging := func(c *cluster) bool { return (c.env == "prod" || c.env == "staging") && c.tier != "bronze" }
	ins = append(ins,
		&input{kind: "selector", body: body(`{"labelSelector":"env in (prod,staging),tier!=bronze"}`), match: prodOrStaging},
		&input{kind: "selector", body: body(`{"tenant":"tenant-03","labelSelector":"env=prod,region notin (us-east-1)"}`),
			match: func(c *cluster) bool { return c.tenant == "tenant-03" && c.env == "prod" && c.region != "us-east-1" }},
		&input{kind: "source", body: body(`{"source":"load-b","provider":"static"}`), match: func(c *cluster) bool { return c.source == "load-b" }},
	)
	return ins
}

// kinds lists the input kinds in report order.
func kinds(ins []*input) []string {
	var out []string
	for _, in := range ins {
		if !slices.Contains(out, in.kind) {
			out = append(out, in.kind)
		}
	}
	return out
}

// writeService writes the clusters files (caData by cluster, see newCAs),
// the token and the configuration into dir and returns the configuration's
// path. extra is appended to the configuration (the secrets sections).
func writeService(dir string, cs []cluster, caData []string, listen, token, extra string) (string, error) {
	for _, src := range sourceNames {
		if err := writeClusters(filepath.Join(dir, src+".yaml"), cs, src, caData); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600); err != nil {
		return "", err
	}
	return writeConfig(filepath.Join(dir, "config.yaml"), listen, extra)
}

// writeConfig writes the service's configuration to path: the fleet's
// sources as writeService wrote them, the listen address and extra.
func writeConfig(path, listen, extra string) (string, error) {
	cfg := fmt.Sprintf(`log: {level: info, format: json}
server:
  listen: %q
  tokens: [{file: token}]
sources:
`, listen)
	for _, src := range sourceNames {
		cfg += fmt.Sprintf("  - {name: %s, provider: static, static: {file: %s.yaml}}\n", src, src)
	}
	return path, os.WriteFile(path, []byte(cfg+extra), 0o600)
}

func writeClusters(path string, cs []cluster, source string, caData []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "clusters:")
	for i := range cs {
		if cs[i].source == source {
			writeCluster(w, &cs[i], caData[i])
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeCluster writes c, with caData, as an item of a clusters file's
// list.
func writeCluster(w io.Writer, c *cluster, caData string) {
	fmt.Fprintf(w, `  - name: %s
    server: %s
    caData: %s
    tenant: %s
    project: %s
    region: %s
    account: "111111111111"
    kubernetesVersion: v1.31.4
    labels: {tenant: %s, env: %s, region: %s, tier: %s}
    annotations: {owner: team-%s@example.com}
    auth: {aws: {clusterName: %s, roleARN: "arn:aws:iam::111111111111:role/argocd", region: %s}}
`, c.name, c.server, caData, c.tenant, c.tenant, c.region, c.tenant, c.env, c.region, c.tier, c.tenant, c.name, c.region)
}

// newCAs returns the base64 caData of n clusters: n distinct self-signed
// RSA 2048 CA certificates (distinct serial, subject and bytes; one key
// signs them all, since 10,000 RSA keys would take minutes to generate), or
// one certificate n times when distinct is false.
func newCAs(n int, distinct bool) ([]string, error) {
	signer, err := testca.NewSigner()
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	if !distinct {
		der, err := signer.DER(1)
		for i := range out {
			out[i] = testca.CAData(der)
		}
		return out, err
	}
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range out {
		g.Go(func() error {
			der, err := signer.DER(int64(i + 1))
			out[i] = testca.CAData(der)
			return err
		})
	}
	return out, g.Wait()
}
