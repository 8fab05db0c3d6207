package jobconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// DefaultStaleness is the staleness of a run that names none, in the text form ParseStaleness
// reads: the GNNTrainingJob CRD's default for spec.training.staleness and the default of
// `dorylus train --staleness`. Synchronous training is the default because it is exact (it
// matches single-process training) and reproducible; the asynchronous pipeline is a
// speed-for-staleness trade a run opts into.
const DefaultStaleness = SyncStaleness

// SyncStaleness is the text form of synchronous training.
const SyncStaleness = "sync"

// MaxStaleness is the largest bound S the GNNTrainingJob CRD admits.
const MaxStaleness = 16

// Staleness is the pipeline's asynchrony (package pipeline): synchronous training (a barrier
// after every Scatter), or the bound S ≥ 0 of the asynchronous pipeline. It is made valid or
// not at all — by ParseStaleness from its text, StalenessOf from its wire forms, Bounded for
// constants, or Sync — so that its readers check nothing. Its zero value is asynchronous with
// S = 0. It is also a pflag.Value, and in JSON the CRD's form: "sync" or the number S.
type Staleness struct {
	sync  bool
	bound int
}

// Sync is synchronous training.
var Sync = Staleness{sync: true}

// ParseStaleness parses "sync" or a bound S ≥ 0.
func ParseStaleness(s string) (Staleness, error) {
	if s == SyncStaleness {
		return Sync, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return Staleness{}, fmt.Errorf("staleness %q: want %s or a bound S ≥ 0", s, SyncStaleness)
	}
	return Staleness{bound: n}, nil
}

// MustParseStaleness is ParseStaleness for constants; it panics on a bad one.
func MustParseStaleness(s string) Staleness {
	st, err := ParseStaleness(s)
	if err != nil {
		panic(err)
	}
	return st
}

// StalenessOf returns the staleness of its wire forms' two fields (run.json's "sync" and
// "staleness", rpc.InitRequest's sync and staleness): synchronous with bound 0, or
// asynchronous with a bound ≥ 0.
func StalenessOf(sync bool, bound int) (Staleness, error) {
	switch {
	case bound < 0:
		return Staleness{}, fmt.Errorf("must not be negative, got %d", bound)
	case sync && bound != 0:
		return Staleness{}, fmt.Errorf("must be 0 with sync, got %d", bound)
	}
	return Staleness{sync: sync, bound: bound}, nil
}

// Bounded is the asynchronous pipeline of bound s, for constants; it panics on a negative s.
func Bounded(s int) Staleness {
	st, err := StalenessOf(false, s)
	if err != nil {
		panic(err)
	}
	return st
}

// Sync reports whether s is synchronous training.
func (s Staleness) Sync() bool { return s.sync }

// Bound returns the asynchronous bound S; 0 when synchronous.
func (s Staleness) Bound() int { return s.bound }

// Equal reports whether s and o are the same staleness (go-cmp compares with it).
func (s Staleness) Equal(o Staleness) bool { return s == o }

// String returns "sync" or the bound S.
func (s Staleness) String() string {
	if s.sync {
		return SyncStaleness
	}
	return strconv.Itoa(s.bound)
}

// Set parses v into s (pflag.Value).
func (s *Staleness) Set(v string) error {
	st, err := ParseStaleness(v)
	if err != nil {
		return err
	}
	*s = st
	return nil
}

// Type names the flag's value type (pflag.Value).
func (s *Staleness) Type() string { return "staleness" }

// MarshalJSON writes "sync" or the number S, as the CRD's spec.training.staleness.
func (s Staleness) MarshalJSON() ([]byte, error) {
	if s.sync {
		return json.Marshal(SyncStaleness)
	}
	return json.Marshal(s.bound)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Staleness) UnmarshalJSON(data []byte) error {
	var text string
	if json.Unmarshal(data, &text) == nil {
		return s.Set(text)
	}
	var n int
	if err := json.Unmarshal(data, &n); err != nil {
		return fmt.Errorf("staleness %s: want %q or a bound S ≥ 0", data, SyncStaleness)
	}
	st, err := StalenessOf(false, n)
	if err != nil {
		return fmt.Errorf("staleness %w", err)
	}
	*s = st
	return nil
}

// trainingJSON is Training on the wire: the staleness as the two fields "sync" and
// "staleness", as the operator has always written them, and the update granularity in its
// text form, absent for the default.
type trainingJSON struct {
	*trainingFields
	Sync        bool   `json:"sync"`
	Staleness   int    `json:"staleness"`
	UpdateEvery string `json:"updateEvery,omitempty"`
}

type trainingFields Training

// MarshalJSON writes the staleness as "sync" and "staleness".
func (t Training) MarshalJSON() ([]byte, error) {
	w := trainingJSON{trainingFields: (*trainingFields)(&t), Sync: t.Staleness.sync, Staleness: t.Staleness.bound}
	if t.UpdateEvery != (UpdateEvery{}) {
		w.UpdateEvery = t.UpdateEvery.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes, refusing unknown fields as Parse does, and a
// staleness StalenessOf refuses, or an update granularity ParseUpdateEvery refuses, as
// ErrInvalid naming training.staleness or training.updateEvery.
func (t *Training) UnmarshalJSON(data []byte) error {
	w := trainingJSON{trainingFields: (*trainingFields)(t)}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	st, err := StalenessOf(w.Sync, w.Staleness)
	if err != nil {
		return fmt.Errorf("%w: training.staleness %v", ErrInvalid, err)
	}
	t.Staleness = st
	t.UpdateEvery = UpdateEvery{}
	if w.UpdateEvery != "" {
		if t.UpdateEvery, err = ParseUpdateEvery(w.UpdateEvery); err != nil {
			return fmt.Errorf("%w: training.updateEvery %v", ErrInvalid, err)
		}
	}
	return nil
}
