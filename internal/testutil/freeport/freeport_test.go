package freeport

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPick(t *testing.T) {
	t.Run("below the ephemeral range", func(t *testing.T) {
		for range 100 {
			port, err := pick(32768, func(p int) (int, error) { return p, nil })
			require.NoError(t, err)
			assert.GreaterOrEqual(t, port, floor)
			assert.Less(t, port, 32768)
		}
	})
	t.Run("every pick taken: the kernel's", func(t *testing.T) {
		var asked []int
		port, err := pick(32768, func(p int) (int, error) {
			asked = append(asked, p)
			if p == 0 {
				return 45000, nil
			}
			return 0, errors.New("address already in use")
		})
		require.NoError(t, err)
		assert.Equal(t, 45000, port)
		assert.Len(t, asked, tries+1)
		assert.Equal(t, 0, asked[tries])
	})
	t.Run("no room below the range: the kernel's at once", func(t *testing.T) {
		var asked []int
		port, err := pick(10500, func(p int) (int, error) { asked = append(asked, p); return 40000, nil })
		require.NoError(t, err)
		assert.Equal(t, 40000, port)
		assert.Equal(t, []int{0}, asked)
	})
	t.Run("nothing free", func(t *testing.T) {
		_, err := pick(0, func(int) (int, error) { return 0, errors.New("no") })
		require.Error(t, err)
	})
}

func TestLoopbackListens(t *testing.T) {
	port, err := Loopback()
	require.NoError(t, err)
	got, err := listen(port)
	require.NoError(t, err, "free a moment ago")
	assert.Equal(t, port, got)
	if low := ephemeralLow(); low-floor >= 1000 {
		assert.Less(t, port, low, "below the ephemeral range")
	}
}
