package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"

	"github.com/wmrl/wmrl/internal/dockerrun"
)

// Labels on everything the Docker sandbox creates: the containers carry
// dockerrun's (LabelSandbox, LabelDeadline, LabelOwner), the images
// LabelExecutor.
const (
	// LabelSandbox marks execution containers ("1"); Cleanup removes leaked ones.
	LabelSandbox = dockerrun.LabelSandbox
	// LabelDeadline is the unix time (seconds) by which the container's
	// execution has been killed and removed; past it, the container is
	// leaked.
	LabelDeadline = dockerrun.LabelDeadline
	// LabelOwner names the sandbox (host, process, random) that made the
	// container.
	LabelOwner = dockerrun.LabelOwner
	// LabelExecutor marks executor images, with the binary's sha256.
	LabelExecutor = "wmrl.executor"
)

// imageRepository is the name of executor images; the tag is the first 16
// hex digits of the binary's sha256, so a rebuilt binary gets a new image.
const imageRepository = "wmrl-executor"

// ImageTag is the image name:tag for the executor binary with contents b.
func ImageTag(b []byte) string {
	sum := sha256.Sum256(b)
	return imageRepository + ":" + hex.EncodeToString(sum[:8])
}

// EnsureImage returns the tag of the executor image for the static binary at
// path, building it locally (FROM scratch, never pulling) if the engine does
// not have it yet.
func EnsureImage(ctx context.Context, cli *client.Client, path string) (string, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read executor binary: %w", err)
	}
	return ensureImage(ctx, cli, bin)
}

// ensureImage is EnsureImage for the binary's contents.
func ensureImage(ctx context.Context, cli *client.Client, bin []byte) (string, error) {
	tag := ImageTag(bin)
	if _, err := cli.ImageInspect(ctx, tag); err == nil {
		return tag, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect image %s: %w", tag, err)
	}
	sum := sha256.Sum256(bin)
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY wmrl-executor /wmrl-executor\nUSER %d:%d\nENTRYPOINT [\"/wmrl-executor\"]\n", NobodyID, NobodyID)
	buildCtx, err := tarFiles(map[string][]byte{"Dockerfile": []byte(dockerfile), "wmrl-executor": bin})
	if err != nil {
		return "", err
	}
	resp, err := cli.ImageBuild(ctx, bytes.NewReader(buildCtx), build.ImageBuildOptions{
		Tags:        []string{tag},
		Labels:      map[string]string{LabelExecutor: hex.EncodeToString(sum[:])},
		Remove:      true,
		ForceRemove: true,
		PullParent:  false,
		Version:     build.BuilderV1, // the classic builder: FROM scratch needs no registry
	})
	if err != nil {
		return "", fmt.Errorf("build image %s: %w", tag, err)
	}
	defer resp.Body.Close()
	if err := readBuildOutput(resp.Body); err != nil {
		return "", fmt.Errorf("build image %s: %w", tag, err)
	}
	if _, err := cli.ImageInspect(ctx, tag); err != nil {
		return "", fmt.Errorf("inspect built image %s: %w", tag, err)
	}
	return tag, nil
}

// tarFiles makes a build context holding files (sorted, fixed metadata).
func tarFiles(files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"Dockerfile", "wmrl-executor"} {
		b, ok := files[name]
		if !ok {
			continue
		}
		hdr := &tar.Header{Name: name, Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
		if _, err := tw.Write(b); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	return buf.Bytes(), nil
}

// readBuildOutput drains the JSON message stream of a build and returns the
// first error it reports.
func readBuildOutput(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		err := dec.Decode(&msg)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read build output: %w", err)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
		if msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
	}
}
