package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// dockerfile reads what the chart must agree with from the Dockerfile's
// final stage.
type dockerfile struct {
	user, expose, configPath, source, cmd string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	require.NoError(t, err)
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	stages := regexp.MustCompile(`(?m)^FROM `).Split(text, -1)
	final := stages[len(stages)-1]
	var d dockerfile
	for _, line := range strings.Split(final, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "USER":
			d.user = f[1]
		case "EXPOSE":
			d.expose = f[1]
		case "CMD":
			d.cmd = strings.Join(f[1:], " ")
			var args []string
			require.NoError(t, json.Unmarshal([]byte(d.cmd), &args))
			for i, a := range args {
				if a == "--config" && i+1 < len(args) {
					d.configPath = args[i+1]
				}
			}
		case "LABEL":
			if m := regexp.MustCompile(`org\.opencontainers\.image\.source="([^"]+)"`).FindStringSubmatch(line); m != nil {
				d.source = m[1]
			}
		}
	}
	return d
}

// TestImageMatchesDockerfile: the chart's default image is the one the
// Dockerfile builds (ghcr.io/<owner>/<repo> of its source label, tag the
// chart's appVersion), run as its user, on its port, with the configuration
// where its CMD reads it.
func TestImageMatchesDockerfile(t *testing.T) {
	d := readDockerfile(t)
	require.NotEmpty(t, d.source, "LABEL org.opencontainers.image.source in the final stage")
	repo := "ghcr.io/" + strings.ToLower(strings.TrimPrefix(d.source, "https://github.com/"))

	var values struct {
		Image struct{ Repository, Tag string }
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &values))
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	b, err = os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &chart))
	assert.Equal(t, repo, values.Image.Repository, "image.repository is the Dockerfile's image")
	assert.Empty(t, values.Image.Tag, "image.tag defaults to appVersion")
	require.Regexp(t, `^[0-9]+\.[0-9]+\.[0-9]+`, chart.AppVersion)

	dep := into[appsv1.Deployment](t, render(t, caseNamed(t, "default")).one(t, "Deployment"))
	ctr := dep.Spec.Template.Spec.Containers[0]
	assert.Equal(t, repo+":"+chart.AppVersion, ctr.Image)

	uid, gid, _ := strings.Cut(d.user, ":")
	sc := dep.Spec.Template.Spec.SecurityContext
	assert.Equal(t, uid, fmt.Sprint(*sc.RunAsUser), "runAsUser is the Dockerfile's USER")
	assert.Equal(t, gid, fmt.Sprint(*sc.RunAsGroup))
	assert.Equal(t, d.expose, fmt.Sprint(port(t, ctr, "http")), "the http port is the Dockerfile's EXPOSE")
	require.NotEmpty(t, d.configPath)
	assert.Equal(t, filepath.Dir(d.configPath), mountOf(t, ctr, "config").MountPath, "config.yaml is mounted where CMD reads it")
	assert.Contains(t, ctr.Args, d.configPath)
}
