// Package dynamo is a ledger store in one item of a DynamoDB table, for the
// Lambda.
package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runner-reaper/runner-reaper/state"
)

// The DynamoDB item layout: one item per ledger, at partition key pk. Marks
// are plain JSON so that the console or `aws dynamodb get-item` shows what
// the reaper suspects; the list cache is bulky and of no interest to a
// reader, so it is gzip'd, and left out when empty.
const (
	dynamoAttrKey     = "pk"         // S: the ledger's key
	dynamoAttrVersion = "version"    // N: a counter, 1 on create, +1 per save
	dynamoAttrMarks   = "marks"      // S: JSON of Ledger.Marks
	dynamoAttrLists   = "lists"      // B: gzip'd JSON of Ledger.Lists; absent when empty
	dynamoAttrUpdated = "updated"    // S: RFC 3339 time of the save, for a reader
	dynamoAttrNext    = "next_scope" // S: Ledger.NextScope; absent when empty
	dynamoAttrStreaks = "streaks"    // S: JSON of Ledger.Streaks; absent when none runs
	dynamoAttrHistory = "history"    // S: JSON of Ledger.History; absent when nothing is recorded
	dynamoAttrLoops   = "loops"      // S: JSON of Ledger.Loops; absent when no group has a recent action
)

// DefaultLimitBytes is the size the DynamoDB backend keeps a ledger
// under. DynamoDB refuses an item over 400 KB (names and values of all its
// attributes); the margin covers the key, version and time attributes, which
// are a few dozen bytes, and the ledger growing between sweeps.
const DefaultLimitBytes = 350 * 1024

// Store is a state.Store in one item of a DynamoDB table, for the Lambda, which
// has no cluster of its own to keep a ConfigMap in. The version is the
// item's version counter; Save is a conditional PutItem on it, so two sweeps
// saving over the same version cannot both succeed. It makes no Transact*
// calls.
//
// An item holds at most 400 KB, so Save keeps the ledger under LimitBytes by
// dropping first the list cache, then the oldest records of actions, the
// streaks, the reap-loop window and the oldest marks (state.Fit), and says so in a warning and
// through LastTrim.
type Store struct {
	client *dynamodb.Client
	table  string
	key    string

	// LimitBytes is the size Save keeps the ledger's marks and list cache
	// under, counted as state.Fit counts them; zero means
	// DefaultLimitBytes. Set it before the first Save.
	LimitBytes int

	trims *state.TrimLog
}

// New returns a store in the item with pk = key of table. A nil logger
// discards the trim warnings (LastTrim still reports them).
func New(client *dynamodb.Client, table, key string, logger *slog.Logger) *Store {
	return &Store{client: client, table: table, key: key, trims: state.NewTrimLog(logger)}
}

// LastTrim reports what the most recent successful Save left out to fit
// LimitBytes, for the sweep's summary.
func (d *Store) LastTrim() state.Trim { return d.trims.LastTrim() }

// where names the item in errors.
func (d *Store) where() string {
	return fmt.Sprintf("ledger item %s=%q in dynamodb table %s", dynamoAttrKey, d.key, d.table)
}

func (d *Store) itemKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{dynamoAttrKey: &types.AttributeValueMemberS{Value: d.key}}
}

// Load reads the item with a strongly consistent read, so that a sweep sees
// the last save however soon after it runs; a missing item is an empty
// ledger at Version "".
func (d *Store) Load(ctx context.Context) (state.Ledger, state.Version, error) {
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(d.table),
		Key:            d.itemKey(),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return state.Ledger{}, "", fmt.Errorf("get %s: %w", d.where(), err)
	}
	if len(out.Item) == 0 {
		return state.Normalize(state.Ledger{}), "", nil
	}
	return d.decode(out.Item)
}

// decode reads a stored item. A missing marks attribute is no marks, as a
// missing lists attribute is no list cache; anything present must decode.
func (d *Store) decode(item map[string]types.AttributeValue) (state.Ledger, state.Version, error) {
	n, ok := item[dynamoAttrVersion].(*types.AttributeValueMemberN)
	if !ok {
		return state.Ledger{}, "", fmt.Errorf("decode %s: attribute %s is missing or not a number", d.where(), dynamoAttrVersion)
	}
	if _, err := strconv.ParseUint(n.Value, 10, 64); err != nil {
		return state.Ledger{}, "", fmt.Errorf("decode %s: attribute %s is %q, not a counter: %w", d.where(), dynamoAttrVersion, n.Value, err)
	}
	var l state.Ledger
	if av, present := item[dynamoAttrMarks]; present {
		s, ok := av.(*types.AttributeValueMemberS)
		if !ok {
			return state.Ledger{}, "", fmt.Errorf("decode %s: attribute %s is not a string", d.where(), dynamoAttrMarks)
		}
		if err := json.Unmarshal([]byte(s.Value), &l.Marks); err != nil {
			return state.Ledger{}, "", fmt.Errorf("decode %s of %s: %w", dynamoAttrMarks, d.where(), err)
		}
	}
	if av, present := item[dynamoAttrLists]; present {
		// Only a cache: one that cannot be read is dropped and the lists
		// are read afresh. The marks above are not, and stay an error.
		b, ok := av.(*types.AttributeValueMemberB)
		if !ok {
			d.trims.DroppedLists(dynamoAttrLists, errors.New("the attribute is not binary"), "dynamodb_table", d.table, "key", d.key)
		} else if lists, err := state.GunzipLists(b.Value); err != nil {
			d.trims.DroppedLists(dynamoAttrLists, err, "dynamodb_table", d.table, "key", d.key)
		} else {
			l.Lists = lists
		}
	}
	if s, ok := item[dynamoAttrNext].(*types.AttributeValueMemberS); ok {
		l.NextScope = s.Value
	}
	if s, ok := item[dynamoAttrStreaks].(*types.AttributeValueMemberS); ok {
		l.Streaks = state.DecodeStreaks(s.Value)
	}
	h, err := d.history(item)
	if err != nil {
		// The record feeds no decision: a sweep goes on without it.
		d.trims.DroppedHistory(dynamoAttrHistory, err, "dynamodb_table", d.table, "key", d.key)
	}
	l.History = h
	if av, present := item[dynamoAttrLoops]; present {
		// It feeds only a back-off: a sweep goes on without it.
		if s, ok := av.(*types.AttributeValueMemberS); !ok {
			d.trims.DroppedLoops(dynamoAttrLoops, errors.New("the attribute is not a string"), "dynamodb_table", d.table, "key", d.key)
		} else if loops, err := state.DecodeLoops(s.Value); err != nil {
			d.trims.DroppedLoops(dynamoAttrLoops, err, "dynamodb_table", d.table, "key", d.key)
		} else {
			l.Loops = loops
		}
	}
	return state.Normalize(l), state.Version(n.Value), nil
}

// history reads the item's record of actions; a missing attribute is none.
func (d *Store) history(item map[string]types.AttributeValue) ([]state.Record, error) {
	av, present := item[dynamoAttrHistory]
	if !present {
		return nil, nil
	}
	s, ok := av.(*types.AttributeValueMemberS)
	if !ok {
		return nil, fmt.Errorf("attribute %s is not a string", dynamoAttrHistory)
	}
	return state.DecodeHistory(s.Value)
}

// LoadHistory reads the record of actions alone, with a strongly
// consistent read, and never writes: for a person asking what the reaper
// did. A record that cannot be read is an error here, not an empty one.
// Version "" means there is no ledger.
func (d *Store) LoadHistory(ctx context.Context) ([]state.Record, state.Version, error) {
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:            aws.String(d.table),
		Key:                  d.itemKey(),
		ConsistentRead:       aws.Bool(true),
		ProjectionExpression: aws.String("#v, #h"),
		ExpressionAttributeNames: map[string]string{
			"#v": dynamoAttrVersion,
			"#h": dynamoAttrHistory,
		},
	})
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", d.where(), err)
	}
	if len(out.Item) == 0 {
		return nil, "", nil
	}
	n, ok := out.Item[dynamoAttrVersion].(*types.AttributeValueMemberN)
	if !ok {
		return nil, "", fmt.Errorf("decode %s: attribute %s is missing or not a number", d.where(), dynamoAttrVersion)
	}
	h, err := d.history(out.Item)
	if err != nil {
		return nil, "", fmt.Errorf("decode %s of %s: %w", dynamoAttrHistory, d.where(), err)
	}
	return h, state.Version(n.Value), nil
}

// Save writes l if the item is still at version v, creating it when v is
// "". An item deleted since it was loaded is a conflict too: the ledger
// changed under the caller.
//
// A conflict is only ever reported from DynamoDB's own verdict on the
// condition. If a PutItem that succeeded is retried by the SDK (its response
// was lost) the retry fails the condition and is reported as a conflict: a
// sweep then starts no action, which is the safe way to be wrong.
func (d *Store) Save(ctx context.Context, l state.Ledger, v state.Version) (state.Version, error) {
	enc, trim, err := state.Fit(l, d.LimitBytes, DefaultLimitBytes, d.where())
	if err != nil {
		return "", err
	}

	var next uint64 = 1
	in := &dynamodb.PutItemInput{TableName: aws.String(d.table)}
	if v == "" {
		in.ConditionExpression = aws.String("attribute_not_exists(" + dynamoAttrKey + ")")
	} else {
		cur, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return "", fmt.Errorf("save %s: version %q was not given by this store: %w", d.where(), v, err)
		}
		next = cur + 1
		in.ConditionExpression = aws.String(dynamoAttrVersion + " = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":v": &types.AttributeValueMemberN{Value: string(v)},
		}
	}
	nextVersion := strconv.FormatUint(next, 10)
	in.Item = map[string]types.AttributeValue{
		dynamoAttrKey:     &types.AttributeValueMemberS{Value: d.key},
		dynamoAttrVersion: &types.AttributeValueMemberN{Value: nextVersion},
		dynamoAttrMarks:   &types.AttributeValueMemberS{Value: string(enc.Marks)},
		dynamoAttrUpdated: &types.AttributeValueMemberS{Value: time.Now().UTC().Format(time.RFC3339)},
	}
	if enc.Lists != nil {
		in.Item[dynamoAttrLists] = &types.AttributeValueMemberB{Value: enc.Lists}
	}
	if enc.Next != "" {
		in.Item[dynamoAttrNext] = &types.AttributeValueMemberS{Value: enc.Next}
	}
	if enc.Streaks != "" {
		in.Item[dynamoAttrStreaks] = &types.AttributeValueMemberS{Value: enc.Streaks}
	}
	if enc.History != "" {
		in.Item[dynamoAttrHistory] = &types.AttributeValueMemberS{Value: enc.History}
	}
	if enc.Loops != "" {
		in.Item[dynamoAttrLoops] = &types.AttributeValueMemberS{Value: enc.Loops}
	}

	if _, err := d.client.PutItem(ctx, in); err != nil {
		doing := "create"
		if v != "" {
			doing = "update"
		}
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if v == "" {
				return "", fmt.Errorf("create %s: %w: %w", d.where(), state.ErrConflict, err)
			}
			return "", fmt.Errorf("update %s at version %s: %w: %w", d.where(), v, state.ErrConflict, err)
		}
		return "", fmt.Errorf("%s %s: %w", doing, d.where(), err)
	}

	d.trims.Saved(trim, "dynamodb_table", d.table, "key", d.key)
	return state.Version(nextVersion), nil
}
