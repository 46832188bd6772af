package kube

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig finds the cluster to sweep. A KUBECONFIG that is set says which
// cluster a person means, so it wins, as it does for controller-runtime and
// kubectl, even inside a pod. Otherwise, run as a CronJob, the reaper talks to
// its own cluster as its ServiceAccount; run by hand, it uses ~/.kube/config.
// The error names every attempt, because "no configuration" alone does not
// say whether the pod lacked its token or the laptop its file.
func RESTConfig() (*rest.Config, error) {
	return restConfig(os.Getenv(clientcmd.RecommendedConfigPathEnvVar), rest.InClusterConfig, clientcmd.NewDefaultClientConfigLoadingRules())
}

// restConfig is RESTConfig with its sources passed in, so that every order
// of success and failure can be tested outside a pod.
func restConfig(explicit string, inCluster func() (*rest.Config, error), rules *clientcmd.ClientConfigLoadingRules) (*rest.Config, error) {
	if explicit != "" {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("cluster config from KUBECONFIG=%s: %w", explicit, err)
		}
		return cfg, nil
	}
	cfg, inErr := inCluster()
	if inErr == nil {
		return cfg, nil
	}
	// A pod whose ServiceAccount token is not mounted may still carry a
	// kubeconfig (a remote cluster), so an in-cluster failure is not final.
	kcfg, kErr := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if kErr == nil {
		return kcfg, nil
	}
	tried := strings.Join(rules.GetLoadingPrecedence(), ", ")
	if tried == "" {
		tried = "no file"
	}
	if clientcmd.IsEmptyConfig(kErr) {
		// client-go's own words for it name KUBERNETES_MASTER, which
		// nothing here reads.
		kErr = errors.New("no kubeconfig was found there: set KUBECONFIG to a kubeconfig file's path, or run the reaper in a pod")
	}
	if errors.Is(inErr, rest.ErrNotInCluster) {
		return nil, fmt.Errorf("cluster config: not running in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT unset), and kubeconfig (tried %s): %w", tried, kErr)
	}
	return nil, fmt.Errorf("cluster config: in-cluster config failed (%w), and kubeconfig (tried %s): %w", inErr, tried, kErr)
}
