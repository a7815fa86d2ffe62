package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
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
)

// The fake clouds of TestCloudLifecycle: one account and region of EKS
// (with its Resource Groups Tagging API) over plain HTTP, and Azure
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

func (c cloudEKSCluster) arn() string {
	return fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", cloudAWSRegion, cloudAWSAccount, c.Name)
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
	aws, arm *httptest.Server
	caFile   string
	// clusterCA is every cluster's CA (PEM): the clusterFront's
	clusterCA []byte

	describeFixture map[string]any
	aksFixture      map[string]any
	subFixture      map[string]any
	credentials     []byte

	mu sync.Mutex
	// eks: listed clusters by name; described: every cluster ever listed
	// (a describe that races a removal still answers, so that no listing
	// fails and every counted listing completes)
	eks       map[string]cloudEKSCluster
	described map[string]cloudEKSCluster
	eksLists  int
	// subs: the subscriptions GET /subscriptions lists; aks: clusters by
	// subscription, answered whether or not the subscription is listed
	subs      []string
	aks       map[string][]cloudAKSCluster
	aksLists  int
	badAuth   []string // requests that came without the expected credentials
	tokenReqs int
}

func newFakeCloud(dir string, clusterCA []byte) (*fakeCloud, error) {
	f := &fakeCloud{clusterCA: clusterCA, eks: map[string]cloudEKSCluster{}, described: map[string]cloudEKSCluster{}, aks: map[string][]cloudAKSCluster{}}
	read := func(path string, into any) error {
		b, err := os.ReadFile(filepath.Join(cloudFixturesDir, path))
		if err != nil {
			return err
		}
		return json.Unmarshal(b, into)
	}
	var describe struct {
		Cluster map[string]any `json:"cluster"`
	}
	if err := read("eks/eks-describe-cluster.json", &describe); err != nil {
		return nil, err
	}
	f.describeFixture = describe.Cluster
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
	f.aws = httptest.NewServer(http.HandlerFunc(f.serveAWS))
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
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range set {
		f.eks[c.Name], f.described[c.Name] = c, c
	}
	for _, n := range remove {
		delete(f.eks, n)
	}
	return f.eksLists
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
func (f *fakeCloud) EKSListings() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.eksLists
}

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
	return slices.Clone(f.badAuth), f.tokenReqs
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// serveAWS answers ListClusters, DescribeCluster and GetResources as the
// SDK calls them.
func (f *fakeCloud) serveAWS(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !strings.Contains(r.Header.Get("Authorization"), "Credential="+cloudAWSKeyID+"/") {
		f.badAuth = append(f.badAuth, r.Method+" "+r.URL.Path)
		writeJSON(w, http.StatusForbidden, "application/json", map[string]string{"message": "The security token included in the request is invalid."})
		return
	}
	const restJSON = "application/json"
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/clusters":
		f.eksLists++
		writeJSON(w, http.StatusOK, restJSON, map[string]any{"clusters": slices.Sorted(maps.Keys(f.eks))})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/clusters/"):
		name := strings.TrimPrefix(r.URL.Path, "/clusters/")
		c, ok := f.described[name]
		if !ok {
			w.Header().Set("X-Amzn-Errortype", "ResourceNotFoundException")
			writeJSON(w, http.StatusNotFound, restJSON, map[string]string{"message": "No cluster found for name: " + name + "."})
			return
		}
		d := maps.Clone(f.describeFixture)
		d["name"], d["arn"], d["endpoint"], d["status"] = c.Name, c.arn(), c.server(), c.Status
		d["certificateAuthority"] = map[string]any{"data": base64.StdEncoding.EncodeToString(f.clusterCA)}
		vpc := maps.Clone(d["resourcesVpcConfig"].(map[string]any))
		vpc["endpointPublicAccess"] = true
		d["resourcesVpcConfig"] = vpc
		writeJSON(w, http.StatusOK, restJSON, map[string]any{"cluster": d})
	case r.Method == http.MethodPost && r.URL.Path == "/" && r.Header.Get("X-Amz-Target") == "ResourceGroupsTaggingAPI_20170126.GetResources":
		_, _ = io.Copy(io.Discard, r.Body)
		var list []map[string]any
		for _, n := range slices.Sorted(maps.Keys(f.eks)) {
			tags := []map[string]string{{"Key": "tenant", "Value": cloudTenant}, {"Key": "env", "Value": "e2e"}}
			if r := f.eks[n].RoleTag; r != "" {
				tags = append(tags, map[string]string{"Key": "argocd-role-arn", "Value": r})
			}
			list = append(list, map[string]any{"ResourceARN": f.eks[n].arn(), "Tags": tags})
		}
		writeJSON(w, http.StatusOK, "application/x-amz-json-1.1", map[string]any{"PaginationToken": "", "ResourceTagMappingList": list})
	default:
		writeJSON(w, http.StatusNotFound, restJSON, map[string]string{"message": "no route " + r.Method + " " + r.URL.Path})
	}
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
