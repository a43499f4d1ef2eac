package worldmodel

import (
	"fmt"
	"math"

	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/suite"
)

// Features returns the world model's feature vector for a program on a task
// with data card vector card (suite.Card.Vector). Nothing is executed: the
// features are the card's statistics, the program's choices (model family,
// its hyperparameters on a log scale, the preprocessing steps present) and
// products of the two, plus the feature width the steps produce, computed
// from the program text alone. The vector has len(FeatureNames()) entries,
// in that order, and depends only on its inputs.
//
// It panics when len(card) != suite.VectorLen (a programmer error).
//
// These are the features of FeaturesV1, the stored model's; FeatureSet.Features
// computes those of any set.
func Features(card []float64, p program.Program) []float64 { return FeaturesV1.Features(card, p) }

// FeatureNames names the entries of Features, in order.
func FeatureNames() []string { return FeaturesV1.Names() }

// FeatureSet names a layout of the feature vector. A model records the set
// it was fitted on (Model.Features) and is only ever fed that set's
// vectors.
type FeatureSet string

const (
	// FeaturesV1 is the original layout (numFeatures entries): the card,
	// the program's steps, family and hyperparameters, and a few products
	// of the two. The stored model default.json uses it.
	FeaturesV1 FeatureSet = "v1"
	// FeaturesV2 is FeaturesV1 followed by features of each family's
	// hyperparameters measured against the task's card (see v2.go): the
	// ridge penalty relative to the rows and the noise the card suggests,
	// tree depth against the card's interaction and curvature hints, the
	// boosting budget against rows and noise, and so on. Its stored model
	// is default-v2.json.
	FeaturesV2 FeatureSet = "v2"
)

// FeatureSets lists the feature sets in order.
func FeatureSets() []FeatureSet { return []FeatureSet{FeaturesV1, FeaturesV2} }

// ParseFeatureSet returns the set a name gives: "" and "v1" are
// FeaturesV1, "v2" is FeaturesV2.
func ParseFeatureSet(name string) (FeatureSet, error) {
	switch FeatureSet(name) {
	case "", FeaturesV1:
		return FeaturesV1, nil
	case FeaturesV2:
		return FeaturesV2, nil
	}
	return "", fmt.Errorf("unknown feature set %q: want %s or %s", name, FeaturesV1, FeaturesV2)
}

// Features returns the set's feature vector for a program on a task with
// card vector card (see the package Features). It panics when len(card) !=
// suite.VectorLen or the set is unknown (programmer errors).
func (fs FeatureSet) Features(card []float64, p program.Program) []float64 {
	if len(card) != suite.VectorLen {
		panic(fmt.Sprintf("worldmodel: card vector of length %d, want %d", len(card), suite.VectorLen))
	}
	f := featureVec{vals: make([]float64, 0, numFeatures+numFeaturesV2)}
	f.build(card, p, fs)
	return f.vals
}

// Names names the entries of the set's Features, in order.
func (fs FeatureSet) Names() []string {
	f := featureVec{named: true}
	f.build(make([]float64, suite.VectorLen), program.Program{Model: program.Op{Name: "mean"}}, fs)
	return f.names
}

// numFeatures is len(FeatureNames()); a test keeps them equal.
const numFeatures = 152

// models is the model vocabulary in program order.
var models = [...]string{"mean", "ridge", "logistic", "knn", "gbt", "rff"}

// featureVec collects feature values and, when named, their names.
type featureVec struct {
	named bool
	names []string
	vals  []float64
}

func (f *featureVec) add(name string, v float64) {
	if f.named {
		f.names = append(f.names, name)
	}
	f.vals = append(f.vals, v)
}

// perModel adds value·[model == m] for every model m, named "term*m".
func (f *featureVec) perModel(term string, model string, v float64) {
	for _, m := range models {
		x := 0.0
		if m == model {
			x = v
		}
		if f.named {
			f.names = append(f.names, term+"*"+m)
		}
		f.vals = append(f.vals, x)
	}
}

// Card vector entries used by name (see suite.Card.Vector).
const (
	cardClassification = 0
	cardLogRows        = 1 // log10(train rows) / 4
	cardLogFeatures    = 2 // log2(features) / 6
	cardMaxSkew        = 9
	cardMaxOutlier     = 11
	cardMaxCorr        = 15
	cardTop3Share      = 26
	cardMaxSquareCorr  = 27
	cardMaxPairCorr    = 29
	cardBias           = 31
)

func (f *featureVec) build(card []float64, p program.Program, fs FeatureSet) {
	switch fs {
	case FeaturesV1, FeaturesV2:
	default:
		panic(fmt.Sprintf("worldmodel: unknown feature set %q", fs))
	}
	// The card itself (its constant bias entry left out). These features
	// are constant within a task: they move a task's level, not the order
	// of programs on it.
	for i, v := range card {
		if i == cardBias {
			continue
		}
		if f.named {
			f.names = append(f.names, fmt.Sprint("card.", i))
		}
		f.vals = append(f.vals, v)
	}
	cls := card[cardClassification]
	log10Rows := 4 * card[cardLogRows]
	log2Feat := 6 * card[cardLogFeatures]
	rows := math.Pow(10, log10Rows)
	width := math.Round(math.Exp2(log2Feat))

	// Preprocessing: which steps, their parameters, and the width they
	// leave for the model.
	var nStd, nClip, nLog, nPoly, nSel, nPCA float64
	var clipZ, polyDeg, selRatio, pcaRatio float64
	overflow := 0.0
	stdBeforeModel := 0.0 // the last scale-changing step is a standardise
	for _, s := range p.Steps {
		switch s.Name {
		case "standardize":
			nStd++
			stdBeforeModel = 1
		case "clip":
			nClip++
			clipZ = math.Log2(s.Param("z"))
		case "log1p":
			nLog++
			stdBeforeModel = 0
		case "poly":
			nPoly++
			d := s.Int("degree")
			polyDeg = float64(d)
			width = monomialCount(width, d)
			stdBeforeModel = 0
		case "select":
			nSel++
			k := s.Param("k")
			selRatio = math.Log2(k) - math.Log2(width)
			width = math.Min(width, k)
		case "pca":
			nPCA++
			k := s.Param("k")
			pcaRatio = math.Log2(k) - math.Log2(width)
			width = math.Min(width, k)
			stdBeforeModel = 0
		}
		if width > 1024 || (rows*1.25)*width > 8<<20 {
			overflow = 1
		}
	}
	logWidth := math.Log2(math.Max(1, math.Min(width, 1<<20)))
	f.add("step.standardize", nStd)
	f.add("step.clip", nClip)
	f.add("step.log1p", nLog)
	f.add("step.poly", nPoly)
	f.add("step.select", nSel)
	f.add("step.pca", nPCA)
	f.add("steps", float64(len(p.Steps)))
	f.add("clip.log2_z", clipZ)
	f.add("poly.degree", polyDeg)
	f.add("select.log2_k_over_features", selRatio)
	f.add("pca.log2_k_over_features", pcaRatio)
	f.add("width.log2", logWidth)
	f.add("width.overflow", overflow)
	f.add("log1p*max_skew", nLog*card[cardMaxSkew])
	f.add("clip*max_outlier", nClip*card[cardMaxOutlier])
	f.add("poly*max_pair_corr", nPoly*card[cardMaxPairCorr])
	f.add("poly*max_square_corr", nPoly*card[cardMaxSquareCorr])
	f.add("select*top3_share", nSel*card[cardTop3Share])
	f.add("poly.degree*log2_features", polyDeg*log2Feat)

	// The model: family, family × task, hyperparameters.
	m := p.Model
	f.perModel("model", m.Name, 1)
	f.perModel("classification", m.Name, cls)
	f.perModel("log10_rows", m.Name, log10Rows)
	f.perModel("log2_features", m.Name, log2Feat)
	f.perModel("width.log2", m.Name, logWidth)
	f.perModel("max_square_corr", m.Name, card[cardMaxSquareCorr])
	f.perModel("max_pair_corr", m.Name, card[cardMaxPairCorr])
	f.perModel("max_outlier", m.Name, card[cardMaxOutlier])
	f.perModel("max_corr", m.Name, card[cardMaxCorr])
	f.perModel("standardized", m.Name, stdBeforeModel)
	f.perModel("poly", m.Name, nPoly)
	f.perModel("poly*max_pair_corr", m.Name, nPoly*card[cardMaxPairCorr])
	f.perModel("steps", m.Name, float64(len(p.Steps)))

	var ridgeA, logA, logIt, knnK, knnRel, gbtT, gbtD, gbtLR, gbtCost, rffF, rffG, rffA, rffGW float64
	switch m.Name {
	case "ridge":
		ridgeA = math.Log10(m.Param("alpha") + 1e-4)
	case "logistic":
		logA = math.Log10(m.Param("alpha") + 1e-4)
		logIt = math.Log2(m.Param("iters"))
	case "knn":
		knnK = math.Log2(m.Param("k"))
		knnRel = math.Log10(m.Param("k")) - log10Rows
	case "gbt":
		gbtT = math.Log2(m.Param("trees"))
		gbtD = m.Param("depth")
		gbtLR = math.Log10(m.Param("lr"))
		gbtCost = math.Log10(m.Param("trees")) + gbtD*math.Log10(2) + log10Rows
	case "rff":
		rffF = math.Log2(m.Param("features"))
		rffG = math.Log10(m.Param("gamma"))
		rffA = math.Log10(m.Param("alpha") + 1e-4)
		rffGW = rffG + logWidth*math.Log10(2)
	}
	f.add("ridge.log10_alpha", ridgeA)
	f.add("ridge.log10_alpha^2", ridgeA*ridgeA)
	f.add("logistic.log10_alpha", logA)
	f.add("logistic.log10_alpha^2", logA*logA)
	f.add("logistic.log2_iters", logIt)
	f.add("knn.log2_k", knnK)
	f.add("knn.log2_k^2", knnK*knnK)
	f.add("knn.log10_k_over_rows", knnRel)
	f.add("gbt.log2_trees", gbtT)
	f.add("gbt.depth", gbtD)
	f.add("gbt.depth^2", gbtD*gbtD)
	f.add("gbt.log10_lr", gbtLR)
	f.add("gbt.log10_lr^2", gbtLR*gbtLR)
	f.add("gbt.log2_trees*log10_lr", gbtT*gbtLR)
	f.add("gbt.log10_cost", gbtCost)
	f.add("gbt.depth*max_pair_corr", gbtD*card[cardMaxPairCorr])
	f.add("rff.log2_features", rffF)
	f.add("rff.log2_features_over_rows", boolf(m.Name == "rff")*(rffF-log10Rows*math.Log2(10)))
	f.add("rff.log10_gamma", rffG)
	f.add("rff.log10_gamma^2", rffG*rffG)
	f.add("rff.log10_gamma_times_width", rffGW)
	f.add("rff.log10_gamma_times_width^2", rffGW*rffGW)
	f.add("rff.log10_alpha", rffA)
	f.add("rff.log10_alpha^2", rffA*rffA)
	if fs == FeaturesV2 {
		f.buildV2(card, p, width, stdBeforeModel)
	}
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// monomialCount is the number of products of 1..degree of c features with
// repetition, C(c+degree, degree) − 1: the width poly produces. It saturates
// at 1<<20, far above any size limit.
func monomialCount(c float64, degree int) float64 {
	n := 1.0
	for i := 1; i <= degree; i++ {
		n = n * (c + float64(i)) / float64(i)
	}
	return math.Min(n-1, 1<<20)
}
