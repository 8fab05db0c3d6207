package plan

import (
	"fmt"
	"math"
	"slices"
)

// Run is a measured run: a workload in a configuration on a machine, and its median epoch
// time.
type Run struct {
	Workload     Workload
	Config       Config
	Machine      Machine
	EpochSeconds float64
}

// FitWork fits ElementSeconds, FeatureElementSeconds, TaskSeconds, MessageSeconds, ParamSeconds and EpochSeconds of cal to runs on the cpu backend
// with no extra latency, whose epochs the work bound sets: least squares of the relative
// errors (what a plan is judged by: a millisecond matters on a small graph's epoch, not on a
// large one's) with no negative coefficient. The kernel costs and the transfer rate of cal
// must be measured already.
func FitWork(cal Calibration, runs []Run) (Calibration, error) {
	if len(runs) < 6 {
		return cal, fmt.Errorf("%w: %d runs to fit 6 coefficients: want at least 6", ErrCalibration, len(runs))
	}
	rows := make([][]float64, len(runs))
	ys := make([]float64, len(runs))
	for i, r := range runs {
		if r.Config.Backend != CPU || r.Machine.ExtraLatency != 0 {
			return cal, fmt.Errorf("%w: run %d (%s, latency %v): fit the work on the cpu backend with no extra latency", ErrCalibration, i, r.Config, r.Machine.ExtraLatency)
		}
		if err := r.Config.validate(r.Machine); err != nil {
			return cal, err
		}
		n := r.Workload.Count(r.Config.GraphServers, r.Config.Intervals)
		cores := r.Machine.coresPerServer(r.Config.GraphServers)
		graphK, tensorK := n.kernelSeconds(cal)
		if !(r.EpochSeconds > 0) {
			return cal, fmt.Errorf("%w: run %d (%s): epoch of %v s", ErrCalibration, i, r.Config, r.EpochSeconds)
		}
		w := 1 / r.EpochSeconds
		rows[i] = []float64{w * n.Elements / cores, w * n.FeatureElements / cores, w * n.Tasks / cores, w * n.Messages / cores, w * n.ParamUpdates / cores, w}
		ys[i] = w * (r.EpochSeconds - (graphK+tensorK)/cores - n.GhostBytes/cal.BytesPerSecond)
	}
	x, err := nonNegativeLeastSquares(rows, ys)
	if err != nil {
		return cal, err
	}
	cal.ElementSeconds, cal.FeatureElementSeconds, cal.TaskSeconds, cal.MessageSeconds, cal.ParamSeconds, cal.EpochSeconds = x[0], x[1], x[2], x[3], x[4], x[5]
	return cal, cal.Validate()
}

// FitCall sets CallSeconds of cal to the median, over runs on a function backend, of the
// call latency for which Predict gives the measured epoch time (0 where even no latency
// predicts a longer epoch).
func FitCall(cal Calibration, runs []Run) (Calibration, error) {
	if len(runs) == 0 {
		return cal, fmt.Errorf("%w: no function run to fit the call latency to", ErrCalibration)
	}
	fits := make([]float64, len(runs))
	for i, r := range runs {
		if r.Config.Backend == CPU {
			return cal, fmt.Errorf("%w: run %d (%s): fit the call latency on a function backend", ErrCalibration, i, r.Config)
		}
		at := func(call float64) (float64, error) {
			c := cal
			c.CallSeconds = call
			p, err := Predict(r.Workload, r.Config, r.Machine, c)
			return p.EpochSeconds, err
		}
		lo, hi := 0.0, r.EpochSeconds // the prediction grows with the call latency
		if t, err := at(lo); err != nil || t >= r.EpochSeconds {
			fits[i] = 0
			if err != nil {
				return cal, err
			}
			continue
		}
		for range 60 {
			mid := (lo + hi) / 2
			if t, _ := at(mid); t < r.EpochSeconds {
				lo = mid
			} else {
				hi = mid
			}
		}
		fits[i] = (lo + hi) / 2
	}
	slices.Sort(fits)
	cal.CallSeconds = fits[len(fits)/2]
	return cal, cal.Validate()
}

// nonNegativeLeastSquares minimises |A x - y| over x ≥ 0 by the active-set method for a
// few columns: solve on the free columns, pin the most negative coefficient to 0, repeat.
func nonNegativeLeastSquares(a [][]float64, y []float64) ([]float64, error) {
	n := len(a[0])
	free := make([]bool, n)
	for j := range free {
		free[j] = true
	}
	for {
		var cols []int
		for j, f := range free {
			if f {
				cols = append(cols, j)
			}
		}
		sol, err := leastSquares(a, y, cols)
		if err != nil {
			return nil, err
		}
		x := make([]float64, n)
		worst := -1
		for k, j := range cols {
			x[j] = sol[k]
			if sol[k] < 0 && (worst < 0 || sol[k] < x[worst]) {
				worst = j
			}
		}
		if worst < 0 {
			return x, nil
		}
		free[worst] = false
	}
}

// leastSquares solves the normal equations of a's columns cols against y.
func leastSquares(a [][]float64, y []float64, cols []int) ([]float64, error) {
	k := len(cols)
	m := make([][]float64, k) // [AᵀA | Aᵀy]
	for r := range m {
		m[r] = make([]float64, k+1)
		for c := range k {
			for i := range a {
				m[r][c] += a[i][cols[r]] * a[i][cols[c]]
			}
		}
		for i := range a {
			m[r][k] += a[i][cols[r]] * y[i]
		}
	}
	for p := range k { // Gaussian elimination with partial pivoting
		best := p
		for r := p + 1; r < k; r++ {
			if math.Abs(m[r][p]) > math.Abs(m[best][p]) {
				best = r
			}
		}
		m[p], m[best] = m[best], m[p]
		if math.Abs(m[p][p]) < 1e-300 {
			return nil, fmt.Errorf("%w: the runs do not tell the coefficients apart: vary the intervals and the datasets", ErrCalibration)
		}
		for r := range k {
			if r != p {
				f := m[r][p] / m[p][p]
				for c := p; c <= k; c++ {
					m[r][c] -= f * m[p][c]
				}
			}
		}
	}
	x := make([]float64, k)
	for r := range k {
		x[r] = m[r][k] / m[r][r]
	}
	return x, nil
}
