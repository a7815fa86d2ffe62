package deploy_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
)

// TestRevokeHook: with a Rancher source, uninstalling runs revoke-tokens
// as the service's ServiceAccount with the service's configuration and
// credentials (the ServiceAccount's uid names the installation in the
// tokens); an unreachable Rancher does not block the uninstall. Without a
// Rancher source, or with tokens.revokeOnUninstall false, there is no hook.
func TestRevokeHook(t *testing.T) {
	c := caseNamed(t, "rancher")
	ms := render(t, c)
	jd, ok := ms.find("Job", c.ns, release+"-revoke-tokens")
	require.True(t, ok, "the revoke-tokens hook Job")
	job := into[batchv1.Job](t, jd)
	assert.Equal(t, "pre-delete", job.Annotations["helm.sh/hook"])
	spec := job.Spec.Template.Spec
	dd, ok := ms.find("Deployment", c.ns, release)
	require.True(t, ok)
	dep := into[appsv1.Deployment](t, dd)
	assert.Equal(t, dep.Spec.Template.Spec.ServiceAccountName, spec.ServiceAccountName, "the installation is the service's ServiceAccount")
	ctr := spec.Containers[0]
	assert.Equal(t, []string{"revoke-tokens", "--ignore-errors", "--config", dep.Spec.Template.Spec.Containers[0].Args[2]}, ctr.Args)
	mounts := map[string]string{}
	for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	for _, m := range ctr.VolumeMounts {
		assert.Equal(t, mounts[m.Name], m.MountPath, "mounted where the service reads it: %s", m.Name)
	}
	assert.Contains(t, mounts, "credentials")
	assert.NotContains(t, job.Spec.Template.Labels, "app.kubernetes.io/name: "+release, "not counted by the Service")

	_, ok = render(t, c, "--set", "tokens.revokeOnUninstall=false").find("Job", c.ns, release+"-revoke-tokens")
	assert.False(t, ok, "turned off")
	d := caseNamed(t, "default")
	_, ok = render(t, d).find("Job", d.ns, release+"-revoke-tokens")
	assert.False(t, ok, "no Rancher source: no tokens to revoke")
}

// TestHookJobNamesFitALabel: a Job's name is also its pods' job-name
// label (at most 63 characters): the hooks' Jobs are named within it
// whatever the release's name, or the hook cannot be created (an
// uninstall blocked by its pre-delete hook).
func TestHookJobNamesFitALabel(t *testing.T) {
	c := caseNamed(t, "rancher")
	for _, full := range []string{"", strings.Repeat("f", 63), strings.Repeat("f", 50) + "-fleet"} {
		var extra []string
		if full != "" {
			extra = []string{"--set", "fullnameOverride=" + full}
		}
		var suffixes []string
		for _, j := range render(t, c, extra...).all("Job") {
			name := j.GetName()
			assert.LessOrEqual(t, len(name), 63, name)
			assert.NotContains(t, name, "--", name)
			for _, suffix := range []string{"-revoke-tokens", "-validate"} {
				if strings.HasSuffix(name, suffix) {
					suffixes = append(suffixes, suffix)
				}
			}
		}
		assert.ElementsMatch(t, []string{"-revoke-tokens", "-validate"}, suffixes, "both hooks, their suffixes whole")
	}
}
