package sweep_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/runner-reaper/runner-reaper/report"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// plane is the one real control plane this package's tests share, started
// by the first test that needs it; each test works in namespaces of its own.
var plane testenv.Lazy

func TestMain(m *testing.M) { testenv.LazyMain(m, &plane) }

// reported runs one sweep and reports it as every entry point does: the
// action lines, the warnings and the summary.
func reported(ctx context.Context, s *sweep.Sweeper, mode sweep.Mode, log *slog.Logger) sweep.Result {
	res := s.Run(ctx, mode)
	report.Log(ctx, log, res)
	return res
}
