// Package yamldocs counts the documents of a YAML stream: the YAML
// decoders we use (sigs.k8s.io/yaml) read the first and drop the rest
// without a word, so a file meant as one document is checked first.
package yamldocs

import "bytes"

// Count counts the YAML documents of raw that hold more than blank
// lines and comments. A document starts at a line that begins with "---"
// then a space or its end; such a line cannot be part of a scalar of a
// document whose top level is a mapping.
func Count(raw []byte) int {
	n, content := 0, false
	for line := range bytes.Lines(raw) {
		if bytes.HasPrefix(line, []byte("---")) && (len(line) == 3 || line[3] == ' ' || line[3] == '\n' || line[3] == '\r') {
			content = false
			line = line[3:] // what follows the marker is the new document's
		}
		rest := bytes.TrimSpace(line)
		if len(rest) == 0 || rest[0] == '#' || string(rest) == "..." || content {
			continue
		}
		content = true
		n++
	}
	return n
}
