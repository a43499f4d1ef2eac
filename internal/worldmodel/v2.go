package worldmodel

import (
	"math"

	"github.com/wmrl/wmrl/internal/program"
)

// numFeaturesV2 is how many features FeaturesV2 adds to FeaturesV1; a test
// keeps it equal to len(FeaturesV2.Names()) − numFeatures.
const numFeaturesV2 = 57

// More card vector entries (see suite.Card.Vector).
const (
	cardLogRowsPerFeature = 3  // log10(train rows / features) / 3
	cardMeanLogStd        = 12 // mean over features of log10(std) / 4
	cardLogStdRange       = 13 // (max − min) over features of log10(std) / 8
	cardTopCorr           = 16 // 16..23: the 8 largest |corr with target|
	cardShareCorr01       = 24 // share of features with |corr with target| > 0.1
)

// buildV2 adds the features of FeaturesV2: each family's hyperparameters
// made relative to what the card says about the task, so that a linear
// model can place a hyperparameter's optimum where the task needs it (an
// optimum at h* = a + b·c shows as the terms h, h² and h·c). Every family
// term is 0 for programs of another family. width is the feature width the
// steps leave for the model (before clamping) and std whether the last
// scale-changing step is a standardise.
//
// The engine (internal/tabular) is what the terms follow:
//
//   - ridge, and rff's ridge on its random features, minimise
//     ‖y − Xw‖² + α‖w‖², so the penalty that matters is α against XᵀX's
//     diagonal, rows × feature variance (1 after standardize, the card's
//     mean feature scale otherwise; rff's features have variance 1/F);
//   - logistic's Hessian grows with rows as ridge's Gram matrix does, and
//     a few Newton iterations suffice only for a strong enough penalty;
//   - gbt: lr × trees is the boosting budget, 2^depth leaves of at least 3
//     rows each; deep trees fit interactions and curvature, shallow
//     ones do not;
//   - knn averages k neighbours: large k smooths noise away and blurs
//     curvature, and Euclidean distance on unscaled features of uneven
//     scale is dominated by the widest;
//   - rff's kernel width is γ / inputs, which assumes standardised inputs.
//
// The card's noise proxy is 1 − min(1, Σ of the 8 largest squared
// correlations with the target): how much of the target a linear fit on
// the strongest features leaves unexplained.
func (f *featureVec) buildV2(card []float64, p program.Program, width float64, std float64) {
	log10Rows := 4 * card[cardLogRows]
	log2Rows := log10Rows * math.Log2(10)
	var signal float64
	for k := cardTopCorr; k < cardTopCorr+8; k++ {
		signal += card[k] * card[k]
	}
	noise := 1 - math.Min(1, signal)
	curv := card[cardMaxSquareCorr]
	inter := card[cardMaxPairCorr]
	nonlin := math.Max(curv, inter)
	rowsPerFeat := 3 * card[cardLogRowsPerFeature]
	features := math.Round(math.Exp2(6 * card[cardLogFeatures]))
	log2Informative := math.Log2(math.Max(1, card[cardShareCorr01]*features))
	// log10 of the model's input scale: 0 after a standardise, else the
	// card's mean feature scale.
	scale := (1 - std) * 4 * card[cardMeanLogStd]
	unscaledRange := (1 - std) * 8 * card[cardLogStdRange]
	logWidth := math.Log2(math.Max(1, math.Min(width, 1<<20)))
	widthOverRows := logWidth - log2Rows

	// Preprocessing against the card.
	var polyDeg, selK, pcaK, clipZ, hasSel, hasPCA, hasClip float64
	for _, s := range p.Steps {
		switch s.Name {
		case "poly":
			polyDeg += float64(s.Int("degree"))
		case "select":
			selK, hasSel = math.Log2(s.Param("k"))-log2Informative, 1
		case "pca":
			pcaK, hasPCA = math.Log2(s.Param("k"))-log2Informative, 1
		case "clip":
			clipZ, hasClip = math.Log2(s.Param("z")), 1
		}
	}
	f.add("v2.width_over_rows", widthOverRows)
	f.add("v2.width_over_rows^2", widthOverRows*widthOverRows)
	f.add("v2.poly.degree*max_square_corr", polyDeg*curv)
	f.add("v2.poly.degree*max_pair_corr", polyDeg*inter)
	f.add("v2.poly.degree*noise", polyDeg*noise)
	f.add("v2.select.log2_k_over_informative", selK)
	f.add("v2.select.log2_k_over_informative^2", selK*selK)
	f.add("v2.select", hasSel)
	f.add("v2.pca.log2_k_over_informative", pcaK)
	f.add("v2.pca.log2_k_over_informative^2", pcaK*pcaK)
	f.add("v2.pca", hasPCA)
	f.add("v2.clip.log2_z*max_outlier", hasClip*clipZ*card[cardMaxOutlier])
	f.add("v2.clip.log2_z^2", hasClip*clipZ*clipZ)
	f.perModel("v2.width_over_rows", p.Model.Name, widthOverRows)
	f.perModel("v2.noise", p.Model.Name, noise)

	m := p.Model
	var (
		ridgeE, logE, logIt                       float64
		knnK, knnRel, knnUnscaled                 float64
		gbtBudget, gbtD, gbtLeafRows, gbtLR, isGB float64
		rffE, rffRel, rffG                        float64
	)
	switch m.Name {
	case "ridge":
		ridgeE = math.Log10(m.Param("alpha")+1e-4) - log10Rows - 2*scale
	case "logistic":
		logE = math.Log10(m.Param("alpha")+1e-4) - log10Rows - 2*scale
		logIt = math.Log2(m.Param("iters"))
	case "knn":
		knnK = math.Log2(m.Param("k"))
		knnRel = math.Log10(m.Param("k")) - log10Rows
		knnUnscaled = unscaledRange
	case "gbt":
		isGB = 1
		gbtLR = math.Log10(m.Param("lr"))
		gbtBudget = math.Log10(m.Param("trees")) + gbtLR
		gbtD = m.Param("depth")
		gbtLeafRows = log2Rows - gbtD
	case "rff":
		rffE = math.Log10(m.Param("alpha")+1e-4) + math.Log10(m.Param("features")) - log10Rows
		rffRel = math.Log2(m.Param("features")) - log2Rows
		rffG = math.Log10(m.Param("gamma"))
	}
	f.add("v2.ridge.log10_alpha_eff", ridgeE)
	f.add("v2.ridge.log10_alpha_eff^2", ridgeE*ridgeE)
	f.add("v2.ridge.log10_alpha_eff*noise", ridgeE*noise)
	f.add("v2.ridge.log10_alpha_eff*width_over_rows", ridgeE*widthOverRows)
	f.add("v2.ridge.log10_alpha_eff*log10_rows_per_feature", ridgeE*rowsPerFeat)
	f.add("v2.logistic.log10_alpha_eff", logE)
	f.add("v2.logistic.log10_alpha_eff^2", logE*logE)
	f.add("v2.logistic.log10_alpha_eff*noise", logE*noise)
	f.add("v2.logistic.log10_alpha_eff*width_over_rows", logE*widthOverRows)
	f.add("v2.logistic.log2_iters*log10_alpha_eff", logIt*logE)
	f.add("v2.knn.log10_k_over_rows^2", knnRel*knnRel)
	f.add("v2.knn.log2_k*noise", knnK*noise)
	f.add("v2.knn.log2_k*nonlinearity", knnK*nonlin)
	f.add("v2.knn.log2_k*log2_width", knnK*logWidth)
	f.add("v2.knn.unscaled_log10_std_range", knnUnscaled)
	f.add("v2.gbt.log10_budget", gbtBudget)
	f.add("v2.gbt.log10_budget^2", gbtBudget*gbtBudget)
	f.add("v2.gbt.log10_budget*noise", gbtBudget*noise)
	f.add("v2.gbt.log10_budget*log10_rows", gbtBudget*log10Rows)
	f.add("v2.gbt.log10_budget*depth", gbtBudget*gbtD)
	f.add("v2.gbt.depth*max_square_corr", gbtD*curv)
	f.add("v2.gbt.depth*noise", gbtD*noise)
	f.add("v2.gbt.log2_rows_per_leaf", isGB*gbtLeafRows)
	f.add("v2.gbt.log2_rows_per_leaf^2", isGB*gbtLeafRows*gbtLeafRows)
	f.add("v2.gbt.log10_lr*noise", gbtLR*noise)
	f.add("v2.rff.log10_alpha_eff", rffE)
	f.add("v2.rff.log10_alpha_eff^2", rffE*rffE)
	f.add("v2.rff.log10_alpha_eff*noise", rffE*noise)
	f.add("v2.rff.log2_features_over_rows^2", rffRel*rffRel)
	f.add("v2.rff.log10_gamma*nonlinearity", rffG*nonlin)
	f.add("v2.rff.log10_gamma*noise", rffG*noise)
	f.add("v2.rff.log10_gamma*unscaled", rffG*(1-std))
}
