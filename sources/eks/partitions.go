package eks

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// partition is an AWS partition as the SDK's endpoint rules know it: its
// id (the partition of its ARNs), the pattern of its region names and the
// regions it lists by name.
type partition struct {
	id          string
	regionRegex *regexp.Regexp
	regions     []string
}

// awsPartitions is the partitions table of aws-sdk-go-v2 v1.47.7
// (internal/endpoints/awsrulesfn/partitions.json), in its order, which is
// the order of the lookup. The SDK exports no way to ask it: awsrulesfn is
// internal, and the services' endpoint resolvers answer for any region,
// falling back to partition aws for one they do not know (mars-1
// included). TestPartitionsMatchSDK compares this table with the
// partitions.json of the SDK version go.mod requires, and prints the table
// to paste here when they differ.
var awsPartitions = []partition{
	{"aws", regexp.MustCompile(`^(us|eu|ap|sa|ca|me|af|il|mx)\-\w+\-\d+$`), []string{"af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1", "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5", "ap-southeast-6", "ap-southeast-7", "aws-global", "ca-central-1", "ca-west-1", "eu-central-1", "eu-central-2", "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-2", "eu-west-3", "il-central-1", "me-central-1", "me-south-1", "mx-central-1", "sa-east-1", "us-east-1", "us-east-2", "us-west-1", "us-west-2"}},
	{"aws-cn", regexp.MustCompile(`^cn\-\w+\-\d+$`), []string{"aws-cn-global", "cn-north-1", "cn-northwest-1"}},
	{"aws-eusc", regexp.MustCompile(`^eusc\-(de)\-\w+\-\d+$`), []string{"eusc-de-east-1"}},
	{"aws-iso", regexp.MustCompile(`^us\-iso\-\w+\-\d+$`), []string{"aws-iso-global", "us-iso-east-1", "us-iso-west-1"}},
	{"aws-iso-b", regexp.MustCompile(`^us\-isob\-\w+\-\d+$`), []string{"aws-iso-b-global", "us-isob-east-1", "us-isob-west-1"}},
	{"aws-iso-e", regexp.MustCompile(`^eu\-isoe\-\w+\-\d+$`), []string{"aws-iso-e-global", "eu-isoe-west-1"}},
	{"aws-iso-f", regexp.MustCompile(`^us\-isof\-\w+\-\d+$`), []string{"aws-iso-f-global", "us-isof-east-1", "us-isof-south-1"}},
	{"aws-us-gov", regexp.MustCompile(`^us\-gov\-\w+\-\d+$`), []string{"aws-us-gov-global", "us-gov-east-1", "us-gov-west-1"}},
}

// regionChars are the characters of a region name. The partitions'
// patterns use \w, which would let "eu-West-1" through: a region that
// signs no request.
var regionChars = regexp.MustCompile(`^[a-z0-9-]+$`)

// partitionOf returns the partition of an AWS region, as the SDK finds it:
// a region listed by name, else the first partition whose pattern the
// name matches. Unlike the SDK, a region no partition knows has none (the
// SDK assumes partition aws), names are lower case, and the pseudo-regions
// of global endpoints (aws-global, aws-cn-global, ...) are not regions: no
// cluster runs there.
func partitionOf(region string) (string, bool) {
	if !regionChars.MatchString(region) {
		return "", false
	}
	for _, p := range awsPartitions {
		if region != p.id+"-global" && slices.Contains(p.regions, region) {
			return p.id, true
		}
	}
	for _, p := range awsPartitions {
		if p.regionRegex.MatchString(region) {
			return p.id, true
		}
	}
	return "", false
}

// notRegion is the detail of a value that is no partition's region.
func notRegion() string {
	ids := make([]string, len(awsPartitions))
	for i, p := range awsPartitions {
		ids[i] = p.id
	}
	return "not an AWS region of the partitions " + strings.Join(ids, ", ")
}

// validateRegions checks that each region is one of a partition the SDK
// knows, listed once, and that all are of one partition: an account, and
// so the credentials that list it, is of one partition.
func validateRegions(path *field.Path, regions []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	first, firstRegion := "", ""
	for i, r := range regions {
		p, ok := partitionOf(r)
		switch {
		case !ok:
			errs = append(errs, field.Invalid(path.Index(i), r, notRegion()))
		case seen[r]:
			errs = append(errs, field.Duplicate(path.Index(i), r))
		case first == "":
			first, firstRegion = p, r
		case p != first:
			errs = append(errs, field.Invalid(path.Index(i), r, fmt.Sprintf(
				"a region of partition %s, but %s is of %s: an account's regions are all of one partition", p, firstRegion, first)))
		}
		seen[r] = true
	}
	return errs
}

// regionsPartition is the partition of the first region of regions that
// has one, or "".
func regionsPartition(regions []string) string {
	for _, r := range regions {
		if p, ok := partitionOf(r); ok {
			return p
		}
	}
	return ""
}
