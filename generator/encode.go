package generator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// An answer is answerPrefix, the selected fragments joined by ',', and
// answerSuffix: byte for byte what json.Marshal makes of a response.
const (
	answerPrefix = `{"output":{"parameters":[`
	answerSuffix = `]}}`
)

// encodedSnapshot holds every served cluster of one snapshot encoded once,
// each fragment exactly as json.Marshal encodes it inside a response
// (HTML escaping on), in snapshot order. It is read-only once built:
// answers share it.
type encodedSnapshot struct {
	// joined is answerPrefix, fragment 0, ',', fragment 1, ',', …,
	// answerSuffix with no slack capacity: the answer selecting every
	// cluster.
	joined []byte
	// off[k] is where fragment k starts and off[k+1]-1 where it ends; off
	// has one element more than there are fragments, and its last element
	// less one is where answerSuffix starts.
	off []int32
}

// encodeSnapshot encodes the served clusters of snap (all its Clusters).
//
// It encodes them twice, first for the size of the whole, then into a
// buffer of that size: growing the buffer by doubling instead would leave
// about twice the encoding's size in garbage (~8 MiB at 10,000 clusters),
// which raises the heap the garbage collector lets the process reach.
func encodeSnapshot(snap *inventory.Snapshot) (*encodedSnapshot, error) {
	n := len(snap.Clusters)
	var frag bytes.Buffer         // one cluster's parameters and Encode's newline
	enc := json.NewEncoder(&frag) // escapes HTML, as json.Marshal does
	var p Parameters              // one, not one per cluster boxed for Encode
	encode := func(c *sources.Cluster) error {
		frag.Reset()
		p = ClusterParameters(c)
		if err := enc.Encode(&p); err != nil {
			return fmt.Errorf("encode parameters of %s: %w", c.Name, err)
		}
		return nil
	}
	size := len(answerPrefix) + len(answerSuffix) // each newline becomes a comma but the last
	for _, c := range snap.Clusters {
		if err := encode(c); err != nil {
			return nil, err
		}
		size += frag.Len()
	}
	if n > 0 {
		size--
	}
	if size > math.MaxInt32 {
		return nil, fmt.Errorf("encode parameters: %d bytes, over the 2 GiB an encoded snapshot can address", size)
	}
	joined := make([]byte, 0, size)
	joined = append(joined, answerPrefix...)
	off := make([]int32, 0, n+1)
	for _, c := range snap.Clusters {
		if err := encode(c); err != nil {
			return nil, err
		}
		off = append(off, int32(len(joined))) // < size, checked above
		joined = append(append(joined, frag.Bytes()[:frag.Len()-1]...), ',')
	}
	if n > 0 {
		joined = joined[:len(joined)-1]
	}
	off = append(off, int32(len(joined)+1))
	joined = append(joined, answerSuffix...)
	if len(joined) != size {
		return nil, fmt.Errorf("encode parameters: %d bytes, then %d for the same snapshot", size, len(joined))
	}
	return &encodedSnapshot{joined: joined, off: off}, nil
}

// run is the fragments [start, end) of an encodedSnapshot: one slice of
// its joined buffer, commas included.
type run struct{ start, end int32 }

// runBytes is the size of a run, for the cache's budget.
const runBytes = 8

// selectRuns returns the runs of the served clusters of snap that f
// matches, and how many clusters they hold. e must be snap's encoding.
func (e *encodedSnapshot) selectRuns(snap *inventory.Snapshot, f *Filter) ([]run, int, error) {
	var runs []run
	count := 0
	k := int32(0) // the fragment of the next cluster
	for i := range snap.Clusters {
		c := snap.Clusters[i]
		if f.Match(c) {
			if n := len(runs); n > 0 && runs[n-1].end == k {
				runs[n-1].end++
			} else {
				runs = append(runs, run{k, k + 1})
			}
			count++
		}
		k++
	}
	if int(k) != len(e.off)-1 {
		return nil, 0, fmt.Errorf("select parameters: snapshot %d has %d clusters, its encoding %d", snap.Version, k, len(e.off)-1)
	}
	if len(runs) == 0 {
		return nil, 0, nil
	}
	return append([]run(nil), runs...), count, nil // the cache keeps them: no slack
}

// An answer is written as its runs, each a slice of the shared encoding
// that also holds, when it has them as neighbours there, the comma before
// it, answerPrefix (first run) and answerSuffix (last run). The answer
// selecting every cluster is one slice: the whole encoding.

// span returns run i of r with what it holds of its neighbours.
func (r Result) span(i int) []byte {
	e, rn := r.enc, r.runs[i]
	lo, hi := e.off[rn.start], e.off[rn.end]-1
	switch {
	case i > 0:
		lo-- // the comma before it; rn.start > 0
	case rn.start == 0:
		lo = 0
	}
	if i == len(r.runs)-1 && int(rn.end) == len(e.off)-1 {
		hi = int32(len(e.joined))
	}
	return e.joined[lo:hi]
}

// ownPrefix reports whether answerPrefix is not in the first span.
func (r Result) ownPrefix() bool { return len(r.runs) == 0 || r.runs[0].start != 0 }

// ownSuffix reports whether answerSuffix is not in the last span.
func (r Result) ownSuffix() bool {
	return len(r.runs) == 0 || int(r.runs[len(r.runs)-1].end) != len(r.enc.off)-1
}

// Len returns the length of the encoded answer.
func (r Result) Len() int {
	n := 0
	if r.ownPrefix() {
		n += len(answerPrefix)
	}
	for i := range r.runs {
		n += len(r.span(i))
	}
	if r.ownSuffix() {
		n += len(answerSuffix)
	}
	return n
}

// Bytes returns the encoded answer in a new slice.
func (r Result) Bytes() []byte {
	b := make([]byte, 0, r.Len())
	if r.ownPrefix() {
		b = append(b, answerPrefix...)
	}
	for i := range r.runs {
		b = append(b, r.span(i)...)
	}
	if r.ownSuffix() {
		b = append(b, answerSuffix...)
	}
	return b
}

var _ io.WriterTo = Result{}

// WriteTo writes the encoded answer to w. Runs of at least 32 KiB are
// written straight from the shared encoding; shorter ones are gathered in
// a pooled scratch buffer, held only while they are. It allocates nothing
// once a scratch buffer is pooled.
func (r Result) WriteTo(w io.Writer) (int64, error) {
	cw := chunkWriter{w: w}
	if r.ownPrefix() {
		cw.writeString(answerPrefix)
	}
	for i := range r.runs {
		cw.write(r.span(i))
	}
	if r.ownSuffix() {
		cw.writeString(answerSuffix)
	}
	cw.flush()
	cw.release()
	return cw.n, cw.err
}

// scratchSize is the size of a scratch buffer, and so of the writes small
// runs are gathered into. A larger one measured faster for scattered
// selections (fewer HTTP chunks) but is held, per answer being written,
// for as long as the client takes to read it.
const scratchSize = 32 << 10

var scratches = sync.Pool{New: func() any { return new([scratchSize]byte) }}

// chunkWriter gathers small writes in a scratch buffer and passes long ones
// through. After an error it writes nothing more.
type chunkWriter struct {
	w       io.Writer
	scratch *[scratchSize]byte // nil until needed
	buf     []byte             // scratch[:buffered]
	n       int64
	err     error
}

// write passes p (read, never kept) through when it is at least
// scratchSize long, without holding a scratch buffer meanwhile.
func (cw *chunkWriter) write(p []byte) {
	if len(p) >= scratchSize {
		cw.flush()
		cw.release()
		cw.out(p)
		return
	}
	cw.room(len(p))
	cw.buf = append(cw.buf, p...)
}

// writeString buffers s, which is short.
func (cw *chunkWriter) writeString(s string) {
	cw.room(len(s))
	cw.buf = append(cw.buf, s...)
}

// room makes room for n ≤ scratchSize bytes in the scratch buffer.
func (cw *chunkWriter) room(n int) {
	if cw.scratch == nil {
		cw.scratch = scratches.Get().(*[scratchSize]byte)
		cw.buf = cw.scratch[:0]
	}
	if n > cap(cw.buf)-len(cw.buf) {
		cw.flush()
	}
}

func (cw *chunkWriter) flush() {
	if len(cw.buf) > 0 {
		cw.out(cw.buf)
		cw.buf = cw.buf[:0]
	}
}

// release gives the scratch buffer back; it must be empty.
func (cw *chunkWriter) release() {
	if cw.scratch != nil {
		scratches.Put(cw.scratch)
		cw.scratch, cw.buf = nil, nil
	}
}

func (cw *chunkWriter) out(p []byte) {
	if cw.err != nil {
		return
	}
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	cw.err = err
}
