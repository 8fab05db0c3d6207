package tensor

import "math"

// SoftmaxCrossEntropy returns the mean cross-entropy of softmax(logits) against labels over the
// given rows (indices into logits; the label of row r is labels[r]). When grad is not nil (same
// shape as logits) it is overwritten with dLoss/dlogits: (softmax − onehot)/len(rows) on the given
// rows, which must then be distinct, and zero elsewhere. It is stable for any finite logits
// (log-sum-exp after subtracting the row maximum, float64 accumulation). It panics with an
// ErrShape error on a bad row or label (see CheckLabels) and returns 0 for no rows.
func SoftmaxCrossEntropy(logits *Dense, labels []int32, rows []int32, grad *Dense) float64 {
	must(CheckLabels(logits, labels, rows))
	if grad != nil {
		must(CheckSameShape("SoftmaxCrossEntropy", grad, logits))
		zeroParallel(grad)
	}
	if len(rows) == 0 || logits.Cols == 0 {
		return 0
	}
	t := kpool.get()
	t.d0, t.d1, t.ix0, t.ix1 = logits, grad, labels, rows
	t.f0 = float32(1 / float64(len(rows)))
	t.n = len(rows)
	t.chunks = chunkCount(len(rows), max(1, 4096/logits.Cols), 4, maxPartials)
	t.run = softmaxChunk
	kpool.exec0(t)
	sum := 0.0
	for c := 0; c < t.chunks; c++ {
		sum += t.partial[c]
	}
	kpool.put(t)
	return sum / float64(len(rows))
}

func softmaxChunk(t *task, c, lo, hi int) {
	x, g := t.d0, t.d1
	n := x.Cols
	loss := 0.0
	for _, r := range t.ix1[lo:hi] {
		row := x.Data[int(r)*n : int(r)*n+n]
		m, nan := row[0], false
		for _, v := range row {
			if v > m {
				m = v
			}
			nan = nan || v != v
		}
		lab := t.ix0[r]
		if nan || m-m != 0 { // a NaN or an infinity: report it rather than hide it
			loss = math.NaN()
			if g != nil {
				for j := range row {
					g.Data[int(r)*n+j] = float32(math.NaN())
				}
			}
			continue
		}
		s := 0.0
		if g != nil {
			gr := g.Data[int(r)*n : int(r)*n+n]
			gr = gr[:len(row)]
			for j, v := range row {
				e := expSoftmax(v - m)
				gr[j] = e
				s += float64(e)
			}
			inv := float32(1/s) * t.f0
			for j := range gr {
				gr[j] *= inv
			}
			gr[lab] -= t.f0
		} else {
			for _, v := range row {
				s += float64(expSoftmax(v - m))
			}
		}
		loss += math.Log(s) - float64(row[lab]-m)
	}
	t.partial[c] = loss
}

// Accuracy returns the fraction of the given rows whose largest logit (the first, on ties) is at
// their label; 0 for no rows. It panics like SoftmaxCrossEntropy on a bad row or label.
func Accuracy(logits *Dense, labels []int32, rows []int32) float64 {
	must(CheckLabels(logits, labels, rows))
	if len(rows) == 0 || logits.Cols == 0 {
		return 0
	}
	n, hit := logits.Cols, 0
	for _, r := range rows {
		row := logits.Data[int(r)*n : int(r)*n+n]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if int32(best) == labels[r] {
			hit++
		}
	}
	return float64(hit) / float64(len(rows))
}

// expSoftmax returns e^x for finite x <= 0 in float32 to about 2 ulp: x = k·ln2 + r with
// |r| <= ln2/2, e^r by a degree-6 polynomial, times 2^k. Below -87 it returns e^-87 (1.6e-38), a
// stand-in for 0 next to the softmax's row sums of at least 1. It is small enough to inline.
func expSoftmax(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
		magic = 12582912 // 1.5·2²³: adding and subtracting it rounds to an integer
	)
	x = max(x, -87)
	k := (x*log2e + magic) - magic
	r := x - k*ln2hi - k*ln2lo
	p := ((((((1.0/720)*r+1.0/120)*r+1.0/24)*r+1.0/6)*r+0.5)*r+1)*r + 1
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}
