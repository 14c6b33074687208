package main

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"
)

// A run page's live log of a container that flooded reads the engine's whole log but keeps
// only the tail it shows: its memory is bounded by the window, not by the log (the json-file
// log holds up to 100 MiB).
func TestDockerLiveLogKeepsOnlyItsWindow(t *testing.T) {
	const total, window = 48 << 20, 256 << 10
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/containers/flood/logs") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.docker.raw-stream")
		frame := bytes.Repeat([]byte("flood line\n"), 3000)
		head := make([]byte, 8)
		head[0] = 1 // stdout
		binary.BigEndian.PutUint32(head[4:], uint32(len(frame)))
		for sent := 0; sent < total; sent += len(frame) {
			_, _ = w.Write(head)
			_, _ = w.Write(frame)
		}
		_, _ = w.Write(append([]byte{1, 0, 0, 0, 0, 0, 0, 8}, "the end\n"...))
	}))
	defer srv.Close()
	cli, err := client.NewClientWithOpts(client.WithHost("tcp://"+strings.TrimPrefix(srv.URL, "http://")), client.WithVersion("1.43"))
	require.NoError(t, err)
	defer cli.Close()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := dockerLogs{cli}.RunLog(t.Context(), "flood", window)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Len(t, got, window)
	require.True(t, strings.HasSuffix(got, "flood line\nthe end\n"))
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "allocated far more than the window")
}
