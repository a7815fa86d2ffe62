package clusterprofile

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// The source records and the count and sum of each source's records live
// in one ConfigMap the leader writes (see SourcesKey, CountsKey, SumsKey).

// loadSources reads the source records and what the ConfigMap holds as
// saveSources writes it (nil and no records when there is none yet). A
// ConfigMap of another owner is refused.
func (l *Ledger) loadSources(ctx context.Context) ([]inventory.SourceRecord, []byte, error) {
	cm, err := l.core.CoreV1().ConfigMaps(l.opts.Namespace).Get(ctx, l.opts.ConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return []inventory.SourceRecord{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get configmap %s: %w", l.opts.ConfigMap, err)
	}
	if cm.Labels[LabelOwner] != l.opts.OwnerID {
		return nil, nil, fmt.Errorf("configmap %s is not ours (label %s is %q, not %q)", l.opts.ConfigMap, LabelOwner, cm.Labels[LabelOwner], l.opts.OwnerID)
	}
	srcs, err := decodeSources(cm)
	if err != nil {
		return nil, nil, err
	}
	return srcs, storedSources(cm), nil
}

// storedSources is what cm holds as saveSources writes it.
func storedSources(cm *corev1.ConfigMap) []byte {
	return []byte(cm.Data[SourcesKey] + "\n" + cm.Data[CountsKey] + "\n" + cm.Data[SumsKey])
}

// recordSum is the part of a record in its source's sum (SumsKey): the
// first 8 bytes of digest, the SHA-256 of its record annotation.
func recordSum(digest [sha256.Size]byte) uint64 { return binary.BigEndian.Uint64(digest[:8]) }

// countsOf counts the records of each source.
func countsOf(records []inventory.Record) map[string]int {
	out := map[string]int{}
	for i := range records {
		out[records[i].Source]++
	}
	return out
}

func decodeSources(cm *corev1.ConfigMap) ([]inventory.SourceRecord, error) {
	srcs := []inventory.SourceRecord{}
	raw, ok := cm.Data[SourcesKey]
	if !ok {
		return srcs, nil
	}
	if err := json.Unmarshal([]byte(raw), &srcs); err != nil {
		return nil, fmt.Errorf("configmap %s: decode %s: %w", cm.Name, SourcesKey, err)
	}
	return srcs, nil
}

// saveSources writes the source records, and the count and sum of each
// source's records, when any changed (and counts the write in sl).
func (l *Ledger) saveSources(ctx context.Context, srcs []inventory.SourceRecord, counts map[string]int, sums map[string]uint64, sl *saveLog) error {
	rawSources, err := json.Marshal(srcs)
	if err != nil {
		return fmt.Errorf("encode source records: %w", err)
	}
	rawCounts, err := json.Marshal(counts) // keys sorted: the same counts encode the same
	if err != nil {
		return fmt.Errorf("encode record counts: %w", err)
	}
	rawSums, err := json.Marshal(sums)
	if err != nil {
		return fmt.Errorf("encode record sums: %w", err)
	}
	raw := []byte(string(rawSources) + "\n" + string(rawCounts) + "\n" + string(rawSums))
	if string(raw) == string(l.sources) {
		return nil
	}
	if err := lease.Check(ctx); err != nil {
		return err
	}
	cms := l.core.CoreV1().ConfigMaps(l.opts.Namespace)
	l.written.wrote(raw) // before the write: its event is this process's
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: l.opts.ConfigMap, Namespace: l.opts.Namespace,
		Labels: map[string]string{LabelManager: Manager, LabelOwner: l.opts.OwnerID}},
		Data: map[string]string{SourcesKey: string(rawSources), CountsKey: string(rawCounts), SumsKey: string(rawSums)}}
	if l.sources == nil {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: Manager})
	}
	// not created by us (a create that timed out, or another term's):
	// patched if ours
	if l.sources != nil || apierrors.IsAlreadyExists(err) {
		var cur *corev1.ConfigMap
		cur, err = cms.Get(ctx, l.opts.ConfigMap, metav1.GetOptions{})
		if err == nil {
			if cur.Labels[LabelOwner] != l.opts.OwnerID {
				return fmt.Errorf("configmap %s is not ours: not written", l.opts.ConfigMap)
			}
			// as read: a write of another leader since (this one deposed,
			// its patch late) fails it with a conflict
			var patch []byte
			if patch, err = json.Marshal(map[string]any{"metadata": map[string]string{"resourceVersion": cur.ResourceVersion}, "data": cm.Data}); err == nil {
				err = lease.Check(ctx) // again: a create and a read went before
			}
			if err == nil {
				_, err = cms.Patch(ctx, l.opts.ConfigMap, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: Manager})
			}
		}
	}
	if err != nil {
		return fmt.Errorf("write configmap %s: %w", l.opts.ConfigMap, err)
	}
	l.sources = raw
	sl.sources = true
	return nil
}
