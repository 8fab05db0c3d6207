package jobconfig

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration written in JSON as Go writes durations ("1.5s", "20ms").
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"1.5s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// String returns d as time.Duration writes it.
func (d Duration) String() string { return time.Duration(d).String() }
