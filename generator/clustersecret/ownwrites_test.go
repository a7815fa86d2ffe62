package clustersecret

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestOwnWritesView(t *testing.T) {
	secret := func(name, rv string, uid types.UID) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, UID: uid}}
	}
	rec := func(name, rv string, uid types.UID) *Record { return recordOf(secret(name, rv, uid), false) }
	for _, tc := range []struct {
		name     string
		record   func(w *ownWrites)
		cache    []*Record
		observed string
		want     map[string]string // name → resourceVersion seen by the plan
		kept     int               // writes still remembered
	}{
		{name: "create not shown yet", record: func(w *ownWrites) { w.wrote(secret("a", "10", "u")) },
			observed: "9", want: map[string]string{"a": "10"}, kept: 1},
		{name: "create shown", record: func(w *ownWrites) { w.wrote(secret("a", "10", "u")) },
			cache: []*Record{rec("a", "10", "u")}, observed: "10", want: map[string]string{"a": "10"}},
		{name: "create shown, then deleted by someone", record: func(w *ownWrites) { w.wrote(secret("a", "10", "u")) },
			observed: "11", want: map[string]string{}},
		{name: "update not shown yet", record: func(w *ownWrites) { w.wrote(secret("a", "10", "u")) },
			cache: []*Record{rec("a", "5", "u")}, observed: "9", want: map[string]string{"a": "10"}, kept: 1},
		{name: "update shown, then changed by someone", record: func(w *ownWrites) { w.wrote(secret("a", "10", "u")) },
			cache: []*Record{rec("a", "12", "u")}, observed: "12", want: map[string]string{"a": "12"}},
		{name: "delete not shown yet", record: func(w *ownWrites) { w.deleted("a", "u") },
			cache: []*Record{rec("a", "5", "u"), rec("b", "6", "v")}, observed: "9", want: map[string]string{"b": "6"}, kept: 1},
		{name: "delete shown", record: func(w *ownWrites) { w.deleted("a", "u") },
			observed: "9", want: map[string]string{}},
		{name: "deleted, then re-created by someone", record: func(w *ownWrites) { w.deleted("a", "u") },
			cache: []*Record{rec("a", "15", "u2")}, observed: "15", want: map[string]string{"a": "15"}},
		{name: "versions that do not compare: equal only", record: func(w *ownWrites) { w.wrote(secret("a", "x10", "u")) },
			cache: []*Record{rec("a", "x9", "u")}, observed: "x9", want: map[string]string{"a": "x10"}, kept: 1},
		{name: "expired", record: func(w *ownWrites) {
			w.wrote(secret("a", "10", "u"))
			o := w.m["a"]
			o.at = time.Now().Add(-2 * ownWriteTTL)
			w.m["a"] = o
		}, cache: []*Record{rec("a", "5", "u")}, want: map[string]string{"a": "5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w ownWrites
			tc.record(&w)
			got := map[string]string{}
			for _, s := range w.view(tc.cache, tc.observed) {
				got[s.Name] = s.ResourceVersion
			}
			assert.Equal(t, tc.want, got)
			assert.Len(t, w.m, tc.kept)
		})
	}
}

func TestOwnWritesShown(t *testing.T) {
	secret := func(rv string, uid types.UID) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: rv, UID: uid}}
	}
	wrote := func(w *ownWrites) { w.wrote(secret("10", "u")) }
	rec := func(rv string, uid types.UID) *Record { return recordOf(secret(rv, uid), false) }
	deleted := func(w *ownWrites) { w.deleted("a", "u") }
	for _, tc := range []struct {
		name      string
		record    func(w *ownWrites)
		event     *Record
		deleted   bool
		forgotten bool
	}{
		{"an older version of the written Secret", wrote, rec("9", "u"), false, false},
		{"the written version", wrote, rec("10", "u"), false, true},
		{"a later version", wrote, rec("11", "u"), false, true},
		{"the written Secret deleted since", wrote, rec("12", "u"), true, true},
		{"the deleted Secret, before the delete", deleted, rec("9", "u"), false, false},
		{"the delete", deleted, rec("9", "u"), true, true},
		{"re-created by someone", deleted, rec("15", "u2"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w ownWrites
			tc.record(&w)
			w.shown(tc.event, tc.deleted)
			assert.Equal(t, tc.forgotten, len(w.m) == 0)
		})
	}
}
