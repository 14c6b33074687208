// Package realcli proves the claude-code and codex adapters against the real CLIs from the npm
// registry. It has no code of its own, only tests:
//
//   - with the build tag realcli (make realcli-test), the CLIs installed under
//     $ALFRED_REALCLI_DIR (npm --prefix) are run on the host, with exactly the argv and env the
//     adapters' Command produces (binary path replaced; HOME a temp dir; cwd a temp git
//     worktree; stdin /dev/null; base URL pointing at agenttest/mockmodel). Their real stdout
//     is parsed with the adapters' ParseStream and Result: a fresh run, a resume by exact id
//     whose reply proves the history was sent back, and a resume of an unknown id that must be
//     runner.ErrSessionNotFound. With -update the streams are recorded as
//     claudecode/testdata/real_*.jsonl and codex/testdata/real_*.jsonl (plus .meta.json);
//   - without the tag, the recorded streams are parsed again through the adapters, so a plain
//     `go test ./runner/agent/...` proves the parsers against real output without npm.
package realcli
