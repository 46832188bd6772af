package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Kustomization is what Kustomize renders: a base directory, or the base
// through a temporary overlay that adds components and a namespace.
type Kustomization struct {
	// Base is the base's directory.
	Base string
	// Components are component directories, each absolute or relative to
	// Base (e.g. "components/arc"), added in order.
	Components []string
	// Namespace, when set, moves every object into it.
	Namespace string
}

// Kustomize renders k with `kubectl kustomize` and returns the YAML. With
// neither components nor a namespace it renders the base itself; otherwise
// it writes an overlay into a temporary directory. kustomize refuses
// absolute paths to a base ("new root cannot be absolute"), so the overlay
// names the base and the components by paths relative to itself.
func Kustomize(t testing.TB, k Kustomization) []byte {
	t.Helper()
	out, err := KustomizeErr(t, k)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// KustomizeErr is Kustomize for a rendering that may be refused: kustomize's
// refusal is returned, not fatal.
func KustomizeErr(t testing.TB, k Kustomization) ([]byte, error) {
	t.Helper()
	base, err := filepath.Abs(k.Base)
	if err != nil {
		t.Fatalf("kustomize base %s: %v", k.Base, err)
	}
	dir := base
	if len(k.Components) > 0 || k.Namespace != "" {
		dir = t.TempDir()
		rel := func(p string) string {
			if !filepath.IsAbs(p) {
				p = filepath.Join(base, p)
			}
			r, err := filepath.Rel(dir, p)
			if err != nil {
				t.Fatalf("kustomize overlay: %v", err)
			}
			return r
		}
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\n", rel(base))
		if len(k.Components) > 0 {
			b.WriteString("components:\n")
			for _, c := range k.Components {
				fmt.Fprintf(&b, "  - %s\n", rel(c))
			}
		}
		if k.Namespace != "" {
			b.WriteString("namespace: " + k.Namespace + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o600); err != nil {
			t.Fatalf("write kustomize overlay: %v", err)
		}
	}
	if _, err := exec.LookPath("kubectl"); err != nil && testing.Short() {
		// `make unit` asks for nothing installed; `make test` installs
		// kubectl (make deps) and renders every manifest.
		t.Skip("needs kubectl to render the manifests; `make test` runs it")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("kubectl", "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w: %s", dir, err, stderr.String())
	}
	return stdout.Bytes(), nil
}
