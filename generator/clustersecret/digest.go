package clustersecret

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ownedLabels and ownedAnnotations are the keys we set on every Secret, or
// remove (state, the countdown), besides the propagated ones.
var (
	ownedLabels      = []string{LabelSecretType, LabelManagedBy, LabelOwner, LabelSource, LabelPhase, LabelState}
	ownedAnnotations = []string{AnnotationLabels, AnnotationAnnotations, AnnotationCluster, AnnotationClusterID,
		AnnotationMissingSince, AnnotationMissingListings, AnnotationMissingListing}
)

// ownedDigest is the SHA-256 of the content of s that a content update
// sets (see merge): the values of the data keys we own, the labels and
// annotations we own (ownedLabels, ownedAnnotations) and those s lists as
// propagated, each present or absent. Two Secrets with equal digests need
// the same update, and a Secret whose digest equals the desired Secret's
// (which lists its propagated keys, and has no countdown) needs none: it
// carries the desired propagated lists, so every key the update sets or
// removes is one the digest covers. Labels, annotations and data keys
// people added are not covered: an update keeps them.
func ownedDigest(s *corev1.Secret) []byte {
	h := sha256.New()
	var b []byte
	for _, k := range ownedDataKeys {
		v, ok := s.Data[k]
		b = appendEntry(b[:0], 'd', k, string(v), ok)
		h.Write(b)
	}
	for _, kind := range []struct {
		tag   byte
		m     map[string]string
		fixed []string
		list  string
	}{
		{'l', s.Labels, ownedLabels, s.Annotations[AnnotationLabels]},
		{'a', s.Annotations, ownedAnnotations, s.Annotations[AnnotationAnnotations]},
	} {
		for _, k := range coveredKeys(kind.fixed, kind.list) {
			v, ok := kind.m[k]
			b = appendEntry(b[:0], kind.tag, k, v, ok)
			h.Write(b)
		}
	}
	return h.Sum(nil)
}

// coveredKeys are fixed and the keys of the comma-separated list, sorted,
// once each.
func coveredKeys(fixed []string, list string) []string {
	keys := slices.Clone(fixed)
	for k := range strings.SplitSeq(list, ",") {
		if k != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// covers reports whether the digest of want covers every label and
// annotation of want (the desired Secrets of Build list what they
// propagate): if not, the digest cannot tell whether a Secret is up to date.
func covers(want *corev1.Secret) bool {
	for _, kind := range []struct {
		m     map[string]string
		fixed []string
		list  string
	}{
		{want.Labels, ownedLabels, want.Annotations[AnnotationLabels]},
		{want.Annotations, ownedAnnotations, want.Annotations[AnnotationAnnotations]},
	} {
		keys := coveredKeys(kind.fixed, kind.list)
		for k := range kind.m {
			if _, ok := slices.BinarySearch(keys, k); !ok {
				return false
			}
		}
	}
	return true
}

// appendEntry appends an unambiguous encoding of one key of a kind.
func appendEntry(b []byte, kind byte, k, v string, present bool) []byte {
	b = appendField(append(b, kind), k)
	if !present {
		return append(b, 0)
	}
	return appendField(append(b, 1), v)
}

// appendField appends s with its length.
func appendField(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}
