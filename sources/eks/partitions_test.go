package eks

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPartitionOf(t *testing.T) {
	for _, tc := range []struct {
		region, want string
	}{
		{"eu-west-1", "aws"},
		{"us-east-1", "aws"},
		{"ap-southeast-7", "aws"},
		{"mx-central-2", "aws"}, // not listed yet, but of the pattern: a new region works without a release
		{"eusc-de-east-1", "aws-eusc"},
		{"cn-north-1", "aws-cn"},
		{"cn-northwest-1", "aws-cn"},
		{"us-gov-west-1", "aws-us-gov"},
		{"us-gov-east-1", "aws-us-gov"},
		{"us-iso-east-1", "aws-iso"},
		{"us-isob-east-1", "aws-iso-b"},
		{"eu-isoe-west-1", "aws-iso-e"},
		{"us-isof-south-1", "aws-iso-f"},
		{"mars-1", ""},
		{"moon-central-1", ""},
		{"eusc-fr-east-1", ""}, // the aws-eusc pattern knows only de
		{"aws-global", ""},     // a pseudo-region of global endpoints
		{"aws-us-gov-global", ""},
		{"Europe", ""},
		{"eu-West-1", ""}, // \w of the patterns, but no region signs a request so
		{"eu_west-1", ""},
		{"eu-west-1 ", ""},
		{"", ""},
	} {
		t.Run(tc.region, func(t *testing.T) {
			got, ok := partitionOf(tc.region)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.want != "", ok)
		})
	}
}

// TestRegionsOfEveryPartition: regions of any partition the SDK knows are
// accepted, each in a section of its own (one account's regions are of one
// partition), and a region no partition knows is rejected with the list of
// partitions.
func TestRegionsOfEveryPartition(t *testing.T) {
	for _, tc := range []struct {
		region, want string
	}{
		{region: "eusc-de-east-1"},
		{region: "cn-north-1"},
		{region: "us-gov-west-1"},
		{region: "eu-west-1"},
		{region: "mars-1", want: `regions[0]: Invalid value: "mars-1": not an AWS region of the partitions ` +
			"aws, aws-cn, aws-eusc, aws-iso, aws-iso-b, aws-iso-e, aws-iso-f, aws-us-gov"},
	} {
		t.Run(tc.region, func(t *testing.T) {
			c := Config{Regions: []string{tc.region}, Accounts: []Account{{ID: "111111111111"}}}
			c.Default()
			errs := c.Validate(nil)
			if tc.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1)
			assert.Equal(t, tc.want, errs[0].Error())
		})
	}
}

// sdkPartitions is what partitions.json of the SDK says, as far as the
// table keeps it.
type sdkPartitions struct {
	Partitions []struct {
		ID          string                     `json:"id"`
		RegionRegex string                     `json:"regionRegex"`
		Regions     map[string]json.RawMessage `json:"regions"`
	} `json:"partitions"`
}

// TestPartitionsMatchSDK compares awsPartitions with the partitions.json
// of the aws-sdk-go-v2 module go.mod requires, read from the module cache
// (the SDK exports no way to ask it). When they differ, it prints the
// table to paste into partitions.go.
func TestPartitionsMatchSDK(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "github.com/aws/aws-sdk-go-v2").Output()
	require.NoError(t, err, "go list the aws-sdk-go-v2 module")
	dir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	require.NotEmpty(t, dir, "aws-sdk-go-v2 %s is not in the module cache: go mod download", version)
	b, err := os.ReadFile(filepath.Join(dir, "internal", "endpoints", "awsrulesfn", "partitions.json"))
	require.NoError(t, err)
	var sdk sdkPartitions
	require.NoError(t, json.Unmarshal(b, &sdk))

	var want, got strings.Builder
	for _, p := range sdk.Partitions {
		fmt.Fprintf(&want, "\t{%q, regexp.MustCompile(`%s`), %#v},\n", p.ID, p.RegionRegex, slices.Sorted(maps.Keys(p.Regions)))
	}
	for _, p := range awsPartitions {
		fmt.Fprintf(&got, "\t{%q, regexp.MustCompile(`%s`), %#v},\n", p.id, p.regionRegex, p.regions)
	}
	assert.Equal(t, want.String(), got.String(),
		"the partitions of aws-sdk-go-v2 %s differ from awsPartitions; paste into partitions.go:\n%s", version, want.String())
}
