// Package e2e is the end-to-end suite (tests only): envtest's real
// kube-apiserver and etcd with Argo CD's CRDs, Argo CD's real
// argocd-applicationset-controller (v3.2.12, from bin/testbin), and our
// service as a built binary fed by fakes of the upstreams at the HTTP level
// (Rancher's /v3 and its tokens, EKS, STS, ARM, Entra ID) and by static
// sources; Argo CD's own client code (argocd-cluster-check,
// argocd-k8s-auth) proves the Secrets connect. Every scenario asserts on
// Applications and Secrets in the API server.
//
// This package holds the scenarios only: TestMain, the Test functions, the
// steps they run and their data. The harness they share is the package
// fixture (cmd/e2e/fixture), the fakes of the upstreams are the packages
// of internal/fake.
//
//	make e2e        # this suite alone, verbose
//	make test       # every package, this one included
//
// Missing binaries fail the run; `make testbin` builds them.
package e2e
