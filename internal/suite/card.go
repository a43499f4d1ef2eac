package suite

import (
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/gonum/mat"

	"github.com/wmrl/wmrl/internal/tabular"
)

// Card is the data card the agent sees. It is computed from the train split
// only (features and training targets); the hidden test labels never enter
// it.
type Card struct {
	Kind      tabular.Kind     `json:"kind"`
	Metric    string           `json:"metric"`
	TrainRows int              `json:"train_rows"`
	TestRows  int              `json:"test_rows"`
	Features  []FeatureSummary `json:"features"`
	Target    TargetSummary    `json:"target"`
	// MaxSquareCorr is the largest |corr(u_j², y)| over features, u_j the
	// standardised feature: a hint of curvature.
	MaxSquareCorr float64 `json:"max_square_corr"`
	// MeanSquareCorr is the mean of |corr(u_j², y)| over features.
	MeanSquareCorr float64 `json:"mean_square_corr"`
	// MaxPairCorr is the largest |corr(u_a·u_b, y)| over feature pairs
	// a < b: a hint of interactions (0 with a single feature).
	MaxPairCorr float64 `json:"max_pair_corr"`
	// MeanFeatureCorr is the mean |corr(x_a, x_b)| over feature pairs.
	MeanFeatureCorr float64 `json:"mean_feature_corr"`
}

// FeatureSummary describes one feature column of the train split.
type FeatureSummary struct {
	Name string  `json:"name"`
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
	Skew float64 `json:"skew"`
	// OutlierFrac is the share of values more than 5 robust standard
	// deviations (1.4826·MAD) from the median.
	OutlierFrac float64 `json:"outlier_frac"`
	// CorrTarget is the Pearson correlation with the training target.
	CorrTarget float64 `json:"corr_target"`
}

// TargetSummary describes the training target. For classification, Mean is
// the share of positives and PositiveFrac repeats it.
type TargetSummary struct {
	Mean         float64 `json:"mean"`
	Std          float64 `json:"std"`
	Skew         float64 `json:"skew"`
	OutlierFrac  float64 `json:"outlier_frac"`
	PositiveFrac float64 `json:"positive_frac,omitempty"`
}

// NewCard summarises a dataset for the agent, from its train split only.
func NewCard(d *tabular.Dataset) Card {
	n, p := d.XTrain.Dims()
	testRows, _ := d.XTest.Dims()
	y := d.YTrain
	c := Card{
		Kind:      d.Kind,
		Metric:    MetricFor(d.Kind),
		TrainRows: n,
		TestRows:  testRows,
		Features:  make([]FeatureSummary, p),
	}
	ym, ys := meanStd(y)
	c.Target = TargetSummary{Mean: ym, Std: ys, Skew: skew(y), OutlierFrac: outlierFrac(y)}
	if d.Kind == tabular.Classification {
		c.Target.PositiveFrac = ym
	}
	u := make([][]float64, p) // standardised columns (zero for a constant column)
	for j := range p {
		col := mat.Col(nil, j, d.XTrain)
		m, s := meanStd(col)
		c.Features[j] = FeatureSummary{
			Name:        featureName(j),
			Mean:        m,
			Std:         s,
			Skew:        skew(col),
			OutlierFrac: outlierFrac(col),
			CorrTarget:  corr(col, y),
		}
		u[j] = make([]float64, n)
		if s > 0 {
			for i, v := range col {
				u[j][i] = (v - m) / s
			}
		}
	}
	sq := make([]float64, n)
	for j := range p {
		for i, v := range u[j] {
			sq[i] = v * v
		}
		a := math.Abs(corr(sq, y))
		c.MaxSquareCorr = math.Max(c.MaxSquareCorr, a)
		c.MeanSquareCorr += a / float64(p)
	}
	pairs := 0
	for a := range p {
		for b := a + 1; b < p; b++ {
			for i := range sq {
				sq[i] = u[a][i] * u[b][i]
			}
			c.MaxPairCorr = math.Max(c.MaxPairCorr, math.Abs(corr(sq, y)))
			c.MeanFeatureCorr += math.Abs(corr(u[a], u[b]))
			pairs++
		}
	}
	if pairs > 0 {
		c.MeanFeatureCorr /= float64(pairs)
	}
	return c
}

func featureName(j int) string { return "x" + strconv.Itoa(j) }

// VectorLen is the length of Card.Vector, the same for every task.
const VectorLen = 32

// Vector is a fixed-length numeric summary of the card for the policy and
// the world model; every entry is roughly in [-1, 1] (most in [0, 1]).
// Layout (index: meaning):
//
//	0      1 for classification, 0 for regression
//	1      log10(train rows) / 4
//	2      log2(features) / 6
//	3      log10(train rows / features) / 3
//	4      share of positives (classification; 0 for regression)
//	5      class balance 2·min(p, 1−p) (classification; 0 for regression)
//	6      target skew / 5, clipped to [−1, 1] (regression; 0 for classification)
//	7      target outlier share (regression; 0 for classification)
//	8, 9   mean and max over features of min(|skew|, 10) / 10
//	10, 11 mean and max over features of the outlier share
//	12     mean over features of log10(std) / 4, clipped to [−1, 1]
//	13     (max − min) over features of log10(std) / 8, clipped to [0, 1]
//	14, 15 mean and max over features of |corr with target|
//	16–23  the 8 largest |corr with target|, descending, 0-padded
//	24     share of features with |corr with target| > 0.1
//	25     share of features with |corr with target| > 0.3
//	26     share of Σ corr² held by the 3 largest (0 when Σ corr² = 0)
//	27     MaxSquareCorr
//	28     MeanSquareCorr
//	29     MaxPairCorr
//	30     MeanFeatureCorr
//	31     1 (bias)
func (c Card) Vector() []float64 {
	v := make([]float64, VectorLen)
	p := len(c.Features)
	if c.Kind == tabular.Classification {
		v[0] = 1
		v[4] = c.Target.PositiveFrac
		v[5] = 2 * math.Min(c.Target.PositiveFrac, 1-c.Target.PositiveFrac)
	} else {
		v[6] = clip(c.Target.Skew/5, 1)
		v[7] = c.Target.OutlierFrac
	}
	v[1] = math.Log10(float64(max(c.TrainRows, 1))) / 4
	if p == 0 {
		v[31] = 1
		return v
	}
	v[2] = math.Log2(float64(p)) / 6
	v[3] = math.Log10(float64(max(c.TrainRows, 1))/float64(p)) / 3
	abs := make([]float64, p)
	minLS, maxLS := math.Inf(1), math.Inf(-1)
	var sumSq float64
	for j, f := range c.Features {
		s := math.Min(math.Abs(f.Skew), 10) / 10
		v[8] += s / float64(p)
		v[9] = math.Max(v[9], s)
		v[10] += f.OutlierFrac / float64(p)
		v[11] = math.Max(v[11], f.OutlierFrac)
		ls := math.Log10(math.Max(f.Std, 1e-12))
		v[12] += ls / float64(p)
		minLS, maxLS = math.Min(minLS, ls), math.Max(maxLS, ls)
		abs[j] = math.Abs(f.CorrTarget)
		v[14] += abs[j] / float64(p)
		v[15] = math.Max(v[15], abs[j])
		if abs[j] > 0.1 {
			v[24] += 1 / float64(p)
		}
		if abs[j] > 0.3 {
			v[25] += 1 / float64(p)
		}
		sumSq += abs[j] * abs[j]
	}
	v[12] = clip(v[12]/4, 1)
	v[13] = math.Min((maxLS-minLS)/8, 1)
	top := sortedDesc(abs)
	for k := 0; k < 8 && k < p; k++ {
		v[16+k] = top[k]
	}
	if sumSq > 0 {
		var s3 float64
		for k := 0; k < 3 && k < p; k++ {
			s3 += top[k] * top[k]
		}
		v[26] = s3 / sumSq
	}
	v[27] = c.MaxSquareCorr
	v[28] = c.MeanSquareCorr
	v[29] = c.MaxPairCorr
	v[30] = c.MeanFeatureCorr
	v[31] = 1
	return v
}

// skew returns the sample skewness (0 for a constant sample).
func skew(xs []float64) float64 {
	m, s := meanStd(xs)
	if !(s > 0) {
		return 0
	}
	var m3 float64
	for _, v := range xs {
		d := (v - m) / s
		m3 += d * d * d
	}
	return m3 / float64(len(xs))
}

// outlierFrac is the share of values more than 5 robust standard deviations
// from the median; the robust scale is 1.4826·MAD, or the standard
// deviation when the MAD is 0.
func outlierFrac(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := median(s)
	dev := make([]float64, len(xs))
	for i, v := range xs {
		dev[i] = math.Abs(v - med)
	}
	slices.Sort(dev)
	scale := 1.4826 * median(dev)
	if scale == 0 {
		_, scale = meanStd(xs)
	}
	if scale == 0 {
		return 0
	}
	k := 0
	for _, v := range xs {
		if math.Abs(v-med) > 5*scale {
			k++
		}
	}
	return float64(k) / float64(len(xs))
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// corr returns the Pearson correlation of a and b (0 when either is
// constant).
func corr(a, b []float64) float64 {
	ma, sa := meanStd(a)
	mb, sb := meanStd(b)
	if !(sa > 0) || !(sb > 0) {
		return 0
	}
	var c float64
	for i := range a {
		c += (a[i] - ma) * (b[i] - mb)
	}
	return c / (float64(len(a)) * sa * sb)
}
