package kube

import (
	"fmt"
	"net/http"

	"k8s.io/client-go/rest"
)

// ForLeases returns what a client of the coordination API (the
// long-running mode's Lease) is built from: a copy of cfg, the config the
// Client was made from, with the API server's warnings going to the
// Client's log and its own token bucket, and the Client's one HTTP client,
// so that every request of the leader election is counted and bounded as
// a sweep's are. The parts, not the client: a typed client built here
// would link client-go's generated clients into every binary that links
// kube, the Lambda's too.
func (c *Client) ForLeases(cfg *rest.Config) (*rest.Config, *http.Client, error) {
	rc, ok := c.arc.(*rest.RESTClient)
	if !ok || rc.Client == nil {
		return nil, nil, fmt.Errorf("kube client: no HTTP client to share with the Lease's")
	}
	lc := rest.CopyConfig(cfg)
	lc.WarningHandler, lc.WarningHandlerWithContext = nil, warnings{log: c.log}
	if lc.RateLimiter == nil && lc.QPS == 0 {
		lc.QPS, lc.Burst = DefaultQPS, DefaultBurst
	}
	return lc, rc.Client, nil
}
