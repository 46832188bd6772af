package dynamo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
	. "github.com/runner-reaper/runner-reaper/test/statetest"
)

// dynaliteTable is the table every DynamoDB test shares; each test gets a
// ledger of its own by key (freshKey).
const dynaliteTable = "runner-reaper-ledger"

// dynaliteServer is the process's dynalite, the real DynamoDB-compatible
// server installed from npm into tools/dynalite, with the shared table.
type dynaliteServer struct {
	client *dynamodb.Client
}

// keys numbers the ledgers the tests make, so that no two share a key.
var keys atomic.Int64

// dynalite returns the process's dynalite, starting it with the shared
// table on first use (statetest.Dynalite skips in -short mode).
func dynalite(t testing.TB) dynaliteServer {
	t.Helper()
	return dynaliteServer{client: Dynalite(t, LedgerTable(dynaliteTable)).Client}
}

// freshKey returns a ledger key no other test uses, so that each test starts
// from a missing ledger on the shared table.
func (dynaliteServer) freshKey(t testing.TB) string {
	return fmt.Sprintf("%s#%d", t.Name(), keys.Add(1))
}

// open returns a store on the shared table at key, as a separate sweep
// would hold.
func (s dynaliteServer) open(key string, logger *slog.Logger) *Store {
	return New(s.client, dynaliteTable, key, logger)
}

// rawItem reads the stored item as DynamoDB holds it.
func rawItem(t *testing.T, s dynaliteServer, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := s.client.GetItem(Ctx(t), &dynamodb.GetItemInput{
		TableName:      aws.String(dynaliteTable),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	return out.Item
}

// TestDynamoItemAttributes checks the stored item as `aws dynamodb
// get-item` shows it: exactly pk, version, marks, lists and updated, with
// the documented types, and no lists once the list cache is empty.
func TestDynamoItemAttributes(t *testing.T) {
	t.Parallel()
	srv := dynalite(t)
	key := srv.freshKey(t)
	s := srv.open(key, nil)
	want := Sample()
	before := time.Now().UTC().Truncate(time.Second)
	v, err := s.Save(Ctx(t), want, "")
	require.NoError(t, err)
	after := time.Now().UTC()

	item := rawItem(t, srv, key)
	names := make([]string, 0, len(item))
	for n := range item {
		names = append(names, n)
	}
	assert.ElementsMatch(t, []string{"pk", "version", "marks", "lists", "updated"}, names)

	require.IsType(t, &types.AttributeValueMemberS{}, item["pk"])
	assert.Equal(t, key, item["pk"].(*types.AttributeValueMemberS).Value)

	require.IsType(t, &types.AttributeValueMemberN{}, item["version"])
	assert.Equal(t, "1", item["version"].(*types.AttributeValueMemberN).Value)
	assert.Equal(t, state.Version("1"), v)

	require.IsType(t, &types.AttributeValueMemberS{}, item["marks"])
	raw := item["marks"].(*types.AttributeValueMemberS).Value
	require.True(t, json.Valid([]byte(raw)), "marks is JSON: %s", raw)
	assert.NotContains(t, raw, "\n", "marks is compact")
	assert.Contains(t, raw, `"verdict":"ghost"`)
	var gotMarks map[string]fleet.Mark
	require.NoError(t, json.Unmarshal([]byte(raw), &gotMarks))
	assert.Equal(t, want.Marks, gotMarks)

	require.IsType(t, &types.AttributeValueMemberB{}, item["lists"])
	gotLists, err := state.GunzipLists(item["lists"].(*types.AttributeValueMemberB).Value)
	require.NoError(t, err)
	assert.Equal(t, want.Lists, gotLists)

	require.IsType(t, &types.AttributeValueMemberS{}, item["updated"])
	updated, err := time.Parse(time.RFC3339, item["updated"].(*types.AttributeValueMemberS).Value)
	require.NoError(t, err, "updated is RFC 3339")
	assert.False(t, updated.Before(before) || updated.After(after), "updated %s is the time of the save (%s to %s)", updated, before, after)

	// A save without a list cache leaves no lists attribute, and counts on.
	v2, err := s.Save(Ctx(t), state.Ledger{Marks: Marks(2)}, v)
	require.NoError(t, err)
	assert.Equal(t, state.Version("2"), v2)
	item = rawItem(t, srv, key)
	assert.NotContains(t, item, "lists")
	assert.Equal(t, "2", item["version"].(*types.AttributeValueMemberN).Value)
	l, lv, err := s.Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, v2, lv)
	assert.Equal(t, state.Ledger{Marks: Marks(2), Lists: map[string]state.ListCache{}}, l)
}

// TestTableSchema checks the table the tests run on, made from
// statetest.LedgerTable, is what the backend writes: pk, a string, the only
// key, on demand.
func TestTableSchema(t *testing.T) {
	t.Parallel()
	srv := dynalite(t)
	out, err := srv.client.DescribeTable(Ctx(t), &dynamodb.DescribeTableInput{TableName: aws.String(dynaliteTable)})
	require.NoError(t, err)
	td := out.Table
	require.Len(t, td.KeySchema, 1)
	assert.Equal(t, dynamoAttrKey, aws.ToString(td.KeySchema[0].AttributeName), "the key the backend writes")
	assert.Equal(t, types.KeyTypeHash, td.KeySchema[0].KeyType)
	require.Len(t, td.AttributeDefinitions, 1)
	assert.Equal(t, dynamoAttrKey, aws.ToString(td.AttributeDefinitions[0].AttributeName))
	assert.Equal(t, types.ScalarAttributeTypeS, td.AttributeDefinitions[0].AttributeType)
	require.NotNil(t, td.BillingModeSummary)
	assert.Equal(t, types.BillingModePayPerRequest, td.BillingModeSummary.BillingMode)
}

// TestDynamoSweepsRace is two sweeps on one ledger version: both load, both
// save at once. Exactly one save succeeds, the other is state.ErrConflict, and the
// stored ledger is the winner's. Repeated, since one interleaving proves
// little about a conditional write.
func TestDynamoSweepsRace(t *testing.T) {
	t.Parallel()
	srv := dynalite(t)
	for round := 0; round < 20; round++ {
		key := srv.freshKey(t)
		_, err := srv.open(key, nil).Save(Ctx(t), Sample(), "")
		require.NoError(t, err)

		sweeps := []*Store{srv.open(key, nil), srv.open(key, nil)}
		ledgers := make([]state.Ledger, 2)
		loaded := make([]state.Version, 2)
		for i, s := range sweeps {
			ledgers[i], loaded[i], err = s.Load(Ctx(t))
			require.NoError(t, err)
			k, m := Mark(100 + i)
			ledgers[i].Marks[k] = m
			delete(ledgers[i].Lists, fmt.Sprintf("org:scope-%d", i))
		}
		require.Equal(t, loaded[0], loaded[1])

		saved := make([]state.Version, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, s := range sweeps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				saved[i], errs[i] = s.Save(Ctx(t), ledgers[i], loaded[i])
			}()
		}
		close(start)
		wg.Wait()

		var winner, loser int
		switch {
		case errs[0] == nil && errs[1] == nil:
			t.Fatalf("round %d: both sweeps saved over version %s", round, loaded[0])
		case errs[0] == nil:
			winner, loser = 0, 1
		case errs[1] == nil:
			winner, loser = 1, 0
		default:
			t.Fatalf("round %d: neither sweep saved: %v; %v", round, errs[0], errs[1])
		}
		require.ErrorIs(t, errs[loser], state.ErrConflict, "round %d", round)
		var ccf *types.ConditionalCheckFailedException
		assert.ErrorAs(t, errs[loser], &ccf, "the conflict is DynamoDB's own verdict")

		got, gv, err := srv.open(key, nil).Load(Ctx(t))
		require.NoError(t, err)
		assert.Equal(t, saved[winner], gv, "round %d", round)
		assert.Equal(t, ledgers[winner], got, "round %d: the stored ledger is the winner's", round)
	}
}

// TestDynamoTrim saves a ledger over a small limit: the list cache goes
// first, then the oldest marks, and the trim is reported through LastTrim
// and a warning. A later save that fits reports no trim.
func TestDynamoTrim(t *testing.T) {
	t.Parallel()
	srv := dynalite(t)
	var logs bytes.Buffer
	s := srv.open(srv.freshKey(t), slog.New(slog.NewJSONHandler(&logs, nil)))
	s.LimitBytes = 2048

	l := state.Ledger{Marks: Marks(40), Lists: Lists(3, 50)}
	v, err := s.Save(Ctx(t), l, "")
	require.NoError(t, err)

	trim := s.LastTrim()
	assert.True(t, trim.Trimmed())
	assert.Equal(t, 3, trim.DroppedLists)
	assert.Equal(t, 2048, trim.LimitBytes)
	require.Greater(t, trim.DroppedMarks, 0)
	require.Less(t, trim.DroppedMarks, 40)

	got, _, err := s.Load(Ctx(t))
	require.NoError(t, err)
	assert.Empty(t, got.Lists)
	require.NotNil(t, got.Lists)
	kept := 40 - trim.DroppedMarks
	require.Len(t, got.Marks, kept)
	for i := 40 - kept; i < 40; i++ { // the newest marks are kept
		k, m := Mark(i)
		assert.Equal(t, m, got.Marks[k], "mark %d", i)
	}

	lines := LogLines(t, &logs)
	require.Len(t, lines, 1)
	assert.Equal(t, "WARN", lines[0]["level"])
	assert.Equal(t, "ledger trimmed", lines[0]["msg"])
	assert.Equal(t, dynaliteTable, lines[0]["dynamodb_table"])
	assert.Equal(t, float64(3), lines[0]["dropped_lists"])
	assert.Equal(t, float64(trim.DroppedMarks), lines[0]["dropped_marks"])
	assert.Equal(t, float64(2048), lines[0]["limit_bytes"])

	_, err = s.Save(Ctx(t), state.Ledger{Marks: Marks(1)}, v)
	require.NoError(t, err)
	assert.False(t, s.LastTrim().Trimmed(), "a save that fits reports no trim")
	assert.Empty(t, LogLines(t, &logs), "and logs no warning")
}

// TestDynamoDefaultLimitFitsAnItem saves a ledger over DynamoDB's 400 KB
// item limit. Without trimming dynalite refuses it, as DynamoDB does, with an
// error that is not a conflict; with the default limit it is trimmed, saved
// and reported.
func TestDynamoDefaultLimitFitsAnItem(t *testing.T) {
	t.Parallel()
	srv := dynalite(t)
	big := state.Ledger{Marks: Marks(2500)}
	b, err := json.Marshal(big.Marks)
	require.NoError(t, err)
	require.Greater(t, len(b), 400*1024, "the ledger must be over the item limit")

	unlimited := srv.open(srv.freshKey(t), nil)
	unlimited.LimitBytes = 4 << 20
	_, err = unlimited.Save(Ctx(t), big, "")
	require.Error(t, err, "dynalite enforces the 400 KB item limit")
	assert.NotErrorIs(t, err, state.ErrConflict, "an item too large is not a conflict: %v", err)
	assert.False(t, unlimited.LastTrim().Trimmed())

	s := srv.open(srv.freshKey(t), nil)
	_, err = s.Save(Ctx(t), big, "")
	require.NoError(t, err)
	trim := s.LastTrim()
	assert.True(t, trim.Trimmed())
	assert.Equal(t, DefaultLimitBytes, trim.LimitBytes)
	got, _, err := s.Load(Ctx(t))
	require.NoError(t, err)
	assert.Len(t, got.Marks, 2500-trim.DroppedMarks)
}

// TestDynamoCorruptItem checks an item Load cannot read is an error, and
// never a conflict nor an empty ledger.
func TestDynamoCorruptItem(t *testing.T) {
	t.Parallel()
	srv := dynalite(t)
	good := func(key string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"pk":      &types.AttributeValueMemberS{Value: key},
			"version": &types.AttributeValueMemberN{Value: "3"},
			"marks":   &types.AttributeValueMemberS{Value: "{}"},
			"updated": &types.AttributeValueMemberS{Value: "2026-03-14T09:00:00Z"},
		}
	}
	cases := []struct {
		name   string
		change func(item map[string]types.AttributeValue)
		want   string
	}{
		{"marks not JSON", func(i map[string]types.AttributeValue) {
			i["marks"] = &types.AttributeValueMemberS{Value: `{"pod/0000-uid": {not json`}
		}, "decode marks"},
		{"marks not a string", func(i map[string]types.AttributeValue) {
			i["marks"] = &types.AttributeValueMemberN{Value: "7"}
		}, "marks is not a string"},
		{"marks not JSON, lists corrupt too", func(i map[string]types.AttributeValue) {
			i["marks"] = &types.AttributeValueMemberS{Value: `{not json`}
			i["lists"] = &types.AttributeValueMemberB{Value: []byte("not gzip")}
		}, "decode marks"},
		{"no version", func(i map[string]types.AttributeValue) {
			delete(i, "version")
		}, "version is missing"},
		{"version not a counter", func(i map[string]types.AttributeValue) {
			i["version"] = &types.AttributeValueMemberN{Value: "1.5"}
		}, "not a counter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := srv.freshKey(t)
			item := good(key)
			c.change(item)
			_, err := srv.client.PutItem(Ctx(t), &dynamodb.PutItemInput{TableName: aws.String(dynaliteTable), Item: item})
			require.NoError(t, err)

			_, _, err = srv.open(key, nil).Load(Ctx(t))
			require.Error(t, err)
			assert.NotErrorIs(t, err, state.ErrConflict, "a corrupt ledger is not a conflict: %v", err)
			assert.Contains(t, err.Error(), c.want)
			assert.Contains(t, err.Error(), key, "the error names the item")
		})
	}
}

// TestDynamoCorruptListCacheIsDropped: the lists attribute is only a
// cache. One that cannot be read is dropped with a warning naming the table,
// the item and what was wrong; the marks load as they were.
func TestDynamoCorruptListCacheIsDropped(t *testing.T) {
	t.Parallel()
	srv := dynalite(t)
	cases := []struct {
		name  string
		lists types.AttributeValue
		why   string
	}{
		{"not gzip", &types.AttributeValueMemberB{Value: []byte("not gzip")}, "gzip"},
		{"gzip of another shape", &types.AttributeValueMemberB{Value: Gzipped(t, `"a string"`)}, "cannot unmarshal"},
		{"not binary", &types.AttributeValueMemberS{Value: "H4sI"}, "not binary"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := srv.freshKey(t)
			item := map[string]types.AttributeValue{
				"pk":      &types.AttributeValueMemberS{Value: key},
				"version": &types.AttributeValueMemberN{Value: "3"},
				"marks":   &types.AttributeValueMemberS{Value: `{"pod/0000-uid-0001":{"verdict":"zombie","first_seen":"2026-03-14T09:00:00Z","last_seen":"2026-03-14T09:01:00Z"}}`},
				"lists":   c.lists,
			}
			_, err := srv.client.PutItem(Ctx(t), &dynamodb.PutItemInput{TableName: aws.String(dynaliteTable), Item: item})
			require.NoError(t, err)

			var buf bytes.Buffer
			l, v, err := srv.open(key, slog.New(slog.NewJSONHandler(&buf, nil))).Load(Ctx(t))
			require.NoError(t, err, "a corrupt cache does not block the sweep")
			assert.Equal(t, state.Version("3"), v)
			assert.Len(t, l.Marks, 1, "the marks load as they were")
			assert.Empty(t, l.Lists)
			lines := LogLines(t, &buf)
			require.Len(t, lines, 1, "one warning")
			assert.Equal(t, "ledger list cache dropped", lines[0]["msg"])
			assert.Equal(t, dynaliteTable, lines[0]["dynamodb_table"])
			assert.Equal(t, key, lines[0]["key"])
			assert.Equal(t, "lists", lines[0]["field"])
			assert.Contains(t, lines[0]["error"], c.why)
		})
	}
}

// TestDynamoMissingTable checks that a table that is not there (a wrong
// name, a stack not deployed) is an error on Load and Save, and never a
// conflict: a sweep must not take it for a lost race.
func TestDynamoMissingTable(t *testing.T) {
	t.Parallel()
	srv := dynalite(t)
	s := New(srv.client, "no-such-table", "ledger", nil)
	var notFound *types.ResourceNotFoundException

	_, _, err := s.Load(Ctx(t))
	require.Error(t, err)
	assert.NotErrorIs(t, err, state.ErrConflict, "%v", err)
	assert.ErrorAs(t, err, &notFound)
	assert.Contains(t, err.Error(), "get ledger item")
	assert.Contains(t, err.Error(), "no-such-table")

	for _, v := range []state.Version{"", "4"} {
		_, err = s.Save(Ctx(t), Sample(), v)
		require.Error(t, err, "save at version %q", v)
		assert.NotErrorIs(t, err, state.ErrConflict, "save at version %q: %v", v, err)
		assert.ErrorAs(t, err, &notFound)
		assert.Contains(t, err.Error(), "no-such-table")
	}
}

// TestDynamoVersions checks the versions Save accepts: one it never gave is
// an error but not a conflict (a caller's bug, not a race), and a ledger
// deleted since it was loaded is a conflict, as with the ConfigMap.
func TestDynamoVersions(t *testing.T) {
	t.Parallel()
	srv := dynalite(t)
	key := srv.freshKey(t)
	s := srv.open(key, nil)
	v, err := s.Save(Ctx(t), Sample(), "")
	require.NoError(t, err)

	_, err = s.Save(Ctx(t), Sample(), "v1")
	require.Error(t, err)
	assert.NotErrorIs(t, err, state.ErrConflict, "%v", err)
	assert.True(t, strings.Contains(err.Error(), "not given by this store"), "%v", err)

	_, err = srv.client.DeleteItem(Ctx(t), &dynamodb.DeleteItemInput{
		TableName: aws.String(dynaliteTable),
		Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}},
	})
	require.NoError(t, err)
	_, err = s.Save(Ctx(t), Sample(), v)
	require.ErrorIs(t, err, state.ErrConflict)
	_, lv, err := s.Load(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, state.Version(""), lv, "the conflicting save created nothing")
}

// TestDynamoHistoryAttribute: the record of actions is the attribute
// history, a string of plain JSON beside the marks, absent when nothing is
// recorded; one edited into something else does not stop a sweep (Load
// leaves it out with a warning) but fails LoadHistory, which a person
// asked for.
func TestDynamoHistoryAttribute(t *testing.T) {
	t.Parallel()
	srv := dynalite(t)
	key := srv.freshKey(t)
	var logs bytes.Buffer
	s := srv.open(key, slog.New(slog.NewJSONHandler(&logs, nil)))
	v, err := s.Save(Ctx(t), Sample(), "")
	require.NoError(t, err)
	assert.NotContains(t, rawItem(t, srv, key), "history", "no record, no attribute")

	l := Sample()
	l.History = History(3)
	_, err = s.Save(Ctx(t), l, v)
	require.NoError(t, err)
	item := rawItem(t, srv, key)
	require.IsType(t, &types.AttributeValueMemberS{}, item["history"])
	raw := item["history"].(*types.AttributeValueMemberS).Value
	var h []state.Record
	require.NoError(t, json.Unmarshal([]byte(raw), &h), "history is JSON: %s", raw)
	assert.Equal(t, l.History, h)
	h, hv, err := srv.open(key, nil).LoadHistory(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, l.History, h)
	assert.Equal(t, state.Version("2"), hv)

	item["history"] = &types.AttributeValueMemberS{Value: `[{"at":"yesterday"}]`}
	_, err = srv.client.PutItem(Ctx(t), &dynamodb.PutItemInput{TableName: aws.String(dynaliteTable), Item: item})
	require.NoError(t, err)
	got, _, err := s.Load(Ctx(t))
	require.NoError(t, err, "the record does not block the sweep")
	assert.Equal(t, l.Marks, got.Marks)
	assert.Empty(t, got.History)
	lines := LogLines(t, &logs)
	require.Len(t, lines, 1)
	assert.Equal(t, "ledger history dropped", lines[0]["msg"])
	assert.Equal(t, "history", lines[0]["field"])
	assert.Equal(t, key, lines[0]["key"])
	_, _, err = s.LoadHistory(Ctx(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), key, "the error names the item")
	assert.Contains(t, err.Error(), "decode history")

	_, v, err = srv.open(srv.freshKey(t), nil).LoadHistory(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, state.Version(""), v, "no item, no ledger")
}
