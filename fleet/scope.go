package fleet

import (
	"fmt"
	"strings"
)

// ScopeKind is where a runner is registered on GitHub.
type ScopeKind string

const (
	RepoScope       ScopeKind = "repo"
	OrgScope        ScopeKind = "org"
	EnterpriseScope ScopeKind = "enterprise"
)

// Scope is one GitHub runner list: a repository, an organization or an
// enterprise. Owner is set only for repositories.
type Scope struct {
	Kind  ScopeKind
	Owner string
	Name  string
}

// ParseScope reads the configuration form: repo:OWNER/NAME, org:NAME or
// enterprise:SLUG. Every name must be one GitHub could have given: a name is
// placed into request paths, so "..", a slash or an escape must never get
// that far, whatever wrote it (configuration, a pod label, a ledger).
func ParseScope(s string) (Scope, error) {
	kind, rest, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || rest == "" {
		return Scope{}, fmt.Errorf("scope %q is not KIND:NAME", s)
	}
	switch ScopeKind(kind) {
	case RepoScope:
		owner, name, ok := strings.Cut(rest, "/")
		if !ok {
			return Scope{}, fmt.Errorf("repository scope %q is not repo:OWNER/NAME", s)
		}
		if why := ownerProblem(owner); why != "" {
			return Scope{}, fmt.Errorf("repository scope %q: owner %s", s, why)
		}
		if why := repoProblem(name); why != "" {
			return Scope{}, fmt.Errorf("repository scope %q: repository name %s", s, why)
		}
		return Scope{Kind: RepoScope, Owner: owner, Name: name}, nil
	case OrgScope:
		if why := ownerProblem(rest); why != "" {
			return Scope{}, fmt.Errorf("organization scope %q: name %s", s, why)
		}
		return Scope{Kind: OrgScope, Name: rest}, nil
	case EnterpriseScope:
		if why := slugProblem(rest); why != "" {
			return Scope{}, fmt.Errorf("enterprise scope %q: slug %s", s, why)
		}
		return Scope{Kind: EnterpriseScope, Name: rest}, nil
	default:
		return Scope{}, fmt.Errorf("scope %q has unknown kind %q (want repo, org or enterprise)", s, kind)
	}
}

// maxNameLen bounds every name of a scope; GitHub's own limits are lower
// (39 for an account, 100 for a repository).
const maxNameLen = 100

// ownerProblem checks an organization or user name: letters, digits,
// hyphens and (for managed users) underscores, starting with a letter or
// digit. It says what is wrong, or "".
func ownerProblem(n string) string { return nameProblem(n, "-_", true) }

// repoProblem checks a repository name: letters, digits, '.', '-' and '_',
// but never the path segments "." or "..".
func repoProblem(n string) string {
	if n == "." || n == ".." {
		return fmt.Sprintf("%q is a path segment, not a repository", n)
	}
	return nameProblem(n, "-_.", false)
}

// slugProblem checks an enterprise slug: letters, digits and hyphens,
// starting with a letter or digit.
func slugProblem(n string) string { return nameProblem(n, "-", true) }

// nameProblem checks that n is 1 to maxNameLen letters, digits and the
// extra characters, starting with a letter or digit when leadAlnum.
func nameProblem(n, extra string, leadAlnum bool) string {
	switch {
	case n == "" || len(n) > maxNameLen:
		return fmt.Sprintf("must be 1 to %d characters", maxNameLen)
	case leadAlnum && !alnum(rune(n[0])):
		return "must start with a letter or digit"
	}
	for _, r := range n {
		if !alnum(r) && !strings.ContainsRune(extra, r) {
			return fmt.Sprintf("has %q; only letters, digits and %s are allowed", r, quoteEach(extra))
		}
	}
	return ""
}

// quoteEach lists characters for a message: '-', '_' and '.'.
func quoteEach(chars string) string {
	q := make([]string, 0, len(chars))
	for _, c := range chars {
		q = append(q, fmt.Sprintf("'%c'", c))
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

func alnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// String is the configuration form, also used in log lines.
func (s Scope) String() string {
	if s.Kind == RepoScope {
		return string(s.Kind) + ":" + s.Owner + "/" + s.Name
	}
	return string(s.Kind) + ":" + s.Name
}

// Key identifies the scope in maps and the ledger. GitHub treats owner and
// repository names without regard to case, and so must the reaper, or a
// label written in another case would look like a scope nobody observed.
func (s Scope) Key() string { return strings.ToLower(s.String()) }

// WebHost is the one spelling of a GitHub web host by which an ARC
// githubConfigUrl is held to the GitHub the reaper lists: lower case,
// without "www." and without the scheme's default port, so that
// https://github.com:443/acme and https://www.GitHub.com/acme name the
// same organization as https://github.com/acme, while another port is
// another server.
func WebHost(scheme, host string) string {
	host = strings.TrimPrefix(strings.ToLower(host), "www.")
	switch scheme = strings.ToLower(scheme); {
	case scheme == "https" && strings.HasSuffix(host, ":443"):
		host = strings.TrimSuffix(host, ":443")
	case scheme == "http" && strings.HasSuffix(host, ":80"):
		host = strings.TrimSuffix(host, ":80")
	}
	return host
}
