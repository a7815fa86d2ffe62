package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	fakeaws "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/aws"
)

// The fake clouds of TestCloudLifecycle: one account and region of EKS
// (with its Resource Groups Tagging API) over plain HTTP, the shared fake
// of internal/fake/aws, and Azure
// Resource Manager over TLS, with an App Service managed identity endpoint
// that hands out the ARM token. Answers are built from the upstream
// fixtures in testdata/fixtures, with the fleet's names and states.
const (
	cloudAWSAccount  = "123456789012"
	cloudAWSRegion   = "eu-west-1"
	cloudARMToken    = "e2e-cloud-arm-access-token-51f0c7"
	cloudMIHeader    = "e2e-cloud-identity-header-2d9a"
	cloudAWSKeyID    = "AKIDE2ECLOUDEXAMPLE"
	cloudAWSSecret   = "e2eCloudSecretAccessKeyEXAMPLEKEY0123456"
	cloudTenant      = "cloudco"
	cloudFixturesDir = "../../testdata/fixtures"
)

// cloudEKSCluster is an EKS cluster as the fake lists and describes it;
// RoleTag is its argocd-role-arn tag, if any.
type cloudEKSCluster struct {
	Name, Status, RoleTag string
}

// server is the endpoint DescribeCluster reports, unique per name.
func (c cloudEKSCluster) server() string {
	sum := sha256.Sum256([]byte(c.Name))
	return "https://" + strings.ToUpper(hex.EncodeToString(sum[:16])) + ".gr7." + cloudAWSRegion + ".eks.amazonaws.com"
}

// cloudAKSCluster is an AKS managed cluster as ARM lists it. Its Entra ID
// integration is AKS-managed, in Tenant (the fixture's when empty), or,
// with a LegacyServerApp, legacy with that server application.
type cloudAKSCluster struct {
	Sub, RG, Name            string
	Provisioning, PowerState string
	Tenant, LegacyServerApp  string
}

// id is the ARM resource id as ARM spells it; the source's identity is
// its lower-case form.
func (c cloudAKSCluster) id() string {
	return "/subscriptions/" + c.Sub + "/resourcegroups/" + c.RG + "/providers/Microsoft.ContainerService/managedClusters/" + c.Name
}

func (c cloudAKSCluster) fqdn() string { return c.Name + "-dns-5f3c1a9e.hcp.westeurope.azmk8s.io" }

// server is the cluster's server as the source renders it.
func (c cloudAKSCluster) server() string { return "https://" + c.fqdn() + ":443" }

type fakeCloud struct {
	aws    *fakeaws.Server
	arm    *httptest.Server
	caFile string
	// clusterCA is every cluster's CA (PEM): the clusterFront's
	clusterCA []byte

	aksFixture  map[string]any
	subFixture  map[string]any
	credentials []byte

	mu sync.Mutex
	// subs: the subscriptions GET /subscriptions lists; aks: clusters by
	// subscription, answered whether or not the subscription is listed
	subs      []string
	aks       map[string][]cloudAKSCluster
	aksLists  int
	badAuth   []string // requests that came without the expected credentials
	tokenReqs int
}

func newFakeCloud(dir string, clusterCA []byte) (*fakeCloud, error) {
	f := &fakeCloud{clusterCA: clusterCA, aks: map[string][]cloudAKSCluster{}}
	read := func(path string, into any) error {
		b, err := os.ReadFile(filepath.Join(cloudFixturesDir, path))
		if err != nil {
			return err
		}
		return json.Unmarshal(b, into)
	}
	var clusters, subs struct {
		Value []map[string]any `json:"value"`
	}
	if err := read("aks/aks-managed-clusters-list.json", &clusters); err != nil {
		return nil, err
	}
	if err := read("aks/azure-subscriptions-list.json", &subs); err != nil {
		return nil, err
	}
	f.aksFixture, f.subFixture = clusters.Value[0], subs.Value[0]
	var err error
	if f.credentials, err = os.ReadFile(filepath.Join(cloudFixturesDir, "aks", "aks-list-cluster-user-credentials.json")); err != nil {
		return nil, err
	}
	if f.aws, err = fakeaws.New(filepath.Join(cloudFixturesDir, "eks")); err != nil {
		return nil, err
	}
	// only the service's key is known; a describe that races a removal
	// still answers, so that no listing fails and every counted listing
	// completes
	f.aws.KnownKeysOnly, f.aws.DescribeRemoved = true, true
	f.aws.SetKey(cloudAWSKeyID, cloudAWSAccount)
	f.arm = httptest.NewTLSServer(http.HandlerFunc(f.serveARM))
	// the service trusts the ARM fake's certificate through SSL_CERT_FILE
	f.caFile = filepath.Join(dir, "arm-ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.arm.Certificate().Raw})
	if err := os.WriteFile(f.caFile, ca, 0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (f *fakeCloud) Close() {
	f.aws.Close()
	f.arm.Close()
}

// SetEKS lists these clusters (and describes them with their status);
// remove takes names out of ListClusters. It returns the count of
// ListClusters answered so far: listings counted above it see the change.
func (f *fakeCloud) SetEKS(set []cloudEKSCluster, remove ...string) int {
	for _, c := range set {
		tags := map[string]string{"tenant": cloudTenant, "env": "e2e"}
		if c.RoleTag != "" {
			tags["argocd-role-arn"] = c.RoleTag
		}
		f.aws.Set(cloudAWSAccount, cloudAWSRegion, fakeaws.Cluster{Name: c.Name, Status: c.Status, Tags: tags,
			Endpoint: c.server(), CAData: base64.StdEncoding.EncodeToString(f.clusterCA)})
	}
	return f.aws.Remove(cloudAWSAccount, cloudAWSRegion, remove...)
}

// SetAKS replaces the clusters of the subscriptions of set (each keeps the
// others of its subscription) and returns the count of subscription lists
// answered so far.
func (f *fakeCloud) SetAKS(set ...cloudAKSCluster) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range set {
		list := slices.DeleteFunc(f.aks[c.Sub], func(o cloudAKSCluster) bool { return o.Name == c.Name })
		f.aks[c.Sub] = append(list, c)
	}
	return f.aksLists
}

// SetSubscriptions sets the subscriptions ARM lists and returns the count
// of subscription lists answered so far.
func (f *fakeCloud) SetSubscriptions(subs ...string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs = slices.Clone(subs)
	return f.aksLists
}

// EKSListings and AKSListings count the listings begun: ListClusters and
// subscription lists answered.
func (f *fakeCloud) EKSListings() int { return f.aws.Count("ListClusters") }

func (f *fakeCloud) AKSListings() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.aksLists
}

// BadAuth returns the requests that came without the expected credentials,
// and how many ARM tokens the managed identity endpoint handed out.
func (f *fakeCloud) BadAuth() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append(f.aws.BadAuth(), f.badAuth...), f.tokenReqs
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// serveARM answers the managed identity token request, the subscription
// list, the managed cluster lists and listClusterUserCredential.
func (f *fakeCloud) serveARM(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	const armJSON = "application/json; charset=utf-8"
	armError := func(status int, code, msg string) {
		writeJSON(w, status, armJSON, map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	if r.URL.Path == "/msi/token" {
		// App Service managed identity (IDENTITY_ENDPOINT, IDENTITY_HEADER)
		if r.Header.Get("X-Identity-Header") != cloudMIHeader || r.URL.Query().Get("resource") == "" {
			f.badAuth = append(f.badAuth, r.Method+" "+r.URL.String())
			writeJSON(w, http.StatusUnauthorized, armJSON, map[string]any{"error": "invalid_request"})
			return
		}
		f.tokenReqs++
		writeJSON(w, http.StatusOK, armJSON, map[string]any{
			"access_token": cloudARMToken, "token_type": "Bearer", "resource": r.URL.Query().Get("resource"),
			"expires_on": fmt.Sprint(time.Now().Add(time.Hour).Unix()), "client_id": r.URL.Query().Get("client_id"),
		})
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+cloudARMToken {
		f.badAuth = append(f.badAuth, r.Method+" "+r.URL.Path)
		armError(http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid.")
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/subscriptions":
		f.aksLists++
		var list []map[string]any
		for i, id := range f.subs {
			s := maps.Clone(f.subFixture)
			s["id"], s["subscriptionId"], s["displayName"], s["state"] = "/subscriptions/"+id, id, fmt.Sprintf("e2e-sub-%d", i), "Enabled"
			list = append(list, s)
		}
		writeJSON(w, http.StatusOK, armJSON, map[string]any{"value": list})
	case r.Method == http.MethodGet && len(parts) == 5 && parts[0] == "subscriptions" && parts[4] == "managedClusters":
		var list []map[string]any
		for _, c := range f.aks[strings.ToLower(parts[1])] {
			list = append(list, f.aksCluster(c))
		}
		writeJSON(w, http.StatusOK, armJSON, map[string]any{"value": list})
	case r.Method == http.MethodPost && len(parts) == 9 && parts[8] == "listClusterUserCredential":
		if !slices.ContainsFunc(f.aks[strings.ToLower(parts[1])], func(c cloudAKSCluster) bool { return strings.EqualFold(c.Name, parts[7]) }) {
			armError(http.StatusNotFound, "ResourceNotFound", "The Resource 'Microsoft.ContainerService/managedClusters/"+parts[7]+"' was not found.")
			return
		}
		b, err := f.userCredential(parts[7])
		if err != nil {
			armError(http.StatusInternalServerError, "InternalServerError", err.Error())
			return
		}
		w.Header().Set("Content-Type", armJSON)
		_, _ = w.Write(b)
	default:
		armError(http.StatusNotFound, "NotFound", "no route "+r.Method+" "+r.URL.Path)
	}
}

// aksCluster is the fixture's first cluster moved to c's subscription,
// resource group and name, in c's states, with the fleet's tags.
func (f *fakeCloud) aksCluster(c cloudAKSCluster) map[string]any {
	mc := maps.Clone(f.aksFixture)
	mc["id"], mc["name"] = c.id(), c.Name
	mc["tags"] = map[string]string{"tenant": cloudTenant, "env": "e2e"}
	props := maps.Clone(mc["properties"].(map[string]any))
	props["provisioningState"] = c.Provisioning
	props["powerState"] = map[string]any{"code": c.PowerState}
	props["fqdn"] = c.fqdn()
	props["azurePortalFQDN"] = c.Name + "-dns-5f3c1a9e.portal.hcp.westeurope.azmk8s.io"
	aad := maps.Clone(props["aadProfile"].(map[string]any))
	if c.Tenant != "" {
		aad["tenantID"] = c.Tenant
	}
	if c.LegacyServerApp != "" {
		aad["managed"], aad["serverAppID"] = false, c.LegacyServerApp
	}
	props["aadProfile"] = aad
	mc["properties"] = props
	return mc
}

// kubeconfigCA and kubeconfigServer are the lines of the fixture's
// kubeconfig that userCredential rewrites.
var (
	kubeconfigCA     = regexp.MustCompile(`(?m)^(\s*certificate-authority-data: ).*$`)
	kubeconfigServer = regexp.MustCompile(`(?m)^(\s*server: ).*$`)
)

// userCredential is listClusterUserCredential's answer for cluster name:
// the fixture's, its kubeconfig naming the cluster's server and CA.
func (f *fakeCloud) userCredential(name string) ([]byte, error) {
	var creds struct {
		Kubeconfigs []struct {
			Name  string `json:"name"`
			Value []byte `json:"value"`
		} `json:"kubeconfigs"`
	}
	if err := json.Unmarshal(f.credentials, &creds); err != nil || len(creds.Kubeconfigs) == 0 {
		return nil, fmt.Errorf("the credentials fixture: %v", err) //nolint:errorlint // err is nil when the list is empty
	}
	kc := string(creds.Kubeconfigs[0].Value)
	kc = kubeconfigCA.ReplaceAllString(kc, "${1}"+base64.StdEncoding.EncodeToString(f.clusterCA))
	c := cloudAKSCluster{Name: name}
	kc = kubeconfigServer.ReplaceAllString(kc, "${1}"+c.server())
	creds.Kubeconfigs[0].Value = []byte(kc)
	return json.Marshal(creds)
}
