package testenv

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// ImageRef is the name BuildImage gives the image, tagged with the test
// version so nothing could mistake it for a release.
const ImageRef = "ghcr.io/runner-reaper/runner-reaper:" + BinaryVersion

// Image is what `make image` wrote into a directory of the test's.
type Image struct {
	// Layout is the OCI layout holding the two-architecture image index.
	Layout string
	// Tarball is the linux/amd64 image as a docker-archive, for
	// `ctr images import`.
	Tarball string
}

// BuildImage runs `make image` itself, with dist/ moved into dir and the
// test version and revision linked in, so the tests check exactly what the
// Makefile ships and never a stale dist/. Go's build cache makes every run
// after the first take seconds.
func BuildImage(dir string) (Image, error) {
	root, err := RepoRoot()
	if err != nil {
		return Image{}, err
	}
	cmd := exec.Command("make", "-s", "image", "DIST="+dir, "VERSION="+BinaryVersion,
		"REVISION="+BinaryRevision, "IMAGE="+ImageRef)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return Image{}, fmt.Errorf("make image: %w\n%s", err, b)
	}
	return Image{
		Layout:  filepath.Join(dir, "image"),
		Tarball: filepath.Join(dir, "runner-reaper-linux-amd64.tar"),
	}, nil
}
