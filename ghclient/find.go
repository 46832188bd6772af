package ghclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// FindRunner looks one runner up by its exact name, with GitHub's name
// filter. The reaper calls it only at act time, for the few admitted
// candidates that have no registration to delete first: absence from a
// list is re-checked right before a pod goes, so a list that was wrong yet
// consistent (say, empty) can never cost a job; and an absence that a list
// which moved while it was read could not prove is proven by it before
// ARC's registration finalizer is released. It returns nil when GitHub has
// no such runner.
func (c *Client) FindRunner(ctx context.Context, scope fleet.Scope, name string) (*fleet.Registration, error) {
	path, err := runnersPath(scope)
	if err != nil {
		return nil, fmt.Errorf("find runner: %w", err)
	}
	if name == "" {
		return nil, fmt.Errorf("find runner in %s: empty name", scope)
	}
	req, err := c.gh.NewRequest(http.MethodGet, fmt.Sprintf("%s?per_page=%d&name=%s", path, perPage, url.QueryEscape(name)), nil)
	if err != nil {
		return nil, fmt.Errorf("find runner %q in %s: build request: %w", name, scope, err)
	}
	var body runnersBody
	resp, err := c.gh.Do(ctx, req, &body)
	if err != nil {
		closeExchangeBody(err)
		return nil, fmt.Errorf("find runner %q in %s: %w", name, scope, rateLimited(offOrigin(err)))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("find runner %q in %s: unexpected status %s", name, scope, resp.Status)
	}
	if body.TotalCount == nil || body.Runners == nil {
		return nil, fmt.Errorf("find runner %q in %s: %w", name, scope, errors.New("response lacks total_count or runners"))
	}
	for i, r := range *body.Runners {
		reg, err := registration(r, c.ownerLabel)
		if err != nil {
			return nil, fmt.Errorf("find runner %q in %s: item %d: %w", name, scope, i+1, err)
		}
		if reg.Name == name {
			return &reg, nil
		}
	}
	if *body.TotalCount > len(*body.Runners) {
		return nil, fmt.Errorf("find runner %q in %s: %w: %d of %d items", name, scope, fleet.ErrInconsistent, len(*body.Runners), *body.TotalCount)
	}
	return nil, nil
}
