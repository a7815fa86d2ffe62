package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"

	fakeaws "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/aws"
	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
)

// The fake clouds of TestCloudLifecycle, the shared fakes of
// internal/fake: one account and region of EKS (with its Resource Groups
// Tagging API) over plain HTTP, and Azure Resource Manager over TLS, with
// an App Service managed identity endpoint that hands out the ARM token.
// Answers are built from the upstream fixtures in testdata/fixtures, with
// the fleet's names and states.
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

// cloudAKSCluster is an AKS managed cluster as ARM lists it (the shared
// fake's), with the fleet's tags.
type cloudAKSCluster = fakeazure.ManagedCluster

type fakeCloud struct {
	aws    *fakeaws.Server
	arm    *fakeazure.ARM
	caFile string
	// clusterCA is every cluster's CA (PEM): the clusterFront's
	clusterCA []byte
}

func newFakeCloud(dir string, clusterCA []byte) (*fakeCloud, error) {
	f := &fakeCloud{clusterCA: clusterCA}
	var err error
	if f.aws, err = fakeaws.New(filepath.Join(cloudFixturesDir, "eks")); err != nil {
		return nil, err
	}
	// only the service's key is known; a describe that races a removal
	// still answers, so that no listing fails and every counted listing
	// completes
	f.aws.KnownKeysOnly, f.aws.DescribeRemoved = true, true
	f.aws.SetKey(cloudAWSKeyID, cloudAWSAccount)
	if f.arm, err = fakeazure.NewARM(filepath.Join(cloudFixturesDir, "aks"), true); err != nil {
		f.aws.Close()
		return nil, err
	}
	// the App Service managed identity hands out the one ARM token, and
	// the user credentials name the clusters' front and its CA
	f.arm.RequireToken(cloudARMToken)
	f.arm.ManagedIdentity(cloudMIHeader)
	f.arm.SetCredentialCA(clusterCA)
	// the service trusts the ARM fake's certificate through SSL_CERT_FILE
	f.caFile = filepath.Join(dir, "arm-ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.arm.Certificate().Certificate[0]})
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
	for i := range set {
		set[i].Tags = map[string]string{"tenant": cloudTenant, "env": "e2e"}
	}
	return f.arm.SetClusters(set...)
}

// SetSubscriptions sets the subscriptions ARM lists and returns the count
// of subscription lists answered so far.
func (f *fakeCloud) SetSubscriptions(subs ...string) int { return f.arm.SetSubscriptions(subs, nil) }

// EKSListings and AKSListings count the listings begun: ListClusters and
// subscription lists answered.
func (f *fakeCloud) EKSListings() int { return f.aws.Count("ListClusters") }

func (f *fakeCloud) AKSListings() int { return f.arm.SubscriptionLists() }

// BadAuth returns the requests that came without the expected credentials,
// and how many ARM tokens the managed identity endpoint handed out.
func (f *fakeCloud) BadAuth() ([]string, int) {
	bad, tokens := f.arm.BadAuth()
	return append(f.aws.BadAuth(), bad...), tokens
}
