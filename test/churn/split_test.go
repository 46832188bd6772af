package churn_test

import (
	"testing"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// TestSplit holds the request counts the table prints to the log they are
// read from: pages by their answer, a page asked for again, look-ups by
// name, deletes and the rest.
func TestSplit(t *testing.T) {
	list := func(query string, status int) ghsim.Request {
		return ghsim.Request{Method: "GET", Endpoint: ghsim.EndpointList, Query: query, Status: status}
	}
	got := split([]ghsim.Request{
		list("per_page=100", 200),
		list("page=2&per_page=100", 200),
		list("page=3&per_page=100", 304),
		list("page=1&per_page=100", 304),
		list("page=2&per_page=100", 200),
		list("per_page=100&name=acme-unregistered", 200),
		{Method: "DELETE", Endpoint: ghsim.EndpointDelete, Status: 204},
		list("per_page=100", 500),
	})
	want := requests{pages: 3, notModified: 2, again: 2, byName: 1, deletes: 1, other: 1}
	if got != want {
		t.Errorf("split = %+v, want %+v", got, want)
	}
	if got.total() != 8 {
		t.Errorf("total = %d, want 8", got.total())
	}
}
