// Command image assembles runner-reaper's container image FROM scratch with
// no daemon and no base image: nothing is pulled, so it builds wherever Go
// and Debian's CA bundle are at hand. `make image` runs `build`; `make push`
// runs `push`.
//
// The image holds only what the CronJob needs: the static binary at the path
// k8s-cronjob/cronjob.yaml runs, a CA bundle (GitHub is reached over TLS),
// and passwd/group entries for the nonroot user 65532 it runs as. There is
// no shell. Every timestamp is the commit's, and layers are written in a
// fixed order, so one commit gives the same digests on every machine.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// binaryPath is where k8s-cronjob/cronjob.yaml's command expects it.
	binaryPath = "runner-reaper"
	caPath     = "etc/ssl/certs/ca-certificates.crt"
	uid        = 65532
	user       = "65532:65532"
)

const usage = `usage:
  image build --bin linux/amd64=PATH --bin linux/arm64=PATH --ca PATH
              --version V --revision R --created UNIX --source URL --ref NAME:TAG
              --layout DIR [--tarball linux/amd64=PATH]
  image push --layout DIR --ref NAME:TAG
`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// platformPaths collects repeated --bin / --tarball flags: os/arch=path.
type platformPaths map[string]string

func (p platformPaths) String() string { return fmt.Sprint(map[string]string(p)) }

func (p platformPaths) Set(s string) error {
	plat, path, ok := strings.Cut(s, "=")
	if !ok || !strings.Contains(plat, "/") || path == "" {
		return fmt.Errorf("%q is not os/arch=path (example: linux/amd64=dist/bin/linux-amd64/runner-reaper)", s)
	}
	p[plat] = path
	return nil
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	bins, tarballs := platformPaths{}, platformPaths{}
	fs.Var(bins, "bin", "os/arch=path of a static runner-reaper binary (repeat per platform)")
	fs.Var(tarballs, "tarball", "os/arch=path: also write that platform's image as a docker-archive tarball")
	ca := fs.String("ca", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to ship")
	version := fs.String("version", "dev", "org.opencontainers.image.version")
	revision := fs.String("revision", "unknown", "org.opencontainers.image.revision")
	created := fs.Int64("created", 0, "the image's timestamp, seconds since 1970 (the commit's time)")
	source := fs.String("source", "https://github.com/runner-reaper/runner-reaper", "org.opencontainers.image.source")
	ref := fs.String("ref", "ghcr.io/runner-reaper/runner-reaper:latest", "the image's name and tag")
	dir := fs.String("layout", "dist/image", "OCI layout directory")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	tag, err := name.NewTag(*ref)
	if err != nil {
		return fmt.Errorf("--ref %q: %w", *ref, err)
	}
	switch args[0] {
	case "build":
		idx, err := build(bins, *ca, labels(*source, *revision, *version), time.Unix(*created, 0).UTC())
		if err != nil {
			return err
		}
		if err := writeLayout(*dir, idx, tag); err != nil {
			return err
		}
		return writeTarballs(idx, tarballs, tag)
	case "push":
		return push(*dir, tag)
	default:
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
}

func labels(source, revision, version string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":   source,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.title":    "runner-reaper",
	}
}

// build makes one image per platform and the index over them. The base
// layer (users and CA bundle) is the same for every platform, so registries
// store it once.
func build(bins platformPaths, caFile string, lbls map[string]string, created time.Time) (v1.ImageIndex, error) {
	if len(bins) == 0 {
		return nil, errors.New("no --bin given")
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle (Debian's ca-certificates provides it): %w", err)
	}
	base, err := layer(created, []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: caPath, mode: 0o644, data: ca},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: uid},
	})
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	plats := make([]string, 0, len(bins))
	for p := range bins {
		plats = append(plats, p)
	}
	sort.Strings(plats)

	var adds []mutate.IndexAddendum
	for _, p := range plats {
		osName, arch, _ := strings.Cut(p, "/")
		bin, err := os.ReadFile(bins[p])
		if err != nil {
			return nil, fmt.Errorf("read %s binary: %w", p, err)
		}
		binLayer, err := layer(created, []file{{name: binaryPath, mode: 0o755, data: bin}})
		if err != nil {
			return nil, fmt.Errorf("%s binary layer: %w", p, err)
		}
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		img, err = mutate.AppendLayers(img, base, binLayer)
		if err != nil {
			return nil, fmt.Errorf("%s layers: %w", p, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = osName, arch
		cf.Created = v1.Time{Time: created}
		cf.Config.User = user
		cf.Config.Entrypoint = []string{"/" + binaryPath}
		cf.Config.Cmd = nil
		cf.Config.WorkingDir = "/"
		cf.Config.Labels = lbls
		for i := range cf.History {
			cf.History[i].Created = v1.Time{Time: created}
		}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, fmt.Errorf("%s config: %w", p, err)
		}
		desc, err := partial(img)
		if err != nil {
			return nil, err
		}
		desc.Platform = &v1.Platform{OS: osName, Architecture: arch}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: desc})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(idx, adds...), nil
}

func partial(img v1.Image) (v1.Descriptor, error) {
	mt, err := img.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt}, nil
}

type file struct {
	name string
	mode int64
	data []byte
	dir  bool
	uid  int
}

// layer writes a tar with the given entries in order, every mtime the
// image's creation time and owners numeric, so its digest depends only on
// the contents.
func layer(created time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: created, Uid: f.uid, Gid: f.uid, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// writeLayout replaces dir with an OCI layout whose index.json names the
// image index by its tag, so `skopeo copy oci:dist/image` and `crane push`
// find it.
func writeLayout(dir string, idx v1.ImageIndex, tag name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout %s: %w", dir, err)
	}
	err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.TagStr(),
		"io.containerd.image.name":          tag.String(),
	}))
	if err != nil {
		return fmt.Errorf("write image index to %s: %w", dir, err)
	}
	return nil
}

// writeTarballs writes the requested platforms' images as docker-archive
// tarballs, which `docker load` and `ctr images import` read.
func writeTarballs(idx v1.ImageIndex, want platformPaths, tag name.Tag) error {
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for plat, path := range want {
		var found bool
		for _, d := range m.Manifests {
			if d.Platform == nil || d.Platform.OS+"/"+d.Platform.Architecture != plat {
				continue
			}
			img, err := idx.Image(d.Digest)
			if err != nil {
				return fmt.Errorf("%s image: %w", plat, err)
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := tarball.WriteToFile(path, tag, img); err != nil {
				return fmt.Errorf("write %s tarball %s: %w", plat, path, err)
			}
			found = true
		}
		if !found {
			return fmt.Errorf("--tarball %s: no such platform was built", plat)
		}
	}
	return nil
}

// push sends the layout's image index to the registry in tag, with the
// credentials docker login or a credential helper left in ~/.docker.
func push(dir string, tag name.Tag) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		return fmt.Errorf("open layout %s (run make image first): %w", dir, err)
	}
	outer, err := p.ImageIndex()
	if err != nil {
		return err
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) != 1 {
		return fmt.Errorf("layout %s holds %d entries, want the one image index", dir, len(m.Manifests))
	}
	idx, err := outer.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(tag, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s: %w", tag, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", tag, d)
	return nil
}
