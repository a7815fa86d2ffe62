package inventory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestDepartureValidate: every problem of the rule at once, with its path;
// a zero asked for (negative: none) is kept, not replaced by the default.
func TestDepartureValidate(t *testing.T) {
	at := field.NewPath("departure")
	var got []string
	for _, e := range (Departure{AfterListings: 0, GracePeriod: -time.Second, MaxFraction: 2, HeldListings: -1, MaxDeletions: 0, MaxDeletionsPercent: 101}).Validate(at) {
		got = append(got, e.Error())
	}
	assert.Equal(t, []string{
		"departure.afterListings: Invalid value: 0: must be at least 1 (one listing is never enough to confirm a departure)",
		`departure.gracePeriod: Invalid value: "-1s": must be at least 0s`,
		"departure.maxFraction: Invalid value: 2: must be above 0 and at most 1",
		"departure.heldListings: Invalid value: -1: must be at least departure.afterListings (0)",
		"departure.maxDeletions: Invalid value: 0: must be at least 1",
		"departure.maxDeletionsPercent: Invalid value: 101: must be from 0 to 100",
	}, got)
	assert.Empty(t, DefaultDeparture().Validate(at))

	d, err := Departure{}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, DefaultDeparture(), d, "zero: the defaults")
	d, err = Departure{GracePeriod: -1, MaxDeletionsPercent: -1}.withDefaults()
	require.NoError(t, err)
	assert.Zero(t, d.GracePeriod, "negative: none")
	assert.Zero(t, d.MaxDeletionsPercent, "negative: none")
	_, err = Departure{MaxFraction: 3}.withDefaults()
	require.ErrorContains(t, err, "departure.maxFraction")
}

// TestValidateSpread: the inventory section's jitter and preference, every
// problem with its path; New refuses what the loader refuses.
func TestValidateSpread(t *testing.T) {
	at := field.NewPath("inventory")
	assert.Empty(t, ValidateSpread(at, 0, PreferCloud))
	var got []string
	for _, e := range ValidateSpread(at, 1, "both") {
		got = append(got, e.Error())
	}
	assert.Equal(t, []string{
		"inventory.jitter: Invalid value: 1: must be in [0, 1)",
		`inventory.prefer: Unsupported value: "both": supported values: "cloud", "rancher"`,
	}, got)
	_, err := New(nil, Options{Jitter: 1.5})
	require.ErrorContains(t, err, "inventory.jitter")
	inv, err := New(nil, Options{Jitter: -1})
	require.NoError(t, err)
	assert.Zero(t, inv.jitter, "negative: none")
}
