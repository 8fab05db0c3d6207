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
// after every Scatter), or the bound S ≥ 0 of the asynchronous pipeline. Its zero value is
// asynchronous with S = 0; parse text with ParseStaleness. It is also a pflag.Value.
type Staleness struct {
	// Sync selects synchronous training; Bound is then 0.
	Sync bool
	// Bound is the asynchronous bound S ≥ 0.
	Bound int
}

// Sync is synchronous training.
var Sync = Staleness{Sync: true}

// ParseStaleness parses "sync" or a bound S ≥ 0.
func ParseStaleness(s string) (Staleness, error) {
	if s == SyncStaleness {
		return Sync, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return Staleness{}, fmt.Errorf("staleness %q: want %s or a bound S ≥ 0", s, SyncStaleness)
	}
	return Staleness{Bound: n}, nil
}

// MustParseStaleness is ParseStaleness for constants; it panics on a bad one.
func MustParseStaleness(s string) Staleness {
	st, err := ParseStaleness(s)
	if err != nil {
		panic(err)
	}
	return st
}

// String returns "sync" or the bound S.
func (s Staleness) String() string {
	if s.Sync {
		return SyncStaleness
	}
	return strconv.Itoa(s.Bound)
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

func (s Staleness) validate(v *validator) {
	v.check(s.Bound >= 0, "training.staleness", "must not be negative, got %d", s.Bound)
	v.check(!s.Sync || s.Bound == 0, "training.staleness", "must be 0 with sync, got %d", s.Bound)
}

// trainingJSON is Training on the wire: the staleness as the two fields "sync" and
// "staleness", as the operator has always written them.
type trainingJSON struct {
	*trainingFields
	Sync      bool `json:"sync"`
	Staleness int  `json:"staleness"`
}

type trainingFields Training

// MarshalJSON writes the staleness as "sync" and "staleness".
func (t Training) MarshalJSON() ([]byte, error) {
	return json.Marshal(trainingJSON{trainingFields: (*trainingFields)(&t), Sync: t.Staleness.Sync, Staleness: t.Staleness.Bound})
}

// UnmarshalJSON reads what MarshalJSON writes, refusing unknown fields as Parse does.
func (t *Training) UnmarshalJSON(data []byte) error {
	w := trainingJSON{trainingFields: (*trainingFields)(t)}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	t.Staleness = Staleness{Sync: w.Sync, Bound: w.Staleness}
	return nil
}
