package file

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/runner-reaper/runner-reaper/state"
	. "github.com/runner-reaper/runner-reaper/test/statetest"
)

// BenchmarkFileLedger saves and loads the file ledger of a fleet whose
// every scope's list is cached (100 registrations a scope, as the scale
// bench's world): what a sweep's first and last steps cost a user of the
// CLI's default ledger. B/op is what one save or load allocates; the file's
// size is reported as file-bytes.
func BenchmarkFileLedger(b *testing.B) {
	for _, regs := range []int{10_000, 100_000} {
		l := state.Ledger{Marks: Marks(20), Lists: FleetLists(regs/100, 100)}
		p := filepath.Join(b.TempDir(), "ledger.json")
		f := New(p)
		v, err := f.Save(Ctx(b), l, "")
		if err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("registrations=%d/op=save", regs), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if v, err = f.Save(Ctx(b), l, v); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(fi.Size()), "file-bytes")
		})
		b.Run(fmt.Sprintf("registrations=%d/op=load", regs), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := f.Load(Ctx(b)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(fi.Size()), "file-bytes")
		})
	}
}

// BenchmarkHistory encodes and decodes the record of the default 200
// actions, as each backend does it: the ConfigMap's and DynamoDB's
// history.json (state.Fit's encoding, and DecodeHistory), and the file
// ledger's save and load of a ledger of little else. history-bytes is the
// JSON the ConfigMap holds.
func BenchmarkHistory(b *testing.B) {
	h := History(200)
	l := state.Ledger{Marks: Marks(20), History: h}
	enc, _, err := state.Fit(l, 1<<30, 1<<30, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("configmap=encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := state.Fit(l, 1<<30, 1<<30, "bench"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(enc.History)), "history-bytes")
	})
	b.Run("configmap=decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := state.DecodeHistory(enc.History); err != nil {
				b.Fatal(err)
			}
		}
	})
	p := filepath.Join(b.TempDir(), "ledger.json")
	f := New(p)
	v, err := f.Save(Ctx(b), l, "")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("file=save", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if v, err = f.Save(Ctx(b), l, v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("file=load", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := f.LoadHistory(Ctx(b)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
