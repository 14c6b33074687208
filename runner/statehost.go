package runner

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// StateHostFile is the file in the data directory that holds the directory's id (StateHost).
const StateHostFile = "state-host"

// StateHost returns the id of the data directory dataDir: what dataDir/StateHostFile holds,
// written on first use as "<host name>-<8 random hex digits>" (e.g. "alfred-a-3f9c2a1b").
// Every session record names the id of the data directory its state was left in
// (phase.SessionRecord.StateHost). Replicas sharing one data directory (the Kubernetes
// runtime's state claim) read the same id; a replica with a data directory of its own (Docker
// on several hosts) has another, which stays the same across its restarts, whatever its host
// name then. Two replicas creating the file at once agree: the file is linked into place, so
// the first one wins and the other reads it. Errors: the directory or the file cannot be read
// or written.
func StateHost(dataDir string) (string, error) {
	path := filepath.Join(dataDir, StateHostFile)
	if id, err := readStateHost(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return id, err
	}
	host, _ := os.Hostname()
	host = hostChars.ReplaceAllString(strings.ToLower(host), "-")
	host = strings.Trim(host[:min(len(host), 40)], "-")
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("state host id: %w", err)
	}
	id := strings.TrimPrefix(host+"-"+hex.EncodeToString(b), "-")
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return "", fmt.Errorf("state host id: %w", err)
	}
	tmp, err := os.CreateTemp(dataDir, StateHostFile+".*")
	if err != nil {
		return "", fmt.Errorf("state host id: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(id + "\n")
	if err := errors.Join(werr, tmp.Close()); err != nil {
		return "", fmt.Errorf("state host id: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("state host id: %w", err)
	}
	return readStateHost(path)
}

// hostChars are the characters a host name loses in a state host id.
var hostChars = regexp.MustCompile(`[^a-z0-9-]+`)

func readStateHost(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("state host id: %s is empty", path)
	}
	return id, nil
}
