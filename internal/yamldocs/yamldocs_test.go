package yamldocs

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCount counts the documents that hold more than comments.
func TestCount(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		want      int
	}{
		{"empty", "", 0},
		{"one", "clusters: []\n", 1},
		{"marker first", "---\nclusters: []\n", 1},
		{"marker last", "clusters: []\n---\n", 1},
		{"comments after a marker", "clusters: []\n---\n# nothing\n\n...\n", 1},
		{"two", "clusters: []\n---\nclusters: []\n", 2},
		{"CRLF", "clusters: []\r\n---\r\nclusters: []\r\n", 2},
		{"on the marker's line", "clusters: []\n--- {clusters: []}\n", 2},
		{"a marker-like scalar is indented", "clusters:\n  - name: a\n    annotations:\n      note: |\n        ---\n        x\n", 1},
		{"not a marker", "clusters: []\n----\n", 1},
	} {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, Count([]byte(tt.raw))) })
	}
}
