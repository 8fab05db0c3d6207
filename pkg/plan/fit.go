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

// Fit fits the coefficients of cal after BytesPerSecond to runs (their kernel costs and
// transfer rate must be measured already): least squares of the relative errors (what a
// plan is judged by: a millisecond matters on a small graph's epoch, not on a large one's)
// with no negative coefficient. A predicted epoch is the largest of its bounds plus the gate,
// each linear in the coefficients, so Fit solves with a bound chosen for each run and
// searches the choices. It starts from each run's bounds summed, in which every coefficient
// counts but the time per epoch (an interval's gate is two round trips in every run, which
// it could not be told from); then, while the error falls, it tries each run's largest bound
// at the best solution so far, and each other bound of one run in its place (a choice that
// does not tell the coefficients apart is no solution). A coefficient that no chosen bound
// holds keeps the value of the first solve.
func Fit(cal Calibration, runs []Run) (Calibration, error) {
	for i, r := range runs {
		if !(r.EpochSeconds > 0) {
			return cal, fmt.Errorf("%w: run %d (%s): epoch of %v s", ErrCalibration, i, r.Config, r.EpochSeconds)
		}
	}
	bs, err := boundsAt(cal, runs)
	if err != nil {
		return cal, err
	}
	summed := make([]int, len(runs))
	for i := range summed {
		summed[i] = allBounds
	}
	if held := len(columns(equations(bs, summed))) + 1; len(runs) < held { // and the time per epoch
		return cal, fmt.Errorf("%w: %d runs to fit %d coefficients: want at least %d", ErrCalibration, len(runs), held, held)
	}
	loss := func(c Calibration) float64 { // squared relative errors of the predictions
		bs, err := boundsAt(c, runs)
		if err != nil {
			return math.Inf(1)
		}
		e := 0.0
		for i, b := range bs {
			e += math.Pow(b.epoch(c).at(c)/runs[i].EpochSeconds-1, 2)
		}
		return e
	}
	best, err := solveChoice(cal, runs, summed)
	if err != nil {
		return cal, err
	}
	bestLoss := loss(best)
	for improved := true; improved; {
		improved = false
		if bs, err = boundsAt(best, runs); err != nil {
			return cal, err
		}
		chosen := make([]int, len(runs))
		for i, b := range bs {
			chosen[i] = b.largest(best)
		}
		tries := [][]int{chosen}
		for i, b := range bs {
			for k, x := range b.list() {
				if x != (linear{}) && k != chosen[i] {
					try := slices.Clone(chosen)
					try[i] = k
					tries = append(tries, try)
				}
			}
		}
		for _, try := range tries {
			c, err := solveChoice(best, runs, try)
			if err != nil {
				continue
			}
			if l := loss(c); l < bestLoss*(1-1e-9) {
				best, bestLoss, improved = c, l, true
			}
		}
	}
	return best, best.Validate()
}

// allBounds chooses, for a run, the sum of its bounds (Fit's first solve).
const allBounds = -1

// boundsAt returns the bounds of each run at cal's coefficients.
func boundsAt(cal Calibration, runs []Run) ([]bounds, error) {
	bs := make([]bounds, len(runs))
	for i, r := range runs {
		b, err := boundsOf(r.Workload, r.Config, r.Machine, cal)
		if err != nil {
			return nil, err
		}
		bs[i] = b
	}
	return bs, nil
}

// equations returns each run's epoch as set by its chosen bound (an index of bounds.list,
// or allBounds).
func equations(bs []bounds, choice []int) []linear {
	eqs := make([]linear, len(bs))
	for i, b := range bs {
		if choice[i] == allBounds {
			eqs[i] = sum(b.work, b.param, b.calls, b.chain, b.gate)
		} else {
			eqs[i] = b.setBy(b.list()[choice[i]])
		}
	}
	return eqs
}

// settleSolves bounds solveChoice's rounds.
const settleSolves = 50

// solveChoice solves the runs' epochs as set by their chosen bounds, starting from cal. The
// bounds are linear in the coefficients at a given queueing of the calls (queueCalls), which
// itself depends on the coefficients: it solves again with the bounds at each solution until
// the coefficients settle.
func solveChoice(cal Calibration, runs []Run, choice []int) (Calibration, error) {
	for range settleSolves {
		bs, err := boundsAt(cal, runs)
		if err != nil {
			return cal, err
		}
		next, err := solve(cal, runs, equations(bs, choice))
		if err != nil {
			return cal, err
		}
		if settled(cal, next) {
			return next, nil
		}
		cal = next
	}
	return cal, nil
}

// settled reports whether every fitted coefficient of b is within a part in 10¹² of a's.
func settled(a, b Calibration) bool {
	x, y := a.fitted(), b.fitted()
	for k := range x {
		if math.Abs(*x[k]-*y[k]) > 1e-12*math.Max(math.Abs(*x[k]), math.Abs(*y[k])) {
			return false
		}
	}
	return true
}

// solve returns cal with the coefficients that best give each run's epoch as its linear
// function in eqs (relative errors, none negative); the coefficients no equation holds keep
// their values.
func solve(cal Calibration, runs []Run, eqs []linear) (Calibration, error) {
	cols := columns(eqs)
	a := make([][]float64, len(runs))
	y := make([]float64, len(runs))
	for i, l := range eqs {
		w := 1 / runs[i].EpochSeconds
		for _, k := range cols {
			a[i] = append(a[i], w*l.x[k])
		}
		y[i] = w * (runs[i].EpochSeconds - l.c)
	}
	x, err := nonNegativeLeastSquares(a, y)
	if err != nil {
		return cal, err
	}
	c := cal.fitted()
	for j, k := range cols {
		*c[k] = x[j]
	}
	return cal, nil
}

// columns returns the coefficients that some equation of eqs holds.
func columns(eqs []linear) []int {
	var cols []int
	for k := range numFitted {
		if slices.ContainsFunc(eqs, func(l linear) bool { return l.x[k] != 0 }) {
			cols = append(cols, k)
		}
	}
	return cols
}

// nonNegativeLeastSquares minimises |A x - y| over x ≥ 0 by the active-set method for a
// few columns: solve on the free columns, pin the most negative coefficient to 0, repeat.
// The columns are scaled to unit norm first: coefficients differ by orders of magnitude.
func nonNegativeLeastSquares(a [][]float64, y []float64) ([]float64, error) {
	n := len(a[0])
	norm := make([]float64, n)
	for _, row := range a {
		for j, v := range row {
			norm[j] += v * v
		}
	}
	scaled := make([][]float64, len(a))
	for i, row := range a {
		scaled[i] = make([]float64, n)
		for j, v := range row {
			scaled[i][j] = v / math.Sqrt(norm[j])
		}
	}
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
		sol, err := leastSquares(scaled, y, cols)
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
			for j := range x {
				x[j] /= math.Sqrt(norm[j])
			}
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
		if math.Abs(m[p][p]) < 1e-12 { // the columns have unit norm
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
