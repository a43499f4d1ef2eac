package tabular

import (
	"cmp"
	"context"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// Gradient boosting settings that are not program parameters.
const (
	gbtLambda  = 1.0 // L2 penalty on leaf values
	gbtMinLeaf = 3   // fewest train rows in a leaf
	gbtMinGain = 1e-9
)

type treeNode struct {
	feat        int // -1 for a leaf
	thr         float64
	left, right int
	value       float64
}

type tree []treeNode

func (t tree) predict(row []float64) float64 {
	n := 0
	for t[n].feat >= 0 {
		if row[t[n].feat] <= t[n].thr {
			n = t[n].left
		} else {
			n = t[n].right
		}
	}
	return t[n].value
}

// gbtPredict fits gradient-boosted regression trees (squared loss for
// regression, log-loss with Newton leaves for classification) and predicts
// the test rows; classification predictions are probabilities of class 1.
func gbtPredict(ctx context.Context, xtr *mat.Dense, y []float64, xte *mat.Dense, classify bool, trees, depth int, lr float64) ([]float64, error) {
	n, c := xtr.Dims()
	cols := make([][]float64, c)
	sorted := make([][]int, c)
	for j := 0; j < c; j++ {
		cols[j] = mat.Col(nil, j, xtr)
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		col := cols[j]
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(col[a], col[b]) })
		sorted[j] = idx
	}
	var base float64
	for _, v := range y {
		base += v
	}
	base /= float64(n)
	if classify {
		p := math.Min(math.Max(base, 1e-6), 1-1e-6)
		base = math.Log(p / (1 - p))
	}
	f := make([]float64, n)
	for i := range f {
		f[i] = base
	}
	g, h := make([]float64, n), make([]float64, n)
	leafOf := make([]int, n)
	forest := make([]tree, 0, trees)
	for t := 0; t < trees; t++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i := range f {
			if classify {
				p := sigmoid(f[i])
				g[i], h[i] = p-y[i], p*(1-p)
			} else {
				g[i], h[i] = f[i]-y[i], 1
			}
		}
		tr := growTree(cols, sorted, g, h, depth, lr, leafOf)
		for i := range f {
			f[i] += tr[leafOf[i]].value
		}
		forest = append(forest, tr)
	}
	nte, _ := xte.Dims()
	out := make([]float64, nte)
	for i := 0; i < nte; i++ {
		row := xte.RawRowView(i)
		s := base
		for _, tr := range forest {
			s += tr.predict(row)
		}
		if classify {
			s = sigmoid(s)
		}
		out[i] = s
	}
	return out, nil
}

// growTree grows one tree level by level to the given depth on gradients g
// and Hessians h. For every level it scans each feature once in sorted order,
// finding the best threshold of every open node at the same time. Leaf
// values are Newton steps −lr·G/(H+λ). On return leafOf holds each train
// row's leaf.
func growTree(cols [][]float64, sorted [][]int, g, h []float64, depth int, lr float64, leafOf []int) tree {
	n := len(g)
	clear(leafOf)
	t := tree{{feat: -1}}
	open := []int{0}
	for level := 0; level < depth && len(open) > 0; level++ {
		m := len(t)
		gs, hs, cnt := nodeSums(m, leafOf, g, h)
		isOpen := make([]bool, m)
		for _, nd := range open {
			isOpen[nd] = true
		}
		bestGain, bestFeat, bestThr := make([]float64, m), make([]int, m), make([]float64, m)
		for nd := range bestFeat {
			bestGain[nd], bestFeat[nd] = gbtMinGain, -1
		}
		gl, hl, cl, last := make([]float64, m), make([]float64, m), make([]int, m), make([]float64, m)
		for j, col := range cols {
			clear(gl)
			clear(hl)
			clear(cl)
			for _, i := range sorted[j] {
				nd := leafOf[i]
				if !isOpen[nd] {
					continue
				}
				x := col[i]
				if cl[nd] >= gbtMinLeaf && cnt[nd]-cl[nd] >= gbtMinLeaf && x > last[nd] {
					gr, hr := gs[nd]-gl[nd], hs[nd]-hl[nd]
					gain := gl[nd]*gl[nd]/(hl[nd]+gbtLambda) + gr*gr/(hr+gbtLambda) - gs[nd]*gs[nd]/(hs[nd]+gbtLambda)
					if gain > bestGain[nd] {
						thr := last[nd] + (x-last[nd])/2
						if thr >= x {
							thr = last[nd]
						}
						bestGain[nd], bestFeat[nd], bestThr[nd] = gain, j, thr
					}
				}
				gl[nd] += g[i]
				hl[nd] += h[i]
				cl[nd]++
				last[nd] = x
			}
		}
		var next []int
		for _, nd := range open {
			if bestFeat[nd] < 0 {
				continue
			}
			l := len(t)
			t = append(t, treeNode{feat: -1}, treeNode{feat: -1})
			t[nd].feat, t[nd].thr, t[nd].left, t[nd].right = bestFeat[nd], bestThr[nd], l, l+1
			next = append(next, l, l+1)
		}
		for i := 0; i < n; i++ {
			nd := leafOf[i]
			if t[nd].feat < 0 {
				continue
			}
			if cols[t[nd].feat][i] <= t[nd].thr {
				leafOf[i] = t[nd].left
			} else {
				leafOf[i] = t[nd].right
			}
		}
		open = next
	}
	gs, hs, _ := nodeSums(len(t), leafOf, g, h)
	for nd := range t {
		if t[nd].feat < 0 {
			t[nd].value = -lr * gs[nd] / (hs[nd] + gbtLambda)
		}
	}
	return t
}

func nodeSums(m int, leafOf []int, g, h []float64) (gs, hs []float64, cnt []int) {
	gs, hs, cnt = make([]float64, m), make([]float64, m), make([]int, m)
	for i, nd := range leafOf {
		gs[nd] += g[i]
		hs[nd] += h[i]
		cnt[nd]++
	}
	return gs, hs, cnt
}
