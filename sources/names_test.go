package sources_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestNormalizedName uses the cases of Argo CD's own utils.SanitizeName
// tests plus the edges of its rule.
func TestNormalizedName(t *testing.T) {
	cases := map[string]string{
		"in-cluster":                    "in-cluster",
		"In-Cluster":                    "in-cluster",
		"cluster_with_underscores":      "cluster-with-underscores",
		"my cluster (prod)":             "my-cluster--prod",
		"-leading.and.trailing-.":       "leading.and.trailing",
		"c-m-2x7kqz4b":                  "c-m-2x7kqz4b",
		"arn:aws:eks:eu-west-1:1:cl":    "arn-aws-eks-eu-west-1-1-cl",
		"Ünïcödé":                       "n-c-d",
		strings.Repeat("a", 300):        strings.Repeat("a", 253),
		strings.Repeat("a", 252) + "-b": strings.Repeat("a", 252),
	}
	for in, want := range cases {
		t.Run(in[:min(len(in), 30)], func(t *testing.T) {
			assert.Equal(t, want, sources.NormalizedName(in))
		})
	}
}
