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
	// TaskSeconds is the core-seconds of scheduling and sending one task; MessageSeconds
	// those of one scatter message between two graph servers; ParamSeconds those of one
	// weight element of one interval (fetched, its gradient pushed and applied); EpochSeconds
	// is a fixed time per epoch (the epoch gate).
	ElementSeconds        float64 `json:"elementSeconds"`
	FeatureElementSeconds float64 `json:"featureElementSeconds"`
	TaskSeconds           float64 `json:"taskSeconds"`
	MessageSeconds        float64 `json:"messageSeconds"`
	ParamSeconds          float64 `json:"paramSeconds"`
	EpochSeconds          float64 `json:"epochSeconds"`
	// RoundTripSeconds is the latency of one round trip between two of a run's servers (a
	// weight pull, a gradient push, a scatter), and RoundTripByteSeconds the latency it adds
	// per byte it carries: time on an interval's chain, not core-seconds.
	RoundTripSeconds     float64 `json:"roundTripSeconds"`
	RoundTripByteSeconds float64 `json:"roundTripByteSeconds"`
	// CallSeconds is the latency of one function call beyond its compute and overhead (0
	// when no function run was measured); CallCoreSeconds and CallByteSeconds are its
	// overhead, per call and per byte of its payload (encoding, the invocation, decoding),
	// which on a shared machine is also core-seconds.
	CallSeconds     float64 `json:"callSeconds"`
	CallCoreSeconds float64 `json:"callCoreSeconds"`
	CallByteSeconds float64 `json:"callByteSeconds"`
}

// The fitted coefficients (the fields after BytesPerSecond), as indices of linear.x.
const (
	elementC = iota
	featureElementC
	taskC
	messageC
	paramC
	epochC
	roundTripC
	roundTripByteC
	callC
	callCoreC
	callByteC
	numFitted
)

// fitted returns the fitted coefficients of c, in the order of their indices.
func (c *Calibration) fitted() [numFitted]*float64 {
	return [numFitted]*float64{&c.ElementSeconds, &c.FeatureElementSeconds, &c.TaskSeconds, &c.MessageSeconds,
		&c.ParamSeconds, &c.EpochSeconds, &c.RoundTripSeconds, &c.RoundTripByteSeconds, &c.CallSeconds, &c.CallCoreSeconds, &c.CallByteSeconds}
}

// linear is a time as a function of the fitted coefficients: c + Σ x[k]·coefficient k.
type linear struct {
	c float64
	x [numFitted]float64
}

func constant(v float64) linear { return linear{c: v} }

// term is v times coefficient k.
func term(k int, v float64) linear {
	var l linear
	l.x[k] = v
	return l
}

func sum(ls ...linear) linear {
	var s linear
	for _, l := range ls {
		s = s.plus(l)
	}
	return s
}

func (l linear) plus(o linear) linear {
	l.c += o.c
	for k := range l.x {
		l.x[k] += o.x[k]
	}
	return l
}

func (l linear) times(f float64) linear {
	l.c *= f
	for k := range l.x {
		l.x[k] *= f
	}
	return l
}

// at evaluates l at cal's coefficients.
func (l linear) at(cal Calibration) float64 {
	v := l.c
	for k, p := range cal.fitted() {
		v += l.x[k] * *p
	}
	return v
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
		{"roundTripSeconds", c.RoundTripSeconds, false}, {"roundTripByteSeconds", c.RoundTripByteSeconds, false},
		{"callSeconds", c.CallSeconds, false},
		{"callCoreSeconds", c.CallCoreSeconds, false}, {"callByteSeconds", c.CallByteSeconds, false},
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
