// Package pyrender renders a program of the built-in pipeline language
// (package program) as an equivalent Python script on scikit-learn, so that
// the built-in policy can be trained on real Python tasks (package tasks)
// without a language model: its programs run in the Python sandbox as the
// scripts an agent would write.
//
// A rendered script follows the tasks contract (internal/tasks, "Reference
// panel"): it reads /data/task.json (the spec), /data/public/train.csv and
// /data/public/test.csv, and writes /work/submission.csv in the shape of
// sample_submission.csv: labels for a label metric, the positive label's
// probability for roc_auc and log_loss, numbers for a regression. The
// environment variables WMRL_DATA and WMRL_WORK move /data and /work (the
// tests run scripts outside a container).
//
// Columns other than the id and the target become features: numbers as
// they are, other columns one-hot encoded over train and test together,
// missing values filled with the train median. Then the program's steps and
// model, as a scikit-learn pipeline fitted on the train rows:
//
//	standardize   StandardScaler
//	log1p         sign(x)·log1p(|x|)
//	clip z        clamp to median ± z·1.4826·MAD of the train rows
//	poly degree   PolynomialFeatures(degree, no bias column)
//	select k      SelectKBest (f_regression, or f_classif for a classification), k capped at the width
//	pca k         PCA, k capped at the width and the row count
//	mean          DummyRegressor(mean) / DummyClassifier(prior)
//	ridge alpha   Ridge (a regression only: on a classification the script fails, as the engine does)
//	logistic      LogisticRegression(C = 1/alpha, max_iter = iters) (a classification only)
//	knn k         KNeighbors{Regressor,Classifier}, k capped at the train rows
//	gbt           GradientBoosting{Regressor,Classifier}(n_estimators, max_depth, learning_rate)
//	rff           RBFSampler(gamma/width, n_components = features) then Ridge, or
//	              LogisticRegression(C = 1/alpha) for a classification (for its probabilities)
//
// Every random choice is seeded (random_state=0), so a script gives the same
// submission on every run with the same data and library versions.
package pyrender

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/wmrl/wmrl/internal/program"
)

// Render returns the Python script of p; p must be valid.
func Render(p program.Program) (string, error) {
	if err := p.Validate(); err != nil {
		return "", fmt.Errorf("render: %w", err)
	}
	p = p.Normalize()
	var steps []string
	for _, op := range p.Steps {
		s, err := step(op)
		if err != nil {
			return "", err
		}
		steps = append(steps, s)
	}
	model, err := modelOf(p.Model)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# wmrl: the built-in program\n#   %s\n# rendered as Python on scikit-learn (internal/pyrender).\n", p.String())
	b.WriteString(prelude)
	b.WriteString("steps = [\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "    %s,\n", s)
	}
	b.WriteString("]\n")
	fmt.Fprintf(&b, "model = %s\n", model)
	b.WriteString(epilogue)
	return b.String(), nil
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func step(op program.Op) (string, error) {
	switch op.Name {
	case "standardize":
		return "StandardScaler()", nil
	case "log1p":
		return "FunctionTransformer(signed_log1p)", nil
	case "clip":
		return fmt.Sprintf("RobustClip(%s)", num(op.Param("z"))), nil
	case "poly":
		return fmt.Sprintf("PolynomialFeatures(degree=%d, include_bias=False)", op.Int("degree")), nil
	case "select":
		return fmt.Sprintf("CappedSelect(%d, classify)", op.Int("k")), nil
	case "pca":
		return fmt.Sprintf("CappedPCA(%d)", op.Int("k")), nil
	}
	return "", fmt.Errorf("render: unknown step %q", op.Name)
}

func modelOf(op program.Op) (string, error) {
	switch op.Name {
	case "mean":
		return `DummyClassifier(strategy="prior") if classify else DummyRegressor(strategy="mean")`, nil
	case "ridge":
		return fmt.Sprintf(`regression_only("ridge", Ridge(alpha=%s))`, num(op.Param("alpha"))), nil
	case "logistic":
		return fmt.Sprintf(`classification_only("logistic", LogisticRegression(C=1/%s, max_iter=%d))`,
			num(op.Param("alpha")), op.Int("iters")), nil
	case "knn":
		return fmt.Sprintf("CappedKNN(%d, classify)", op.Int("k")), nil
	case "gbt":
		args := fmt.Sprintf("n_estimators=%d, max_depth=%d, learning_rate=%s, random_state=0",
			op.Int("trees"), op.Int("depth"), num(op.Param("lr")))
		return fmt.Sprintf("GradientBoostingClassifier(%s) if classify else GradientBoostingRegressor(%s)", args, args), nil
	case "rff":
		return fmt.Sprintf("RFF(%d, %s, %s, classify)", op.Int("features"), num(op.Param("gamma")), num(op.Param("alpha"))), nil
	}
	return "", fmt.Errorf("render: unknown model %q", op.Name)
}

const prelude = `import json
import os
import sys

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
from sklearn.feature_selection import SelectKBest, f_classif, f_regression
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, PolynomialFeatures, StandardScaler

DATA = os.environ.get("WMRL_DATA", "/data")
WORK = os.environ.get("WMRL_WORK", "/work")

with open(os.path.join(DATA, "task.json")) as f:
    spec = json.load(f)
classify = spec["kind"] == "classification"


def signed_log1p(x):
    return np.sign(x) * np.log1p(np.abs(x))


class RobustClip(BaseEstimator, TransformerMixin):
    def __init__(self, z):
        self.z = z

    def fit(self, x, y=None):
        self.median_ = np.median(x, axis=0)
        self.scale_ = 1.4826 * np.median(np.abs(x - self.median_), axis=0)
        return self

    def transform(self, x):
        lo, hi = self.median_ - self.z * self.scale_, self.median_ + self.z * self.scale_
        keep = self.scale_ == 0
        return np.where(keep, x, np.clip(x, lo, hi))


class CappedSelect(BaseEstimator, TransformerMixin):
    def __init__(self, k, classify):
        self.k, self.classify = k, classify

    def fit(self, x, y):
        score = f_classif if self.classify else f_regression
        self.select_ = SelectKBest(score, k=min(self.k, x.shape[1])).fit(x, y)
        return self

    def transform(self, x):
        return self.select_.transform(x)


class CappedPCA(BaseEstimator, TransformerMixin):
    def __init__(self, k):
        self.k = k

    def fit(self, x, y=None):
        self.pca_ = PCA(n_components=min(self.k, x.shape[1], x.shape[0]), random_state=0).fit(x)
        return self

    def transform(self, x):
        return self.pca_.transform(x)


def CappedKNN(k, classify):
    class KNN(BaseEstimator):
        def fit(self, x, y):
            kk = min(k, len(x))
            self.m_ = (KNeighborsClassifier if classify else KNeighborsRegressor)(n_neighbors=kk).fit(x, y)
            self.classes_ = getattr(self.m_, "classes_", None)
            return self

        def predict(self, x):
            return self.m_.predict(x)

        def predict_proba(self, x):
            return self.m_.predict_proba(x)

    return KNN()


class RFF(BaseEstimator):
    def __init__(self, features, gamma, alpha, classify):
        self.features, self.gamma, self.alpha, self.classify = features, gamma, alpha, classify

    def fit(self, x, y):
        self.map_ = RBFSampler(gamma=self.gamma / max(x.shape[1], 1), n_components=self.features, random_state=0).fit(x)
        z = self.map_.transform(x)
        if self.classify:
            self.m_ = LogisticRegression(C=1 / self.alpha, max_iter=200).fit(z, y)
            self.classes_ = self.m_.classes_
        else:
            self.m_ = Ridge(alpha=self.alpha).fit(z, y)
        return self

    def predict(self, x):
        return self.m_.predict(self.map_.transform(x))

    def predict_proba(self, x):
        return self.m_.predict_proba(self.map_.transform(x))


def regression_only(name, m):
    if classify:
        sys.exit(name + " is a regression model and this is a classification task")
    return m


def classification_only(name, m):
    if not classify:
        sys.exit(name + " is a classification model and this is a regression task")
    return m


train = pd.read_csv(os.path.join(DATA, "public", "train.csv"))
test = pd.read_csv(os.path.join(DATA, "public", "test.csv"))
idc, target = spec["id_column"], spec["target"]
y = train[target].astype(str) if classify else train[target].astype(float)
x_all = pd.concat([train.drop(columns=[idc, target]), test.drop(columns=[idc])], keys=["train", "test"])
x_all = pd.get_dummies(x_all).astype(float)
x_all = x_all.fillna(x_all.loc["train"].median()).fillna(0)
x_train, x_test = x_all.loc["train"].to_numpy(), x_all.loc["test"].to_numpy()

`

const epilogue = `
pipe = make_pipeline(*steps, model)
pipe.fit(x_train, y)
if spec["metric"] in ("roc_auc", "log_loss"):
    classes = [str(c) for c in pipe.classes_]
    positive = spec["labels"][1]
    proba = pipe.predict_proba(x_test)
    pred = proba[:, classes.index(positive)] if positive in classes else np.zeros(len(x_test))
else:
    pred = pipe.predict(x_test)
pd.DataFrame({idc: test[idc], target: pred}).to_csv(os.path.join(WORK, "submission.csv"), index=False)
`
