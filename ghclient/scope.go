package ghclient

import (
	"fmt"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// checkScope accepts only a scope that its own configuration form parses
// back to, so that a name can never smuggle a path segment or a query into
// a URL, and the list and delete paths rest on the same rule as the
// configuration.
func checkScope(s fleet.Scope) error {
	parsed, err := fleet.ParseScope(s.String())
	if err != nil {
		return fmt.Errorf("invalid scope: %w", err)
	}
	if parsed != s {
		return fmt.Errorf("invalid scope %q: fields do not match its kind", s)
	}
	return nil
}

// runnersPath is the scope's runner list, relative to the API base.
func runnersPath(s fleet.Scope) (string, error) {
	if err := checkScope(s); err != nil {
		return "", err
	}
	switch s.Kind {
	case fleet.RepoScope:
		return fmt.Sprintf("repos/%s/%s/actions/runners", s.Owner, s.Name), nil
	case fleet.OrgScope:
		return fmt.Sprintf("orgs/%s/actions/runners", s.Name), nil
	default:
		return fmt.Sprintf("enterprises/%s/actions/runners", s.Name), nil
	}
}
