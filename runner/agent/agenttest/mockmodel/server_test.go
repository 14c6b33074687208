package mockmodel_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/agent/agenttest/mockmodel"
)

func TestMarks(t *testing.T) {
	t.Parallel()
	body := []byte(`{"a":"remember MARK-ALPHA","b":["MARK-BETA","MARK-ALPHA"],"c":"MARK-"}`)
	require.Equal(t, []string{"MARK-ALPHA", "MARK-BETA"}, mockmodel.Marks(body))
	require.Equal(t, "MOCK reply; marks seen: MARK-ALPHA,MARK-BETA", mockmodel.Reply(body))
	require.Equal(t, "MOCK reply; marks seen: ", mockmodel.Reply(nil))
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestProtocols(t *testing.T) {
	t.Parallel()
	s := mockmodel.New(t)
	code, body := post(t, s.URL+"/v1/messages?beta=true", `{"model":"m","stream":true,"messages":[{"role":"user","content":"MARK-ALPHA"}]}`)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "event: message_start\n")
	require.Contains(t, body, `"text":"MOCK reply; marks seen: MARK-ALPHA"`)
	require.True(t, strings.HasSuffix(body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))

	code, body = post(t, s.URL+"/v1/messages", `{"model":"m","messages":[{"role":"user","content":"MARK-BETA"}]}`)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"text":"MOCK reply; marks seen: MARK-BETA"`)

	code, body = post(t, s.URL+"/v1/responses", `{"model":"m","stream":true,"input":[{"role":"user","content":"MARK-GAMMA"}]}`)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "event: response.output_item.done\n")
	require.Contains(t, body, `"text":"MOCK reply; marks seen: MARK-GAMMA"`)
	require.Contains(t, body, "event: response.completed\n")

	code, _ = post(t, s.URL+"/v1/nothing", `{}`)
	require.Equal(t, http.StatusNotFound, code)

	reqs := s.Requests()
	require.Len(t, reqs, 4)
	require.Equal(t, "/v1/messages", reqs[0].Path)
	require.Equal(t, http.StatusNotFound, reqs[3].Status)
	s.Reset()
	require.Empty(t, s.Requests())
}
