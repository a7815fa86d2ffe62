package aks

import (
	"cmp"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
)

// AuthConfig describes the execProviderConfig of the clusters' Secrets:
// Argo CD runs `argocd-k8s-auth azure` with these environment variables.
// Every value is configuration (ids, paths, hosts); secrets such as a
// client secret or a password cannot be set here. A login method that
// needs one (spn with a secret, ropc) reads it from the environment of the
// Argo CD application controller.
type AuthConfig struct {
	// LoginMethod is AAD_LOGIN_METHOD: workloadidentity (default), msi,
	// spn, azurecli or ropc. devicecode is interactive and rejected.
	LoginMethod string `json:"loginMethod,omitempty"`
	// ClientID is AZURE_CLIENT_ID, the identity of the Argo CD controller.
	ClientID string `json:"clientID,omitempty"`
	// TenantID is AZURE_TENANT_ID for clusters whose aadProfile names no
	// tenant; a cluster's aadProfile.tenantID wins (see identityOf).
	TenantID string `json:"tenantID,omitempty"`
	// FederatedTokenFile is AZURE_FEDERATED_TOKEN_FILE. It is read by
	// argocd-k8s-auth in Argo CD's pod, not by this service, so it must be
	// an absolute path there (SetDirectory leaves it alone).
	FederatedTokenFile string `json:"federatedTokenFile,omitempty"`
	// AuthorityHost is AZURE_AUTHORITY_HOST.
	AuthorityHost string `json:"authorityHost,omitempty"`
	// Environment is AAD_ENVIRONMENT_NAME (e.g. AzurePublicCloud); it
	// defaults to AzureChinaCloud or AzureUSGovernmentCloud with those clouds.
	Environment string `json:"environment,omitempty"`
	// ServerApplicationID is AAD_SERVER_APPLICATION_ID for clusters with
	// AKS-managed Entra ID integration; empty leaves argocd-k8s-auth's
	// default, the AKS server application. Legacy clusters use their own
	// aadProfile.serverAppID (see identityOf).
	ServerApplicationID string `json:"serverApplicationID,omitempty"`
	// Env holds further non-secret variables, e.g.
	// AZURE_CLIENT_CERTIFICATE_PATH. The fields above, and the cluster's
	// own tenant and server application, win over it.
	Env map[string]string `json:"env,omitempty"`
	// Command defaults to argocd-k8s-auth.
	Command string `json:"command,omitempty"`
	// APIVersion defaults to client.authentication.k8s.io/v1beta1.
	APIVersion string `json:"apiVersion,omitempty"`
}

var loginMethods = []string{"workloadidentity", "msi", "spn", "azurecli", "ropc"}

// aadEnvironments is AAD_ENVIRONMENT_NAME for the clouds where kubelogin's
// default (AzurePublicCloud) is wrong.
var aadEnvironments = map[string]string{
	"AzureChina":      "AzureChinaCloud",
	"AzureGovernment": "AzureUSGovernmentCloud",
}

var (
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// secretEnvRE matches variable names that hold secret values.
	secretEnvRE = regexp.MustCompile(`SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|(^|_)KEY($|_)`)
)

// secretEnvAllowed are variables whose names look secret but hold a path or
// a flag.
var secretEnvAllowed = map[string]bool{
	"AZURE_FEDERATED_TOKEN_FILE": true,
	"AAD_IS_POP_TOKEN_ENABLED":   true,
	"AAD_POP_TOKEN_CLAIMS":       true,
}

// validate returns the problems of the auth section under path. No error
// quotes the value of an env variable.
func (a AuthConfig) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.FederatedTokenFile != "" && !filepath.IsAbs(a.FederatedTokenFile) {
		errs = append(errs, field.Invalid(path.Child("federatedTokenFile"), a.FederatedTokenFile, "must be absolute: argocd-k8s-auth reads it in Argo CD's pod"))
	}
	switch {
	case a.LoginMethod == "devicecode":
		errs = append(errs, field.Invalid(path.Child("loginMethod"), a.LoginMethod, "interactive: it cannot work in the Argo CD controller"))
	case !slices.Contains(loginMethods, a.LoginMethod):
		errs = append(errs, field.NotSupported(path.Child("loginMethod"), a.LoginMethod, loginMethods))
	}
	errs = azurearm.AppendGUID(errs, path.Child("clientID"), a.ClientID)
	errs = azurearm.AppendGUID(errs, path.Child("tenantID"), a.TenantID)
	errs = azurearm.AppendGUID(errs, path.Child("serverApplicationID"), a.ServerApplicationID)
	if a.AuthorityHost != "" && !azurearm.IsHTTPSURL(a.AuthorityHost) {
		errs = append(errs, field.Invalid(path.Child("authorityHost"), azurearm.RedactURL(a.AuthorityHost), "must be an https URL without user info"))
	}
	if a.Command == "" || strings.ContainsFunc(a.Command, isBadNameRune) {
		errs = append(errs, field.Invalid(path.Child("command"), a.Command, "must be a command name without spaces"))
	}
	for _, k := range sortedKeys(a.Env) {
		p := path.Child("env").Key(k)
		switch {
		case !envKeyRE.MatchString(k):
			errs = append(errs, field.Invalid(p, field.OmitValueType{}, "not an environment variable name"))
		case isSecretEnv(k):
			errs = append(errs, field.Forbidden(p, "holds a secret; set it in the Argo CD controller's environment, not in cluster Secrets"))
		case strings.ContainsAny(a.Env[k], "\x00\r\n"):
			errs = append(errs, field.Invalid(p, field.OmitValueType{}, "must be one line"))
		}
	}
	return errs
}

func isSecretEnv(k string) bool {
	k = strings.ToUpper(k)
	return secretEnvRE.MatchString(k) && !secretEnvAllowed[k]
}

// execProvider returns a fresh execProviderConfig for a cluster with this
// identity; its empty fields keep the configured values.
func (a AuthConfig) execProvider(id aadIdentity) *sources.ExecProvider {
	env := maps.Clone(a.Env)
	if env == nil {
		env = map[string]string{}
	}
	set := func(k, v string) {
		if v != "" {
			env[k] = v
		}
	}
	set("AAD_LOGIN_METHOD", a.LoginMethod)
	set("AZURE_CLIENT_ID", a.ClientID)
	set("AZURE_TENANT_ID", cmp.Or(id.tenantID, a.TenantID))
	set("AZURE_FEDERATED_TOKEN_FILE", a.FederatedTokenFile)
	set("AZURE_AUTHORITY_HOST", a.AuthorityHost)
	set("AAD_ENVIRONMENT_NAME", a.Environment)
	set("AAD_SERVER_APPLICATION_ID", cmp.Or(id.serverAppID, a.ServerApplicationID))
	return &sources.ExecProvider{Command: a.Command, Args: []string{"azure"}, Env: env, APIVersion: a.APIVersion}
}

// aadIdentity is what a cluster's Entra ID integration asks of its tokens:
// the tenant that issues them and the server application they are for,
// lower-cased GUIDs. An empty field keeps the configured value.
type aadIdentity struct {
	tenantID, serverAppID string
}

// identityOf reads the identity of a cluster with Entra ID integration from
// its aadProfile (armcontainerservice ManagedClusterAADProfile), or returns
// why no token argocd-k8s-auth can get would be accepted:
//
//	aadProfile                           AZURE_TENANT_ID       AAD_SERVER_APPLICATION_ID
//	tenantID set                         tenantID              (as below)
//	tenantID absent or empty             auth.tenantID, else   (as below)
//	                                     the environment's
//	managed: true (AKS-managed)          (as above)            auth.serverApplicationID, else
//	                                                           argocd-k8s-auth's default, the AKS
//	                                                           server application 6dae42f8-…
//	managed false or absent (legacy),    (as above)            serverAppID
//	  serverAppID set
//	legacy without serverAppID           not ready
//	tenantID or (legacy) serverAppID     not ready
//	  not a GUID
//
// A cluster accepts only tokens of its own tenant, so a cluster of a
// subscription delegated from another tenant (Azure Lighthouse) names that
// tenant here. serverAppID of an AKS-managed cluster is not used by AKS and
// is ignored, and nothing here depends on serverAppSecret. Only GUIDs
// reach an exec env; a not-ready reason names the field, never its value.
func identityOf(aad *armcontainerservice.ManagedClusterAADProfile) (aadIdentity, string) {
	var id aadIdentity
	if t := azurearm.Deref(aad.TenantID); t != "" {
		if !azurearm.IsGUID(t) {
			return aadIdentity{}, "aadProfile.tenantID is not a tenant id (a GUID)"
		}
		id.tenantID = strings.ToLower(t)
	}
	if azurearm.Deref(aad.Managed) {
		return id, ""
	}
	switch s := azurearm.Deref(aad.ServerAppID); {
	case s == "":
		return aadIdentity{}, "legacy Entra ID integration (aadProfile.managed is not true) without aadProfile.serverAppID"
	case !azurearm.IsGUID(s):
		return aadIdentity{}, "aadProfile.serverAppID is not an application id (a GUID)"
	default:
		id.serverAppID = strings.ToLower(s)
	}
	return id, ""
}
