// Package testenv starts the real control plane that the project's tests run
// against: envtest with the kube-apiserver and etcd built by `make
// envtest-assets`, with ARC's CRDs installed as they are.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const modulePath = "github.com/runner-reaper/runner-reaper"

// Env is a running test control plane.
type Env struct {
	env *envtest.Environment
	// users serialises user provisioning: envtest's client certificates
	// for users are not documented as safe for concurrent use.
	users sync.Mutex
	// arcCRDs serialises the install of the CRDs ARC's manager watches, so
	// that managers started in parallel do not race to create them.
	arcCRDs sync.Mutex
	// Config is an administrator's config.
	Config *rest.Config
	// Client is an administrator's clientset.
	Client kubernetes.Interface
	// Dynamic is an administrator's dynamic client, for ARC's objects.
	Dynamic dynamic.Interface
	// Root is the repository's top directory.
	Root string
}

// RepoRoot finds the directory holding the product's go.mod, so tests can
// find the binaries and testdata whatever package they run in.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			if strings.TrimSpace(first) == "module "+modulePath {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (the go.mod of " + modulePath + ") not found above the working directory")
		}
		dir = parent
	}
}

// AssetsDir is where `make envtest-assets` puts kube-apiserver, etcd and
// kubectl; KUBEBUILDER_ASSETS overrides it.
func AssetsDir(root string) string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	return filepath.Join(root, ".cache", "envtest")
}

// CRDDir is ARC's CRDs, vendored under testdata with their provenance.
func CRDDir(root string) string { return filepath.Join(root, "testdata", "arc-crds") }

// Start starts a control plane with RBAC on and ARC's CRDs installed. It
// fails rather than skips when the assets are missing: `make test` builds
// them, and a test that quietly does not run proves nothing.
func Start() (*Env, error) { return start(nil) }

// StartWithFlags is Start with extra kube-apiserver flags, for a test that
// needs a server configured unlike the shared one (a feature gate off).
func StartWithFlags(flags map[string]string) (*Env, error) {
	return start(func(e *envtest.Environment) {
		for k, v := range flags {
			e.ControlPlane.GetAPIServer().Configure().Set(k, v)
		}
	})
}

// start is Start, with configure given the environment before it starts.
func start(configure func(*envtest.Environment)) (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets := AssetsDir(root)
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("test control plane: %s missing from %s (run `make envtest-assets`): %w", bin, assets, err)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        []string{CRDDir(root)},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	env.ControlPlane.GetAPIServer().Configure().Set("authorization-mode", "RBAC")
	if configure != nil {
		configure(env)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start test control plane from %s: %w", assets, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("clientset for test control plane: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("dynamic client for test control plane: %w", err)
	}
	return &Env{env: env, Config: cfg, Client: cs, Dynamic: dyn, Root: root}, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.env.Stop() }

// Lazy starts the control plane on first use, so a package's tests that
// never touch the API server neither wait for it nor need its assets. A
// package declares one Lazy, calls Env from each test that needs the control
// plane, and stops it from TestMain with LazyMain.
type Lazy struct {
	once sync.Once
	env  *Env
	err  error
}

// Env returns the package's control plane, starting it the first time. In
// -short mode it skips the test instead: `make unit` runs without assets,
// and `make test`, which never passes -short, runs every such test.
func (l *Lazy) Env(t testing.TB) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the test control plane; `make test` runs it")
	}
	l.once.Do(func() { l.env, l.err = Start() })
	if l.err != nil {
		t.Fatalf("%v", l.err)
	}
	return l.env
}

// Stop stops the control plane if a test started it.
func (l *Lazy) Stop() error {
	if l.env == nil {
		return nil
	}
	return l.env.Stop()
}

// LazyMain runs a package's tests and stops the control plane afterwards if
// any of them started it; use it from TestMain.
func LazyMain(m *testing.M, l *Lazy) {
	code := m.Run()
	if err := l.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop test control plane:", err)
	}
	os.Exit(code)
}

// AddUser creates a user that authenticates to the control plane and gets
// exactly what RBAC grants it, and returns its config.
func (e *Env) AddUser(name string, groups ...string) (*rest.Config, error) {
	e.users.Lock()
	defer e.users.Unlock()
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("add test user %s: %w", name, err)
	}
	return u.Config(), nil
}

// Kubeconfig writes an administrator's kubeconfig file into dir, for tests
// that run the binary as a process.
func (e *Env) Kubeconfig(dir string) (string, error) {
	return e.UserKubeconfig(dir, "reaper-admin", "system:masters")
}

// UserKubeconfig writes a kubeconfig file for a user who gets exactly what
// RBAC grants it. A name of the form system:serviceaccount:NS:NAME is
// matched by RoleBindings whose subject is that ServiceAccount, so a test
// can run the binary with the identity a manifest gives the CronJob.
func (e *Env) UserKubeconfig(dir, name string, groups ...string) (string, error) {
	e.users.Lock()
	u, err := e.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		e.users.Unlock()
		return "", fmt.Errorf("add kubeconfig user %s: %w", name, err)
	}
	e.users.Unlock()
	b, err := u.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("render kubeconfig for %s: %w", name, err)
	}
	path := filepath.Join(dir, "kubeconfig-"+strings.NewReplacer(":", "_", "/", "_").Replace(name))
	return path, os.WriteFile(path, b, 0o600)
}

// ServiceAccountKubeconfig writes a kubeconfig file for exactly the identity
// a pod running as ServiceAccount ns/name has, as RBAC sees it: the
// ServiceAccount's user name and groups.
func (e *Env) ServiceAccountKubeconfig(dir, ns, name string) (string, error) {
	return e.UserKubeconfig(dir, "system:serviceaccount:"+ns+":"+name,
		"system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
}

// Namespace creates a namespace with a unique name so tests do not see each
// other's pods.
func (e *Env) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns, err := e.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// Fixture is the path of a file under the repository's testdata, e.g.
// Fixture(t, "github", "runner-paginated.json"). Nothing a test reads lies
// outside the repository.
func Fixture(t testing.TB, parts ...string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("find fixture %v: %v", parts, err)
	}
	return filepath.Join(append([]string{root, "testdata"}, parts...)...)
}
