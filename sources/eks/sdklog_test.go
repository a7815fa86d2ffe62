package eks

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/smithy-go/logging"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
)

// TestSDKLogsThroughSlog: what the AWS SDK still logs (its warnings; the
// wire logs are off) comes out as records of the source's logger, in the
// service's format, instead of the SDK's own text lines on stderr.
func TestSDKLogsThroughSlog(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "example-secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_REGION", "eu-west-1")
	logs := &testlog.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("source", "aws")

	base, err := baseConfig(hooks{}, logger)
	require.NoError(t, err)
	assert.Equal(t, aws.ClientLogMode(0), base.ClientLogMode)
	client := eks.NewFromConfig(base)
	client.Options().Logger.Logf(logging.Warn, "clock skew of %s", "6m")
	client.Options().Logger.Logf(logging.Debug, "a detail")

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 2)
	var first, second map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &second))
	assert.Equal(t, "WARN", first["level"])
	assert.Equal(t, "clock skew of 6m", first["msg"])
	assert.Equal(t, "aws-sdk", first["component"])
	assert.Equal(t, "aws", first["source"])
	assert.Equal(t, "DEBUG", second["level"])

	// a configuration given by a test keeps its own logger
	own := logging.LoggerFunc(func(logging.Classification, string, ...any) {})
	base, err = baseConfig(hooks{awsConfig: &aws.Config{Logger: own}}, logger)
	require.NoError(t, err)
	assert.NotNil(t, base.Logger)
	_, ours := base.Logger.(sdkLogger)
	assert.False(t, ours)
}
