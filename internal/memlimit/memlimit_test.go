package memlimit

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	automemlimit "github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// env is a fake environment.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func cgroup(b uint64, err error) func() (uint64, error) {
	return func() (uint64, error) { return b, err }
}

// v1NoLimit is cgroup v1's memory.limit_in_bytes without a limit, on 4 KiB
// pages: math.MaxInt64 rounded down to a page.
const v1NoLimit = 9223372036854771712

func TestLimitSources(t *testing.T) {
	none := Limit{Source: SourceNone}
	for _, tc := range []struct {
		name    string
		lambda  *string // nil: unset
		cgroup  func() (uint64, error)
		want    Limit
		wantErr string // a part of the error; "" for none
	}{
		{"Lambda's memory, in MiB", ptr("512"), cgroup(1<<30, nil), Limit{512 << 20, SourceLambda}, ""},
		{"Lambda's smallest", ptr("128"), nil, Limit{128 << 20, SourceLambda}, ""},
		{"Lambda's largest today", ptr("10240"), nil, Limit{10240 << 20, SourceLambda}, ""},
		{"Lambda wins over a cgroup without a limit", ptr("256"), cgroup(0, automemlimit.ErrNoLimit), Limit{256 << 20, SourceLambda}, ""},
		{"the largest figure whose bytes fit an int64", ptr("8796093022207"), nil, Limit{8796093022207 << 20, SourceLambda}, ""},
		{"Lambda's variable empty: the cgroup's", ptr(""), cgroup(256<<20, nil), Limit{256 << 20, SourceCgroup}, ""},
		{"Lambda zero", ptr("0"), cgroup(256<<20, nil), none, "above 0 MB"},
		{"Lambda negative", ptr("-1"), nil, none, "a whole number"},
		{"Lambda with a sign", ptr("+128"), nil, none, "a whole number"},
		{"Lambda with a unit", ptr("512MB"), nil, none, "a whole number"},
		{"Lambda fractional", ptr("1.5"), nil, none, "a whole number"},
		{"Lambda padded", ptr(" 512"), nil, none, "a whole number"},
		{"Lambda beyond uint64", ptr("99999999999999999999"), nil, none, "more memory than a 64-bit process"},
		{"Lambda whose bytes overflow an int64", ptr("8796093022208"), nil, none, "more memory than a 64-bit process"},
		{"Lambda at uint64's top", ptr("18446744073709551615"), nil, none, "more memory than a 64-bit process"},
		{"the cgroup's limit", nil, cgroup(256<<20, nil), Limit{256 << 20, SourceCgroup}, ""},
		{"a cgroup limit of a few pages", nil, cgroup(8192, nil), Limit{8192, SourceCgroup}, ""},
		{"no limit", nil, cgroup(0, automemlimit.ErrNoLimit), none, ""},
		{"no limit, wrapped", nil, cgroup(0, fmt.Errorf("walk: %w", automemlimit.ErrNoLimit)), none, ""},
		{"no cgroup", nil, cgroup(0, automemlimit.ErrNoCgroup), none, ""},
		{"no cgroups on this system", nil, cgroup(0, automemlimit.ErrCgroupsNotSupported), none, ""},
		{"no cgroup reader", nil, nil, none, ""},
		{"cgroup v1's no limit, if it ever came through", nil, cgroup(v1NoLimit, nil), none, ""},
		{"cgroup v1's no limit on 64 KiB pages", nil, cgroup(math.MaxInt64/(64<<10)*(64<<10), nil), none, ""},
		{"math.MaxInt64", nil, cgroup(math.MaxInt64, nil), none, ""},
		{"math.MaxUint64", nil, cgroup(math.MaxUint64, nil), none, ""},
		{"4 EiB", nil, cgroup(1<<62, nil), none, ""},
		{"just under 4 EiB is a limit", nil, cgroup(1<<62-1, nil), Limit{1<<62 - 1, SourceCgroup}, ""},
		{"a limit of zero", nil, cgroup(0, nil), none, ""},
		{"an unreadable cgroup", nil, cgroup(0, fmt.Errorf("failed to read memory.max: %w", os.ErrPermission)), none, "read the cgroup's memory limit: failed to read memory.max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{}
			if tc.lambda != nil {
				vars[LambdaMemoryEnv] = *tc.lambda
			}
			got, err := Host{LookupEnv: env(vars), Cgroup: tc.cgroup}.Limit()
			assert.Equal(t, tc.want, got)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			if tc.lambda != nil {
				assert.Contains(t, err.Error(), LambdaMemoryEnv+"=")
				assert.Contains(t, err.Error(), "(example: AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512)")
			}
		})
	}
}

func TestLambdaReadFirst(t *testing.T) {
	called := false
	h := Host{
		LookupEnv: env(map[string]string{LambdaMemoryEnv: "1024"}),
		Cgroup:    func() (uint64, error) { called = true; return 64 << 20, nil },
	}
	got, err := h.Limit()
	require.NoError(t, err)
	assert.Equal(t, Limit{1 << 30, SourceLambda}, got)
	assert.False(t, called, "a Lambda's limit is its configured memory: the cgroup is not read")
}

func TestLambdaErrorShowsHostileValueSafely(t *testing.T) {
	v := "\n\x1b[2J\u202e" + strings.Repeat("x", 1000)
	_, err := Host{LookupEnv: env(map[string]string{LambdaMemoryEnv: v})}.Limit()
	require.Error(t, err)
	msg := err.Error()
	assert.NotContains(t, msg, "\n")
	assert.NotContains(t, msg, "\x1b")
	assert.NotContains(t, msg, "\u202e")
	assert.Less(t, len(msg), 250, "the value is cut short: %s", msg)
}

// TestFromCgroupOnThisMachine reads this machine's cgroup through
// automemlimit, as the binary does, and says what it found.
func TestFromCgroupOnThisMachine(t *testing.T) {
	raw, rawErr := automemlimit.FromCgroup()
	t.Logf("automemlimit.FromCgroup() = %d, %v", raw, rawErr)
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		t.Logf("/proc/self/cgroup:\n%s", b)
	}

	got, err := Host{Cgroup: automemlimit.FromCgroup}.Limit()
	require.NoError(t, err, "the cgroup's limit could not be read on this machine")
	t.Logf("Limit() = %+v", got)
	switch got.Source {
	case SourceCgroup:
		assert.Positive(t, got.Bytes)
		assert.Less(t, got.Bytes, int64(noLimitFrom))
	case SourceNone:
		assert.Zero(t, got.Bytes)
	default:
		t.Fatalf("source %q from a host without Lambda's variable", got.Source)
	}

	// Where the memory controller is cgroup v1's and reads its "no limit"
	// figure (a hybrid host like the one this was written on), automemlimit
	// must say so, not return the figure.
	if path, ok := v1MemoryLimitFile(t); ok {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		t.Logf("%s: %s", path, strings.TrimSpace(string(b)))
		if strings.TrimSpace(string(b)) == fmt.Sprint(uint64(v1NoLimit)) {
			assert.ErrorIs(t, rawErr, automemlimit.ErrNoLimit)
			assert.Equal(t, Limit{Source: SourceNone}, got)
		}
	}
}

// v1MemoryLimitFile is the process's cgroup v1 memory.limit_in_bytes where
// the memory hierarchy is mounted at its root in the usual place.
func v1MemoryLimitFile(t *testing.T) (string, bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[0] == "0" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "memory" {
				continue
			}
			path := filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
			if _, err := os.Stat(path); err != nil {
				t.Logf("no %s: %v", path, err)
				return "", false
			}
			return path, true
		}
	}
	return "", false
}

func ptr(s string) *string { return &s }

func TestErrorsWrapped(t *testing.T) {
	cause := errors.New("boom")
	_, err := Host{Cgroup: cgroup(0, cause)}.Limit()
	assert.ErrorIs(t, err, cause)
}
