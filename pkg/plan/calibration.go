package plan

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// Calibration holds the model's coefficients, measured on one machine.
type Calibration struct {
	// Measured says when (a date, YYYY-MM-DD), Machine on what, and Command by which command
	// the coefficients were measured.
	Measured string `json:"measured"`
	Machine  string `json:"machine"`
	Command  string `json:"command"`
	// GatherSecondsPerMAC, FeatureSecondsPerMAC and FlopSeconds are the core-seconds of one
	// multiply-add of the gather (Â P), of the product of sparse features and a weight (X W
	// and Xᵀ dP), and of one flop of the dense GEMM, from micro-benchmarks of the kernels.
	GatherSecondsPerMAC  float64 `json:"gatherSecondsPerMAC"`
	FeatureSecondsPerMAC float64 `json:"featureSecondsPerMAC"`
	FlopSeconds          float64 `json:"flopSeconds"`
	// BytesPerSecond is the rate of a loopback TCP transfer.
	BytesPerSecond float64 `json:"bytesPerSecond"`
	// ElementSeconds and FeatureElementSeconds are the core-seconds of the element-wise work
	// on one activation element and one sparse feature (Epoch.Elements, FeatureElements);
	// TaskSeconds is the core-seconds of scheduling and sending one task;
	// MessageSeconds those of one scatter message between two graph servers; ParamSeconds those of one weight element of one interval (fetched, its gradient pushed
	// and applied); EpochSeconds is a fixed time per epoch (the epoch gate). The six are
	// fitted to the epoch times of real runs on the cpu backend.
	ElementSeconds        float64 `json:"elementSeconds"`
	FeatureElementSeconds float64 `json:"featureElementSeconds"`
	TaskSeconds           float64 `json:"taskSeconds"`
	MessageSeconds        float64 `json:"messageSeconds"`
	ParamSeconds          float64 `json:"paramSeconds"`
	EpochSeconds          float64 `json:"epochSeconds"`
	// CallSeconds is the time of one function call beyond its compute and payload, fitted to
	// a run through function emulators (0 when none was measured); on a shared machine it is
	// also core-seconds (the emulator and both ends of the call run there).
	CallSeconds float64 `json:"callSeconds"`
}

//go:embed calibration.json
var defaultCalibration []byte

// Default returns the calibration shipped with the planner (calibration.json).
func Default() Calibration {
	c, err := ReadCalibration(strings.NewReader(string(defaultCalibration)))
	if err != nil {
		panic("plan: the shipped calibration.json is invalid: " + err.Error())
	}
	return c
}

// ErrCalibration is wrapped by the errors of an invalid calibration.
var ErrCalibration = errors.New("plan: invalid calibration")

// ReadCalibration reads a calibration in JSON; unknown fields and missing coefficients are
// errors.
func ReadCalibration(r io.Reader) (Calibration, error) {
	var c Calibration
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Calibration{}, fmt.Errorf("%w: %w", ErrCalibration, err)
	}
	return c, c.Validate()
}

// Validate checks that every coefficient is finite, the rates and kernel costs positive and
// the rest not negative, and that the file says when and how it was measured.
func (c Calibration) Validate() error {
	for _, f := range []struct {
		name     string
		v        float64
		positive bool
	}{
		{"gatherSecondsPerMAC", c.GatherSecondsPerMAC, true}, {"featureSecondsPerMAC", c.FeatureSecondsPerMAC, true},
		{"flopSeconds", c.FlopSeconds, true},
		{"bytesPerSecond", c.BytesPerSecond, true}, {"elementSeconds", c.ElementSeconds, false},
		{"featureElementSeconds", c.FeatureElementSeconds, false},
		{"taskSeconds", c.TaskSeconds, false}, {"messageSeconds", c.MessageSeconds, false},
		{"paramSeconds", c.ParamSeconds, false}, {"epochSeconds", c.EpochSeconds, false},
		{"callSeconds", c.CallSeconds, false},
	} {
		switch {
		case math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0:
			return fmt.Errorf("%w: %s %v: want a finite number, 0 or more", ErrCalibration, f.name, f.v)
		case f.positive && f.v == 0:
			return fmt.Errorf("%w: %s 0: want a measured value above 0", ErrCalibration, f.name)
		}
	}
	if c.Measured == "" || c.Command == "" {
		return fmt.Errorf("%w: measured %q, command %q: say when and by which command it was measured", ErrCalibration, c.Measured, c.Command)
	}
	return nil
}

// Write writes c as indented JSON.
func (c Calibration) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}
