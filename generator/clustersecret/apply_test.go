package clustersecret

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOnFresh(t *testing.T) {
	full := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u1", ResourceVersion: "7",
		Labels: map[string]string{LabelManagedBy: ManagedByValue, "env": "prod"}, Annotations: map[string]string{AnnotationMissingSince: "t0", "note": "n"}},
		Data: map[string][]byte{"config": []byte(`{"bearerToken":"t"}`), "server": []byte("https://x")}}
	cached, _ := CacheTransform(full.DeepCopy())
	old := cached.(*Record)
	counted := countdownOf(Pending{Missed: 1, Since: time.Unix(0, 0)}, time.Unix(1, 0))
	var cleared Changes
	clearCountdown(&cleared, old)
	require.Len(t, cleared.Update, 1)
	for _, tc := range []struct {
		name      string
		countdown map[string]string
		full      func() *corev1.Secret
		want      map[string]string // annotations; nil: not written
	}{
		{"countdown, same version", counted, func() *corev1.Secret { return full }, map[string]string{"note": "n",
			AnnotationMissingSince: "1970-01-01T00:00:00Z", AnnotationMissingListings: "1", AnnotationMissingListing: "1970-01-01T00:00:01Z"}},
		{"countdown cleared", cleared.Update[0].Countdown, func() *corev1.Secret { return full }, map[string]string{"note": "n"}},
		{"changed since", counted, func() *corev1.Secret { s := full.DeepCopy(); s.ResourceVersion = "8"; return s }, nil},
		{"re-created", counted, func() *corev1.Secret { s := full.DeepCopy(); s.UID = "u2"; return s }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := full.DeepCopy()
			out := onFresh(old, tc.countdown, tc.full())
			assert.Equal(t, before, full, "the Secret read is not changed")
			if tc.want == nil {
				assert.Nil(t, out)
				return
			}
			require.NotNil(t, out)
			assert.Equal(t, full.Data, out.Data, "the full data")
			assert.Equal(t, full.Labels, out.Labels, "the full labels")
			assert.Equal(t, tc.want, out.Annotations)
		})
	}
}
