package ghclient

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-github/v60/github"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// DeleteRunner removes a registration. Only GitHub's definite answers are
// results: 204 Deleted, 404 AlreadyGone, 422 RunnerBusy (the runner is
// running a job). Anything else (5xx, a rate limit, a timeout, 401/403) is
// an error, because a transient error is never evidence.
func (c *Client) DeleteRunner(ctx context.Context, scope fleet.Scope, id int64) (fleet.Result, error) {
	if err := checkScope(scope); err != nil {
		return "", fmt.Errorf("delete runner %d: %w", id, err)
	}
	if id <= 0 {
		return "", fmt.Errorf("delete runner in %s: invalid runner id %d", scope, id)
	}
	var (
		resp *github.Response
		err  error
	)
	switch scope.Kind {
	case fleet.RepoScope:
		resp, err = c.gh.Actions.RemoveRunner(ctx, scope.Owner, scope.Name, id)
	case fleet.OrgScope:
		resp, err = c.gh.Actions.RemoveOrganizationRunner(ctx, scope.Name, id)
	default:
		resp, err = c.gh.Enterprise.RemoveRunner(ctx, scope.Name, id)
	}
	status := 0
	if resp != nil && resp.Response != nil {
		status = resp.StatusCode
	}
	switch {
	case err == nil && status == http.StatusNoContent:
		return fleet.Deleted, nil
	case status == http.StatusNotFound:
		// 404 is "gone" only because the caller asks this with the
		// credential that has just listed the scope completely: the
		// scope exists and this credential can see its runners. Without
		// that list a 404 could as well mean a wrong scope or no access
		// (GitHub answers 404 for both), which is why the reaper sends
		// no delete to a scope whose list failed in the same sweep.
		return fleet.AlreadyGone, nil
	case status == http.StatusUnprocessableEntity:
		return fleet.Busy, nil
	case err != nil:
		closeExchangeBody(err)
		return "", fmt.Errorf("delete runner %d in %s: %w", id, scope, rateLimited(offOrigin(err)))
	default:
		return "", fmt.Errorf("delete runner %d in %s: unexpected status %s", id, scope, resp.Status)
	}
}
