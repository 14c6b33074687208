package kubernetes_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/kubernetes"
)

// TestNewClientsetRateLimit: the clientset allows ClientQPS requests a second, not client-go's
// default of 5, whose burst of 10 two runs at once empty (every request after it then waited
// 200 ms). The kubeconfig names a server that is never contacted.
func TestNewClientsetRateLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	cs, err := kubernetes.NewClientset(path)
	require.NoError(t, err)
	limiter := cs.CoreV1().RESTClient().GetRateLimiter()
	require.NotNil(t, limiter)
	require.EqualValues(t, kubernetes.ClientQPS, limiter.QPS())
}
