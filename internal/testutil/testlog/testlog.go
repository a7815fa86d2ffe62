// Package testlog holds what the tests of several packages need to read a
// component's logs. Only tests import it.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for a logger's concurrent writes and the
// test's reads at once.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
