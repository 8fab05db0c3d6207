package jobconfig

import (
	"errors"
	"strings"
	"testing"
)

// TestUpdateEvery: "epoch", "interval" and a number of intervals in range parse and read back
// as written; they size the updates of a server's epoch; anything else is refused naming the
// forms; the zero value is the default, one update per epoch.
func TestUpdateEvery(t *testing.T) {
	for _, tc := range []struct {
		in                    string
		size, perEpoch, ofTen int // of 8 intervals; perEpoch of 10
	}{{"epoch", 8, 1, 1}, {"interval", 1, 8, 10}, {"3", 3, 3, 4}, {"8", 8, 1, 2}, {"100", 8, 1, 1}} {
		u, err := ParseUpdateEvery(tc.in)
		if err != nil || u.String() != tc.in || u.Size(8) != tc.size || u.PerEpoch(8) != tc.perEpoch || u.PerEpoch(10) != tc.ofTen {
			t.Errorf("ParseUpdateEvery(%q) = %v (size %d, %d and %d an epoch), %v; want size %d, %d and %d",
				tc.in, u, u.Size(8), u.PerEpoch(8), u.PerEpoch(10), err, tc.size, tc.perEpoch, tc.ofTen)
		}
	}
	if UpdateIntervals(1).String() != UpdateIntervalText {
		t.Errorf("1 interval reads as %q, want %q", UpdateIntervals(1), UpdateIntervalText)
	}
	for _, bad := range []string{"", "0", "-1", "+2", "02", "65537", "epochs", "1.5"} {
		if _, err := ParseUpdateEvery(bad); err == nil || !strings.Contains(err.Error(), "want epoch, interval or a number of intervals in [1, 65536]") {
			t.Errorf("ParseUpdateEvery(%q): %v, want an error naming the forms", bad, err)
		}
	}
	var zero UpdateEvery
	if def, err := ParseUpdateEvery(DefaultUpdateEvery); err != nil || def != zero {
		t.Errorf("default %q reads as %v, %v; want the zero value", DefaultUpdateEvery, def, err)
	}
}

// TestUpdateEveryWireForm: training.updateEvery travels in its text form, is left out when it
// is the default, so that a config of an older operator reads as one update per epoch, and a
// bad one is refused.
func TestUpdateEveryWireForm(t *testing.T) {
	c := validConfig()
	data, err := Marshal(c)
	if err != nil || strings.Contains(string(data), "updateEvery") {
		t.Fatalf("default granularity on the wire (%v):\n%s", err, data)
	}
	c.Training.UpdateEvery = UpdateIntervals(2)
	if data, err = Marshal(c); err != nil || !strings.Contains(string(data), `"updateEvery": "2"`) {
		t.Fatalf("update every 2 intervals on the wire (%v):\n%s", err, data)
	}
	back, err := Parse(data)
	if err != nil || back.Training.UpdateEvery != UpdateIntervals(2) {
		t.Fatalf("read back: %v, %v", back, err)
	}
	for _, bad := range []string{`"0"`, `"hourly"`} {
		wrong := strings.Replace(string(data), `"updateEvery": "2"`, `"updateEvery": `+bad, 1)
		if _, err := Parse([]byte(wrong)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "training.updateEvery update every "+bad+": want") {
			t.Errorf("updateEvery %s: %v, want an error naming it", bad, err)
		}
	}
}
