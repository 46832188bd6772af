package safetext

import (
	"encoding/json"
	"time"
)

// Value escapes a value bound for an encoder (a log attribute, the Lambda's
// JSON answer): strings, errors, map keys and the containers of them are
// escaped element by element and keep their shape; numbers, booleans and
// times are returned as they are; anything else is returned as it is
// unless its JSON form holds a rune to escape, in which case the escaped
// JSON text takes its place, as redact.Set.Value does with a secret.
func Value(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return String(x)
	case error:
		return String(x.Error())
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = String(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Value(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[String(k)] = Value(e)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, e := range x {
			out[String(k)] = String(e)
		}
		return out
	case bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64,
		[]int, []int64, time.Time, time.Duration:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		// An encoder fails on it the same way and prints its own error,
		// never the value.
		return v
	}
	if !Safe(string(b)) {
		return String(string(b))
	}
	return v
}
