package jobconfig

import (
	"fmt"
	"strconv"
)

// The text forms of UpdateEvery's two named values.
const (
	// UpdateEpochText sums every interval of a graph server: one update per server per epoch.
	UpdateEpochText = "epoch"
	// UpdateIntervalText pushes each interval's gradients as they come (the original Dorylus).
	UpdateIntervalText = "interval"
)

// DefaultUpdateEvery is the update granularity of a run that names none, in the text form
// ParseUpdateEvery reads: the default of `dorylus train --update-every` and of the CRD's
// spec.training.updateEvery. One update per graph server per epoch measured fastest at equal
// accuracy (README, "The update granularity"): it makes one weight version per server and
// epoch instead of one per interval, and every version is a pull and a push per server.
const DefaultUpdateEvery = UpdateEpochText

// UpdateEvery is the update granularity of the asynchronous pipeline: how many of a graph
// server's intervals sum their weight gradients of an epoch into one push to the parameter
// servers, which makes one weight version of it. Synchronous training ignores it (it makes one
// update per epoch of every interval's gradients). It is made valid or not at all — by
// ParseUpdateEvery, UpdateIntervals or its zero value — so that its readers check nothing. Its
// zero value is one update per graph server per epoch (UpdateEpochText). It is also a
// pflag.Value and, in JSON, its text form.
type UpdateEvery struct {
	n int // intervals per update; 0: all of the server's
}

// UpdateIntervals is an update of every n intervals (in Limits.UpdateEvery), for constants;
// it panics on another n.
func UpdateIntervals(n int) UpdateEvery {
	if !Limits.UpdateEvery.Contains(n) {
		panic(fmt.Sprintf("jobconfig: update every %d intervals: want %v", n, Limits.UpdateEvery))
	}
	return UpdateEvery{n: n}
}

// ParseUpdateEvery parses "epoch", "interval" or a number of intervals in Limits.UpdateEvery,
// written in decimal without a sign or leading zeros.
func ParseUpdateEvery(s string) (UpdateEvery, error) {
	switch s {
	case UpdateEpochText:
		return UpdateEvery{}, nil
	case UpdateIntervalText:
		return UpdateEvery{n: 1}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || !Limits.UpdateEvery.Contains(n) || strconv.Itoa(n) != s { // as the CRD's rule: no sign, no leading zeros
		return UpdateEvery{}, fmt.Errorf("update every %q: want %s, %s or a number of intervals in %v", s, UpdateEpochText, UpdateIntervalText, Limits.UpdateEvery)
	}
	return UpdateEvery{n: n}, nil
}

// Size returns how many of a graph server's intervals (of intervals ≥ 1) sum into one update:
// the last update of an epoch may sum fewer.
func (u UpdateEvery) Size(intervals int) int {
	if u.n == 0 {
		return intervals
	}
	return min(u.n, intervals)
}

// PerEpoch returns the updates one graph server of intervals ≥ 1 intervals pushes an epoch in
// asynchronous mode.
func (u UpdateEvery) PerEpoch(intervals int) int {
	s := u.Size(intervals)
	return (intervals + s - 1) / s
}

// String returns "epoch", "interval" or the number of intervals.
func (u UpdateEvery) String() string {
	switch u.n {
	case 0:
		return UpdateEpochText
	case 1:
		return UpdateIntervalText
	}
	return strconv.Itoa(u.n)
}

// Set parses v into u (pflag.Value).
func (u *UpdateEvery) Set(v string) error {
	p, err := ParseUpdateEvery(v)
	if err != nil {
		return err
	}
	*u = p
	return nil
}

// Type names the flag's value type (pflag.Value).
func (u *UpdateEvery) Type() string { return "granularity" }

// MarshalText writes the text form (encoding.TextMarshaler: a JSON string).
func (u UpdateEvery) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (u *UpdateEvery) UnmarshalText(text []byte) error { return u.Set(string(text)) }

// Equal reports whether u and o are the same granularity (go-cmp compares with it).
func (u UpdateEvery) Equal(o UpdateEvery) bool { return u == o }
