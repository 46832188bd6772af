package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Serve is what the long-running mode (`runner-reaper serve`) adds to a
// sweep's configuration. Load checks each value's form, so that a typo is
// refused wherever it is read; LoadServe adds the rules only the
// long-running mode needs, so that a CronJob that sets none of these is
// unchanged.
type Serve struct {
	// Interval is the time from one sweep's start to the next one's.
	Interval time.Duration
	// Listen is the HOST:PORT of /metrics, /healthz and /readyz.
	Listen string
	// LeaseName and LeaseNamespace name the Lease of the leader election;
	// LeaseNamespace is "" outside a pod unless set.
	LeaseName, LeaseNamespace string
	// LeaseDuration is the Lease's duration, from which the renew deadline
	// and the retry period follow.
	LeaseDuration time.Duration
	// Identity is the prefix of this process's holderIdentity, to which
	// the elector adds a random suffix; "" asks the caller for the host
	// name.
	Identity string
}

const (
	// minInterval is the shortest REAPER_INTERVAL: a sweep lists every
	// scope on GitHub, and faster than this spends rate limit for news
	// the watches do not have yet.
	minInterval = 10 * time.Second
	// minLeaseDuration and maxLeaseDuration bound REAPER_LEASE_DURATION:
	// below 3 s the retry period (2/15 of it) is under half a second of
	// requests to the API server per replica; above 5 m a leader that died
	// without releasing the Lease holds every sweep back that long.
	minLeaseDuration = 3 * time.Second
	maxLeaseDuration = 5 * time.Minute
	// maxIdentity bounds REAPER_IDENTITY: a name a person reads in the
	// Lease and in the log.
	maxIdentity = 128
)

// validateServe checks the form of the long-running mode's variables,
// whichever command reads them, and returns them.
func validateServe(s spec, bad func(field, what string)) Serve {
	v := Serve{Interval: s.Interval, Listen: s.Listen, LeaseName: s.LeaseName, LeaseNamespace: s.LeaseNamespace,
		LeaseDuration: s.LeaseDuration, Identity: s.Identity}
	if s.Interval < minInterval {
		bad("Interval", fmt.Sprintf("must be at least %s, got %s", minInterval, s.Interval))
	}
	if why := listenProblem(s.Listen); why != "" {
		bad("Listen", why)
	}
	if errs := validation.IsDNS1123Subdomain(s.LeaseName); len(errs) > 0 {
		bad("LeaseName", fmt.Sprintf("%q is not a Lease name: %s", s.LeaseName, strings.Join(errs, "; ")))
	}
	if s.LeaseNamespace != "" {
		if errs := validation.IsDNS1123Label(s.LeaseNamespace); len(errs) > 0 {
			bad("LeaseNamespace", fmt.Sprintf("%q is not a namespace name (lower-case letters, digits and '-')", s.LeaseNamespace))
		}
	}
	switch {
	case s.LeaseDuration < minLeaseDuration || s.LeaseDuration > maxLeaseDuration:
		bad("LeaseDuration", fmt.Sprintf("must be between %s and %s, got %s", minLeaseDuration, maxLeaseDuration, s.LeaseDuration))
	case s.LeaseDuration%time.Second != 0:
		bad("LeaseDuration", fmt.Sprintf("must be whole seconds, as the Lease records it, got %s", s.LeaseDuration))
	}
	if s.Identity != "" {
		switch i := notPrintable(s.Identity); {
		case len(s.Identity) > maxIdentity:
			bad("Identity", fmt.Sprintf("is %d characters; at most %d", len(s.Identity), maxIdentity))
		case i >= 0:
			bad("Identity", fmt.Sprintf("has a control character or non-ASCII byte at position %d", i+1))
		case strings.Contains(s.Identity, " "):
			bad("Identity", fmt.Sprintf("has a space at position %d", strings.Index(s.Identity, " ")+1))
		}
	}
	return v
}

// listenProblem says what is wrong with a HOST:PORT to listen on, or "".
func listenProblem(v string) string {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Sprintf("%q is not HOST:PORT (an empty host for every interface: :8080)", v)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
		return fmt.Sprintf("%q: the port %q is not a number from 1 to 65535", v, port)
	}
	if host == "" || net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") {
		return ""
	}
	if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 {
		return fmt.Sprintf("%q: the host %q is neither an IP address nor a host name", v, host)
	}
	return ""
}

// LoadServe reads and validates the configuration as Load does, and the
// rules only the long-running mode needs: an interval longer than
// REAPER_SWEEP_TIMEOUT, so that a sweep always ends before the next is
// due, and a namespace for the Lease (the pod's own by default).
func LoadServe(inCluster bool, podNamespace string) (Config, error) {
	return load(inCluster, podNamespace, func(s spec, c *Config) []Problem {
		var problems []Problem
		bad := func(field, what string) {
			problems = append(problems, Problem{Var: key(field), What: what, Example: example(field)})
		}
		if s.Interval <= s.SweepTimeout && s.Interval >= minInterval {
			bad("Interval", fmt.Sprintf("must be longer than REAPER_SWEEP_TIMEOUT (%s), so that a sweep ends before the next is due; got %s", s.SweepTimeout, s.Interval))
		}
		if c.Serve.LeaseNamespace == "" {
			if inCluster && podNamespace != "" {
				c.Serve.LeaseNamespace = podNamespace
			} else {
				bad("LeaseNamespace", "is required outside a pod: the namespace of the Lease the replicas elect their leader on")
			}
		}
		return problems
	})
}
