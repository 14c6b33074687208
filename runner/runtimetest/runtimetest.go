// Package runtimetest holds helpers for tests that need a real Docker daemon: a client that
// skips or fails the test when no daemon is reachable, BuildImage to build a FROM-scratch image
// from a Go main package (no registry is needed), and RunRuntimeConformance, the suite every
// runner.Runtime implementation must pass.
package runtimetest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// ProbePackage is the import path of the probe program used by RunRuntimeConformance; build it
// with BuildImage. Its subcommands are documented in testdata/probe/main.go.
const ProbePackage = "github.com/alfred-bot/alfred/runner/runtimetest/testdata/probe"

// ImageUser is the uid:gid set by USER in images built by BuildImage.
const ImageUser = "65532:65532"

// ImageUID and ImageGID are the numeric parts of ImageUser.
const (
	ImageUID = 65532
	ImageGID = 65532
)

// Client returns a Docker client (environment config, API version negotiation) after checking
// that the daemon answers a ping. When it does not, the test is skipped with a loud message if
// the CI environment variable is unset, and fails if CI is set. The client is closed at the end
// of the test.
func Client(tb testing.TB) *client.Client {
	tb.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = cli.Ping(ctx)
		cancel()
		if err != nil {
			_ = cli.Close()
		}
	}
	if err != nil {
		if os.Getenv("CI") == "" {
			tb.Skipf("!!! SKIPPING DOCKER TEST %s: no Docker daemon reachable (%v). Set CI=1 to turn this into a failure. !!!", tb.Name(), err)
		}
		tb.Fatalf("Docker daemon required (CI is set): %v", err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// BuildImage compiles the Go main package mainPkg (an import path or a ./relative directory,
// resolved from the test's working directory) with CGO_ENABLED=0 for the daemon's
// architecture, and builds through the Engine API (tar build context, classic builder) the
// image
//
//	FROM scratch
//	COPY <name> /<name>
//	USER 65532:65532
//	ENTRYPOINT ["/<name>"]
//
// tagged tag, where <name> is the last element of mainPkg. It returns tag. The image is removed
// when the test ends, so give each test binary its own tag. Failures are fatal to the test.
func BuildImage(tb testing.TB, ctx context.Context, cli *client.Client, tag string, mainPkg string) string {
	tb.Helper()
	name := path.Base(filepath.ToSlash(mainPkg))
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY %s /%s\nUSER %s\nENTRYPOINT [\"/%s\"]\n", name, name, ImageUser, name)
	return BuildImageFrom(tb, ctx, cli, tag, mainPkg, dockerfile)
}

// BuildImageFrom is BuildImage with the caller's Dockerfile: the build context holds only the
// Dockerfile and the compiled binary, named <name> (the last element of mainPkg).
func BuildImageFrom(tb testing.TB, ctx context.Context, cli *client.Client, tag, mainPkg, dockerfile string) string {
	tb.Helper()
	if err := buildImage(ctx, cli, tag, mainPkg, dockerfile, tb.TempDir()); err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = cli.ImageRemove(ctx, tag, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	return tag
}

// buildImage compiles mainPkg in dir and builds the image tag from dockerfile through the
// Engine API (BuildImageFrom).
func buildImage(ctx context.Context, cli *client.Client, tag, mainPkg, dockerfile, dir string) error {
	ver, err := cli.ServerVersion(ctx)
	if err != nil {
		return fmt.Errorf("docker version: %w", err)
	}
	name := path.Base(filepath.ToSlash(mainPkg))
	bin := filepath.Join(dir, name)
	// The environment's GOFLAGS and CGO_ENABLED=0, as `make test` compiles the tests with
	// (-trimpath among them): the binary shares the build cache's compiled packages with them
	// (-ldflags is the link's alone).
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", bin, mainPkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+ver.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", mainPkg, err, out)
	}
	binData, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("read built binary: %w", err)
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {name, 0o755, binData}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return fmt.Errorf("tar: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("tar: %w", err)
	}

	resp, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  "Dockerfile",
		Remove:      true,
		ForceRemove: true,
		// No cache: the binaries are reproducible, so without it a build of another test
		// binary's tag from the same sources reuses this image's layers, and this test's
		// cleanup (ImageRemove) can remove a layer the other build is about to tag ("layer
		// does not exist"). A scratch image of one file builds in well under a second.
		NoCache: true,
		Version: build.BuilderV1,
	})
	if err != nil {
		return fmt.Errorf("docker build %s: %w", tag, err)
	}
	defer resp.Body.Close()
	if err := readBuildStream(resp.Body); err != nil {
		return fmt.Errorf("docker build %s: %w", tag, err)
	}
	return nil
}

// sharedImage is one image BuildImageOnce builds for every test of the process.
type sharedImage struct {
	once sync.Once
	tag  string
	err  error
}

var shared struct {
	mu     sync.Mutex
	images map[string]*sharedImage // by main package and Dockerfile
	dir    string                  // the build directory of every shared image
}

// BuildImageOnce is BuildImage for the tests of one process that run the same image: the first
// call for mainPkg compiles and builds it, once for the process, and every call (the first
// included) returns tag, a tag of the caller's own on that image, removed when the test ends.
// So a test (or its cluster import, or its cleanup) never shares a tag with another, and the
// build is paid once per package instead of once per test. The shared image itself outlives
// the tests: the package's TestMain calls RemoveImagesBuiltOnce after m.Run.
func BuildImageOnce(tb testing.TB, ctx context.Context, cli *client.Client, tag, mainPkg string) string {
	tb.Helper()
	name := path.Base(filepath.ToSlash(mainPkg))
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY %s /%s\nUSER %s\nENTRYPOINT [\"/%s\"]\n", name, name, ImageUser, name)
	return BuildImageFromOnce(tb, ctx, cli, tag, mainPkg, dockerfile)
}

// BuildImageFromOnce is BuildImageOnce with the caller's Dockerfile (BuildImageFrom).
func BuildImageFromOnce(tb testing.TB, ctx context.Context, cli *client.Client, tag, mainPkg, dockerfile string) string {
	tb.Helper()
	shared.mu.Lock()
	if shared.images == nil {
		shared.images = map[string]*sharedImage{}
	}
	key := mainPkg + "\x00" + dockerfile
	img := shared.images[key]
	if img == nil {
		img = &sharedImage{tag: fmt.Sprintf("alfred-test/shared-%s:%d-%d", path.Base(filepath.ToSlash(mainPkg)), os.Getpid(), len(shared.images))}
		shared.images[key] = img
	}
	if shared.dir == "" {
		shared.dir, img.err = os.MkdirTemp("", "alfred-shared-images-")
	}
	dir := shared.dir
	shared.mu.Unlock()
	img.once.Do(func() {
		if img.err == nil {
			sub, err := os.MkdirTemp(dir, "build-")
			if err != nil {
				img.err = err
				return
			}
			img.err = buildImage(context.WithoutCancel(ctx), cli, img.tag, mainPkg, dockerfile, sub)
		}
	})
	if img.err != nil {
		tb.Fatalf("shared image %s: %v", img.tag, img.err)
	}
	if err := cli.ImageTag(ctx, img.tag, tag); err != nil {
		tb.Fatalf("docker tag %s %s: %v", img.tag, tag, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The shared image keeps its own tag, so this removes only the test's tag.
		_, _ = cli.ImageRemove(ctx, tag, image.RemoveOptions{})
	})
	return tag
}

// RemoveImagesBuiltOnce removes the images BuildImageOnce and BuildImageFromOnce built in this
// process and their build directory; a package whose tests call them calls it from TestMain
// once m.Run returns.
func RemoveImagesBuiltOnce() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if len(shared.images) > 0 {
		if cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation()); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			for _, img := range shared.images {
				_, _ = cli.ImageRemove(ctx, img.tag, image.RemoveOptions{Force: true, PruneChildren: true})
			}
			cancel()
			_ = cli.Close()
		}
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	shared.images, shared.dir = nil, ""
}

// readBuildStream drains the JSON message stream of an image build and returns its error, if
// any, with the build output for context.
func readBuildStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	var log strings.Builder
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read build output: %w", err)
		}
		log.WriteString(msg.Stream)
		if msg.Error != "" || msg.ErrorDetail != nil {
			m := msg.Error
			if m == "" {
				m = msg.ErrorDetail.Message
			}
			return fmt.Errorf("%s\n%s", m, log.String())
		}
	}
}
