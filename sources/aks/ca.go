package aks

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// caEntry is what the cache knows of one cluster's CA: the last
// successful read (ca, zero if none) and the last failed read since
// (failed, zero if none, with the reason).
type caEntry struct {
	ca      sources.CA
	fetched time.Time
	failed  time.Time
	reason  string
}

// caTTL is the TTL of one cluster's CA: between 80% and 100% of ttl, fixed
// per cluster, so that the reads of clusters first seen together spread
// out instead of coming back as one burst every ttl.
func caTTL(ttl time.Duration, id string) time.Duration {
	sum := sha256.Sum256([]byte(id))
	frac := float64(binary.BigEndian.Uint32(sum[:4])) / (1 << 32)
	return ttl - time.Duration(float64(ttl)*0.2*frac)
}

// caFromCredentials returns the CA of the user
// kubeconfig returned by listClusterUserCredential. The SDK has already
// decoded the kubeconfig from base64. The kubeconfig may hold credentials
// (for clusters with local accounts): it is parsed here and dropped, and
// no error quotes it.
func caFromCredentials(res armcontainerservice.CredentialResults) (sources.CA, error) {
	var raw []byte
	for _, kc := range res.Kubeconfigs {
		if kc != nil && len(kc.Value) > 0 {
			raw = kc.Value
			break
		}
	}
	if raw == nil {
		return sources.CA{}, errors.New("the response holds no kubeconfig")
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		// The parser's message may quote the input; leave it out.
		return sources.CA{}, errors.New("the kubeconfig does not parse")
	}
	clusterName := ""
	if ctx, ok := cfg.Contexts[cfg.CurrentContext]; ok && ctx != nil {
		clusterName = ctx.Cluster
	} else if len(cfg.Clusters) == 1 {
		for name := range cfg.Clusters {
			clusterName = name
		}
	}
	cluster, ok := cfg.Clusters[clusterName]
	if !ok || cluster == nil {
		return sources.CA{}, errors.New("the kubeconfig names no cluster")
	}
	if len(cluster.CertificateAuthorityData) == 0 {
		return sources.CA{}, errors.New("the kubeconfig has no certificate-authority-data")
	}
	ca, err := sources.ParsePEMCA(cluster.CertificateAuthorityData)
	if err != nil {
		return sources.CA{}, fmt.Errorf("certificate-authority-data: %w", err)
	}
	return ca, nil
}
