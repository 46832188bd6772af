package testenv

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
)

// pauseImage builds ./pause as a static binary and wraps it in a one-layer
// docker-archive tarball tagged PauseImage, for `ctr images import`: the
// cluster's sandbox image, and the process its stand-in runner pods run.
func pauseImage(root, dir string) ([]string, error) {
	bin := filepath.Join(dir, "pause-bin")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./test/testenv/pause")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the pause binary: %w: %s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
		return nil, err
	}
	if _, err := lw.Write(data); err != nil {
		return nil, err
	}
	if err := lw.Close(); err != nil {
		return nil, err
	}
	diffID := sha256.Sum256(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{"/pause"}, "User": "65532:65532"},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	})
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal([]map[string]any{{
		"Config": "config.json", "RepoTags": []string{PauseImage}, "Layers": []string{"layer.tar"},
	}})
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "pause.tar")
	f, err := os.Create(out)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{"config.json", config}, {"layer.tar", layer.Bytes()}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: time.Unix(0, 0)}); err != nil {
			f.Close()
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return nil, err
	}
	return []string{out}, f.Close()
}
