package eks

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The Argo CD role of a cluster (awsAuthConfig.roleARN, or --role-arn of
// the exec form) is its account's argocdRoleARN, or, when the platform
// team allows it with rolePattern, the role the cluster's roleTag names.
// A tag value is taken only when it is a role of the cluster's own
// partition and account that a pattern matches. Otherwise the cluster is
// listed not ready with the reason, never with its account's role: the
// tag says the cluster should not be reached with that role (it may grant
// more than the cluster's owners want), and a quiet fallback would hide
// the mistake. Like any cluster that cannot be rendered, a cluster served
// before keeps its last rendering meanwhile.

// notRoleARN is the detail of a value that is not an IAM role ARN.
const notRoleARN = "not an IAM role ARN such as arn:aws:iam::123456789012:role/name"

// maxTagKey is the length limit of AWS tag keys.
const maxTagKey = 128

// roleResourceRe is the resource of an IAM role ARN: role/, a path of
// printable ASCII characters ending in "/", and the role name.
var roleResourceRe = regexp.MustCompile(`^role/(?:[\x21-\x7e]+/)?[\w+=,.@-]{1,64}$`)

// parseRoleARN parses an IAM role ARN: arn:<partition>:iam::<account>:role/[path/]name.
func parseRoleARN(s string) (arn.ARN, bool) {
	a, err := arn.Parse(s)
	if err != nil || a.Service != "iam" || a.Region != "" || !accountIDRe.MatchString(a.AccountID) ||
		!roleResourceRe.MatchString(a.Resource) || !slices.ContainsFunc(awsPartitions, func(p partition) bool { return p.id == a.Partition }) {
		return arn.ARN{}, false
	}
	return a, true
}

// validateRoleTag checks roleTag and rolePattern.
func (c *Config) validateRoleTag(fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	tag := fp.Child("roleTag")
	switch {
	case c.RoleTag == "" || strings.TrimSpace(c.RoleTag) != c.RoleTag || len(c.RoleTag) > maxTagKey:
		errs = append(errs, field.Invalid(tag, c.RoleTag, "must be an AWS tag key: 1-128 characters, without surrounding spaces"))
	case strings.HasPrefix(strings.ToLower(c.RoleTag), "aws:"):
		errs = append(errs, field.Invalid(tag, c.RoleTag, "the aws: prefix is reserved to AWS"))
	case slices.Contains([]string{c.TenantTag, c.ProjectTag, c.NamespacesTag}, c.RoleTag):
		errs = append(errs, field.Invalid(tag, c.RoleTag, "already the tenantTag, projectTag or namespacesTag"))
	}
	for i, p := range c.RolePattern {
		if _, err := path.Match(p, ""); err != nil || !strings.HasPrefix(p, "arn:") {
			errs = append(errs, field.Invalid(fp.Child("rolePattern").Index(i), p,
				"not a path.Match pattern of role ARNs, such as arn:aws:iam::*:role/argocd-*"))
		}
	}
	return errs
}

// reasonRoleTag begins the NotReadyReason of a cluster whose role tag is
// refused (the clusters_not_ready reason invalid_role).
const reasonRoleTag = "Argo CD role tag "

// argocdRole returns the Argo CD role of a cluster of account in region
// with tags: the tag's role when it is allowed, the account's when the
// tag is absent or rolePattern empty. A refused tag gives a reason (the
// cluster is not ready) and no role.
func (m *mapper) argocdRole(tags map[string]string, account Account, region string) (role, reason string) {
	v, tagged := tags[m.roleTag]
	if !tagged || len(m.rolePatterns) == 0 {
		return account.ArgocdRoleARN, ""
	}
	refuse := func(format string, args ...any) (string, string) {
		return "", fmt.Sprintf("%s%s: %q ", reasonRoleTag, m.roleTag, v) + fmt.Sprintf(format, args...)
	}
	part, _ := partitionOf(region)
	a, ok := parseRoleARN(v)
	switch {
	case !ok:
		return refuse("is not an IAM role ARN")
	case a.Partition != part:
		return refuse("is a role of partition %s, not %s (the cluster's)", a.Partition, part)
	case a.AccountID != account.ID:
		return refuse("is a role of account %s, not %s (the cluster's)", a.AccountID, account.ID)
	case !slices.ContainsFunc(m.rolePatterns, func(p string) bool { ok, _ := path.Match(p, v); return ok }):
		return refuse("matches no rolePattern")
	}
	return v, ""
}
