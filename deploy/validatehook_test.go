package deploy_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestValidateHook: before an install or upgrade, a hook Job runs the
// binary's validate command on its own copy of the rendered configuration.
// No kubelet runs Jobs here, so the test runs that command, with the Job's
// arguments, on the files of the hook's ConfigMap: what the schema cannot
// judge fails there, so it fails the install.
func TestValidateHook(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "argocd-cluster-discovery")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/argocd-cluster-discovery").CombinedOutput()
	require.NoError(t, err, string(out))

	tests := []struct {
		name    string
		extra   []string
		code    int
		wantErr string
	}{
		{name: "the default values are valid", code: 0},
		{name: "two sources with one name", code: 2, wantErr: "sources[1].name: Duplicate value",
			extra: []string{"--set-json", `config.sources=[{"name":"a","provider":"static","static":{"file":"clusters.yaml"}},{"name":"a","provider":"static","static":{"file":"clusters.yaml"}}]`}},
		{name: "a static file missing from files", code: 2, wantErr: "missing.yaml",
			extra: []string{"--set-json", `config.sources=[{"name":"a","provider":"static","static":{"file":"missing.yaml"}}]`}},
	}
	c := caseNamed(t, "default")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := render(t, c, tt.extra...)
			jd, ok := ms.find("Job", c.ns, release+"-validate")
			require.True(t, ok, "the validate hook Job")
			job := into[batchv1.Job](t, jd)
			assert.Equal(t, "pre-install,pre-upgrade", job.Annotations["helm.sh/hook"])
			ctr := job.Spec.Template.Spec.Containers[0]
			require.Len(t, ctr.Args, 4)
			assert.Equal(t, []string{"validate", "--no-credentials", "--config"}, ctr.Args[:3])
			assert.NotContains(t, job.Spec.Template.Labels, "app.kubernetes.io/name: "+release, "not counted by the Service")

			cd, ok := ms.find("ConfigMap", c.ns, release+"-validate")
			require.True(t, ok, "the hook's copy of the configuration")
			cm := into[corev1.ConfigMap](t, cd)
			assert.Equal(t, job.Annotations["helm.sh/hook"], cm.Annotations["helm.sh/hook"])
			assert.Less(t, cm.Annotations["helm.sh/hook-weight"], job.Annotations["helm.sh/hook-weight"], "the ConfigMap is created first")
			_, live := configOf(t, ms, c)
			assert.Equal(t, live.Data, cm.Data, "the hook validates what the pods will read")

			dir := t.TempDir()
			for name, content := range cm.Data {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
			}
			cmd := exec.Command(bin, "validate", "--no-credentials", "--config", filepath.Join(dir, filepath.Base(ctr.Args[3])))
			out, err := cmd.CombinedOutput()
			code := 0
			ee := &exec.ExitError{}
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.code, code, string(out))
			assert.Contains(t, string(out), tt.wantErr)
		})
	}
}
