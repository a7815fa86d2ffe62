package static

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"

	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/yamldocs"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// The clusters file is read one item at a time when it is laid out as
// nearly every such file is: comments, `clusters:`, then a block sequence,
// one item after the other. Decoding the whole document at once holds the
// file several times over (the bytes, the YAML nodes, their JSON form and
// the decoded clusters: ~100 MiB at start-up for 10,000 clusters with a CA
// each), where reading it item by item holds the clusters and a few items.
//
// Items are decoded with the same decoder as the whole document, a few at
// a time (itemsBytes of them), as the document `clusters:` followed by
// their lines, so each is read as in the whole document. Any other layout
// (flow style, a document marker after the first line, other top-level
// keys, CRLF line ends...) and any error (an anchor defined in an item
// decoded apart, an invalid cluster...) fall back to decoding the whole
// document: a file that is not valid fails with exactly the error, and its
// line, that decoding the whole document gives.

// readFile returns the clusters of the file, decoding it again only when
// its content changed since it was last decoded: an unchanged file gives
// the same clusters, or the same error.
func (s *Source) readFile() ([]sources.Cluster, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("read clusters file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	return s.readFrom(f, err == nil && st.Mode().IsRegular())
}

// readFrom is readFile of the open file f. A regular file is read to know
// whether it changed, then again to be decoded item by item; when the two
// reads differ, the file was written meanwhile (in place, not renamed
// into place) and either may be a part of it: nothing is taken from
// them, and the next listing reads it again. Anything else (a FIFO, a
// device) can be read only once: it is read whole, then decoded whole.
func (s *Source) readFrom(f io.ReadSeeker, regular bool) ([]sources.Cluster, error) {
	var (
		raw   []byte
		sum   [sha256.Size]byte
		err   error
		first [sha256.Size]byte
	)
	if regular {
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return nil, fmt.Errorf("read clusters file: %w", err)
		}
		h.Sum(sum[:0])
		first = sum
	} else {
		if raw, err = io.ReadAll(f); err != nil {
			return nil, fmt.Errorf("read clusters file: %w", err)
		}
		sum = sha256.Sum256(raw)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.fromFile != nil && sum == s.lastSum:
		return s.fromFile, nil
	case s.failed != nil && sum == s.failedSum:
		return nil, s.failed
	}
	var (
		cs []sources.Cluster
		ok bool
	)
	if raw == nil {
		cs, sum, ok = decodeItems(f, len(s.fromFile), filepath.Dir(s.path))
	}
	if !ok && raw == nil { // the same file, not the path again: it may have been replaced since
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("read clusters file: %w", err)
		}
		if raw, err = io.ReadAll(f); err != nil {
			return nil, fmt.Errorf("read clusters file: %w", err)
		}
		sum = sha256.Sum256(raw)
	}
	if regular && sum != first {
		return nil, fmt.Errorf("read clusters file %s: %w", s.path, errChangedWhileRead)
	}
	if !ok {
		if cs, err = s.decodeFile(raw); err != nil {
			s.failedSum, s.failed = sum, err
			return nil, err
		}
	}
	s.lastSum, s.fromFile = sum, cs
	s.failed = nil
	return cs, nil
}

// errChangedWhileRead says a clusters file was written while it was read.
var errChangedWhileRead = errors.New("it changed while it was read, and may have been read half-written " +
	"(write it elsewhere, then rename it into place); it is read again at the next listing")

// decodeFile decodes and converts a whole clusters file.
func (s *Source) decodeFile(raw []byte) ([]sources.Cluster, error) {
	if n := yamldocs.Count(raw); n > 1 {
		// the decoder reads the first and drops the rest: their clusters
		// would be absent from every listing, departures once confirmed
		return nil, fmt.Errorf("parse clusters file %s: %d YAML documents (separated by ---): write one, with every cluster under its clusters key", s.path, n)
	}
	if rw := yamldocs.Rewrites(raw, fileType); len(rw) > 0 {
		// YAML 1.1 reads an unquoted yes as true, 1.30 as 1.3 and
		// 0123 as 83: the decoder would list what nobody wrote
		return nil, fmt.Errorf("parse clusters file %s: %w", s.path, yamldocs.RewritesError(rw))
	}
	var f file
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("parse clusters file %s: %w", s.path, err)
	}
	if f.Clusters == nil {
		return nil, fmt.Errorf("clusters file %s has no clusters key (write `clusters: []` for an empty list)", s.path)
	}
	cs, err := convert(*f.Clusters, "clusters", filepath.Dir(s.path))
	if err != nil {
		return nil, fmt.Errorf("clusters file %s: %w", s.path, err)
	}
	return cs, nil
}

// clustersKey is the line that opens the sequence, and the first line of
// the documents items are decoded as.
const clustersKey = "clusters:"

// itemsBytes is the size past which the items gathered are decoded: large
// enough for the decoder's cost per document not to matter, small enough
// for the memory a document takes to decode not to either.
const itemsBytes = 64 << 10

// errLayout says the file is not laid out as decodeItems reads it.
var errLayout = errors.New("not a block sequence under clusters")

// errRewritten says an item holds an unquoted scalar the decoder reads
// as another string (see yamldocs.Rewrites).
var errRewritten = errors.New("an unquoted scalar read as another string")

// fileType is the type a clusters file decodes into.
var fileType = reflect.TypeFor[file]()

// decodeItems reads f from its start item by item and returns its clusters
// and the SHA-256 of what it read. ok is false when the file is not laid
// out as described above, or any item fails to decode or convert: the
// caller then decodes the whole file. hint is the expected number of
// clusters.
func decodeItems(f io.ReadSeeker, hint int, dir string) (cs []sources.Cluster, sum [sha256.Size]byte, ok bool) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, sum, false
	}
	h := sha256.New()
	conv := newConverter("clusters", hint, dir)
	d := itemDecoder{r: bufio.NewReaderSize(io.TeeReader(f, h), 64<<10), indent: -1}
	if err := d.each(conv.add); err != nil {
		return nil, sum, false
	}
	h.Sum(sum[:0])
	return conv.clusters(), sum, true
}

// itemDecoder splits a clusters file into its items.
type itemDecoder struct {
	r *bufio.Reader
	// indent is the column of the items' dashes, -1 until the first item.
	indent int
	// items is the document being gathered: clustersKey, a newline and the
	// lines of n items.
	items []byte
	n     int
	line  []byte
}

// each calls add with every item of the file, in order; it fails with
// errLayout when the layout is not the one described above, with add's
// error, or with the decoder's.
func (d *itemDecoder) each(add func(Cluster) error) error {
	opened, started := false, false // the clusters key was seen; a line that is not blank or a comment
	for {
		line, err := d.readLine()
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(line) > 0 {
			indent, rest := splitIndent(line)
			switch {
			case isBlankOrComment(rest):
				if d.indent >= 0 {
					d.items = append(d.items, line...)
				}
			case !opened:
				switch {
				case isKeyLine(line):
					opened = true
				case started || !isDocStart(line): // one document, the marker first
					return errLayout
				}
				started = true
			case d.indent >= 0 && indent > d.indent:
				d.items = append(d.items, line...)
			case (d.indent < 0 || indent == d.indent) && isItemStart(rest):
				if len(d.items) >= itemsBytes {
					if err := d.flush(add); err != nil {
						return err
					}
				}
				if d.n == 0 {
					d.items = append(d.items[:0], clustersKey+"\n"...)
				}
				d.indent = indent
				d.items = append(d.items, line...)
				d.n++
			default:
				return errLayout
			}
		}
		if err != nil { // io.EOF
			if d.indent < 0 {
				return errLayout // no item: `clusters: []`, null or no key
			}
			return d.flush(add)
		}
	}
}

// flush decodes the items gathered, if any, and passes them to add.
func (d *itemDecoder) flush(add func(Cluster) error) error {
	if d.n == 0 {
		return nil
	}
	if len(yamldocs.Rewrites(d.items, fileType)) > 0 {
		return errRewritten // reported by the whole file's decoder, with its lines
	}
	var f file
	if err := yaml.UnmarshalStrict(d.items, &f); err != nil {
		return err
	}
	if f.Clusters == nil || len(*f.Clusters) != d.n {
		return errLayout
	}
	for _, sc := range *f.Clusters {
		if err := add(sc); err != nil {
			return err
		}
	}
	d.n = 0
	return nil
}

// readLine returns the next line with its newline, if it has one; the
// slice is valid until the next call.
func (d *itemDecoder) readLine() ([]byte, error) {
	d.line = d.line[:0]
	for {
		part, err := d.r.ReadSlice('\n')
		d.line = append(d.line, part...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return d.line, err
		}
	}
}

// splitIndent returns the number of leading spaces of line and the rest.
func splitIndent(line []byte) (int, []byte) {
	rest := bytes.TrimLeft(line, " ")
	return len(line) - len(rest), rest
}

// isBlankOrComment reports whether rest, a line without its indentation,
// is empty or a comment.
func isBlankOrComment(rest []byte) bool {
	return len(rest) == 0 || rest[0] == '\n' || rest[0] == '#'
}

// isItemStart reports whether rest, a line without its indentation, opens
// a sequence item: a dash then a space or the line's end.
func isItemStart(rest []byte) bool {
	return len(rest) > 0 && rest[0] == '-' && (len(rest) == 1 || rest[1] == ' ' || rest[1] == '\n')
}

// isKeyLine reports whether line is clustersKey at the first column, with
// nothing after it but spaces and a comment.
func isKeyLine(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte(clustersKey))
	if !ok {
		return false
	}
	trimmed := bytes.TrimLeft(rest, " ")
	return len(trimmed) == 0 || trimmed[0] == '\n' || trimmed[0] == '#' && len(trimmed) < len(rest)
}

// isDocStart reports whether line is a document start marker alone.
func isDocStart(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("---"))
	rest = bytes.TrimLeft(rest, " ")
	return ok && (len(rest) == 0 || rest[0] == '\n')
}
