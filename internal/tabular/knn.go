package tabular

import (
	"context"

	"gonum.org/v1/gonum/mat"
)

// knnPredict averages the targets of the k nearest train rows (Euclidean,
// ties to the lower row index) of every test row.
func knnPredict(ctx context.Context, xtr *mat.Dense, y []float64, xte *mat.Dense, k int) ([]float64, error) {
	ntr, _ := xtr.Dims()
	nte, _ := xte.Dims()
	k = min(k, ntr)
	out := make([]float64, nte)
	bestD := make([]float64, 0, k)
	bestI := make([]int, 0, k)
	for t := 0; t < nte; t++ {
		if t%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		q := xte.RawRowView(t)
		bestD, bestI = bestD[:0], bestI[:0]
		for i := 0; i < ntr; i++ {
			var d float64
			for j, v := range xtr.RawRowView(i) {
				e := v - q[j]
				d += e * e
			}
			if len(bestD) == k && d >= bestD[k-1] {
				continue
			}
			// Insert keeping bestD sorted; equal distances keep earlier rows first.
			pos := len(bestD)
			for pos > 0 && bestD[pos-1] > d {
				pos--
			}
			if len(bestD) < k {
				bestD, bestI = append(bestD, 0), append(bestI, 0)
			}
			copy(bestD[pos+1:], bestD[pos:len(bestD)-1])
			copy(bestI[pos+1:], bestI[pos:len(bestI)-1])
			bestD[pos], bestI[pos] = d, i
		}
		var s float64
		for _, i := range bestI {
			s += y[i]
		}
		out[t] = s / float64(len(bestI))
	}
	return out, nil
}
