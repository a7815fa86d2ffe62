package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
)

// installationID identifies this installation in the tokens a source
// mints for it: the uid of the ServiceAccount the process runs as (the
// chart creates one per release, and a reinstall a new one), as the API
// server says through a SelfSubjectReview, which every authenticated user
// may create. A user without a uid (a client certificate, outside a pod)
// falls back to the namespace's name, logged. An API that cannot answer is
// an error, not a fallback: tokens minted under another name than the
// ServiceAccount's would be left behind by the next process and by the
// uninstall hook.
func installationID(client kubeclient.Interface, namespace string, logger *slog.Logger) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("read who this process is (a SelfSubjectReview, authentication.k8s.io/v1 from Kubernetes 1.28, which names this installation in the tokens it mints): %w", err)
	}
	if uid := string(r.Status.UserInfo.UID); markerSafe(uid) {
		return uid, nil
	}
	logger.Warn("the Kubernetes user has no uid; tokens minted for clusters name this installation by its namespace", "installation", "ns."+namespace)
	return "ns." + namespace, nil
}

// markerSafe reports whether v can stand in a token's marker.
func markerSafe(v string) bool {
	if v == "" || len(v) > 128 {
		return false
	}
	for _, r := range v {
		if r <= ' ' || r == '=' || r == 0x7f {
			return false
		}
	}
	return true
}
