// Command argocd-k8s-auth is Argo CD's argocd-k8s-auth, the exec credential
// plugin that Argo CD runs for a cluster Secret's awsAuthConfig (aws) and
// execProviderConfig (aws, gcp, azure): it prints a
// client.authentication.k8s.io/v1beta1 ExecCredential.
//
//	argocd-k8s-auth aws --cluster-name NAME [--role-arn ARN] [--profile P]
//	argocd-k8s-auth gcp
//	argocd-k8s-auth azure
//
// Argo CD ships it as a name of its multi-call binary: its cmd/main.go runs
// this command when the binary is called argocd-k8s-auth. This main does
// what that branch does (klog through Argo CD's logger, errors and usage
// silenced, exit 1 on error) without linking the other commands.
//
// .ci/testbin (component argocd) builds it in the scratch module of Argo
// CD's ApplicationSet controller; this directory is outside the project's
// module (the go tool ignores directories starting with a dot).
package main

import (
	"os"

	"k8s.io/klog/v2"

	k8sauth "github.com/argoproj/argo-cd/v3/cmd/argocd-k8s-auth/commands"
	"github.com/argoproj/argo-cd/v3/util/log"
)

func main() {
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
	command := k8sauth.NewCommand()
	command.SilenceErrors = true
	command.SilenceUsage = true
	if err := command.Execute(); err != nil {
		_, _ = os.Stderr.WriteString("argocd-k8s-auth: " + err.Error() + "\n")
		os.Exit(1)
	}
}
