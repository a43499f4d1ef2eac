package worldmodel

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// FormatVersion is the version of the artefact format. Load refuses other
// versions.
const FormatVersion = 1

// Model is the frozen world model: a linear score on the features, passed
// through the inverse of its link,
//
//	z    = Intercept + Σ_j Weights[j]·(x_j − Center[j]) / Scale[j]
//	r_wm = min(1, exp(z))          (LinkLog)
//	r_wm = 1 / (1 + exp(−z))       (LinkLogit)
//
// where x is m.FeatureSet().Features(card, program). It is a plain value: its JSON form is
// the artefact written by `wmrl worldmodel fit`, sealed by Checksum.
type Model struct {
	Version int `json:"version"`
	// FeatureNames are the names of the features the weights belong to, in
	// order. Load refuses an artefact whose names differ from FeatureNames(),
	// so an artefact never silently meets a different feature layout.
	FeatureNames []string `json:"feature_names"`
	// Features is the feature set the model reads (FeatureSet; "" is
	// FeaturesV1, left out of a v1 artefact so that artefacts written
	// before feature sets existed keep their bytes and checksum).
	Features  FeatureSet `json:"features,omitempty"`
	Center    []float64  `json:"center"`
	Scale     []float64  `json:"scale"`
	Weights   []float64  `json:"weights"`
	Intercept float64    `json:"intercept"`
	// Link maps the linear score to r_wm (see Link).
	Link Link `json:"link"`
	// Fit records how the model was trained (data and regularisation), so
	// the artefact says how to rebuild it.
	Fit FitInfo `json:"fit"`
	// Checksum is the hex sha256 of the artefact's JSON encoding with this
	// field empty.
	Checksum string `json:"checksum"`
}

// FitInfo describes the training run that produced a model.
type FitInfo struct {
	SuiteSeed      uint64  `json:"suite_seed"`
	SuiteHash      string  `json:"suite_hash"`
	SamplesPerTask int     `json:"samples_per_task"`
	Seed           uint64  `json:"seed"`
	Tasks          int     `json:"tasks"`
	Samples        int     `json:"samples"`
	Lambda         float64 `json:"lambda"`
	TargetEps      float64 `json:"target_eps"`
	Link           Link    `json:"link"`
	TrainMSE       float64 `json:"train_mse"`
	TrainSpearman  float64 `json:"train_spearman_within_group"`
	// Base and RunExamples are set on a refreshed model (Refit): the
	// checksum of the frozen model it extends, and how many of a run's
	// own executions were added to the frozen model's training data.
	// Both are left out of a frozen model's artefact.
	Base        string `json:"base,omitempty"`
	RunExamples int    `json:"run_examples,omitempty"`
}

// Options returns the regularisation settings the model was fitted with.
func (f FitInfo) Options() FitOptions {
	return FitOptions{Lambda: f.Lambda, TargetEps: f.TargetEps, Link: f.Link}
}

// Linear returns the model's linear score z, before the inverse link.
// It panics when len(x) differs from the number of weights.
func (m *Model) Linear(x []float64) float64 {
	if len(x) != len(m.Weights) {
		panic(fmt.Sprintf("worldmodel: %d features for a model of %d", len(x), len(m.Weights)))
	}
	z := m.Intercept
	for j, w := range m.Weights {
		z += w * (x[j] - m.Center[j]) / m.Scale[j]
	}
	return z
}

// PredictFeatures returns r_wm in [0, 1] for a feature vector.
func (m *Model) PredictFeatures(x []float64) float64 { return m.Link.inverse(m.Linear(x)) }

// Link is how scores are transformed for the regression and back.
type Link string

const (
	// LinkLogit regresses logit(clamp(y, eps, 1−eps)) and predicts
	// 1/(1+exp(−z)).
	LinkLogit Link = "logit"
	// LinkLog regresses log(max(y, eps)) and predicts min(1, exp(z)): each
	// feature scales the score by a factor.
	LinkLog Link = "log"
)

func (l Link) valid() bool { return l == LinkLogit || l == LinkLog }

// target is the regression target of score y.
func (l Link) target(y, eps float64) float64 {
	if l == LinkLog {
		return math.Log(math.Max(eps, math.Min(1, y)))
	}
	return logit(math.Min(1-eps, math.Max(eps, y)))
}

// inverse maps a linear score to [0, 1].
func (l Link) inverse(z float64) float64 {
	if l == LinkLog {
		return math.Min(1, math.Exp(z))
	}
	return sigmoid(z)
}

func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}

func logit(p float64) float64 { return math.Log(p / (1 - p)) }

// Marshal returns the artefact: the model's indented JSON with its checksum
// filled in. The same model always gives the same bytes.
func (m *Model) Marshal() ([]byte, error) {
	c := *m
	c.Checksum = ""
	body, err := encode(&c)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	c.Checksum = hex.EncodeToString(sum[:])
	return encode(&c)
}

func encode(m *Model) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encode world model: %w", err)
	}
	return buf.Bytes(), nil
}

// Load decodes and checks an artefact: known fields only, the format
// version, the checksum, the feature layout of this build, and finite
// parameters. A corrupted or stale artefact is refused with an error that
// says why.
func Load(data []byte) (*Model, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Model
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("load world model: %w", err)
	}
	if m.Version != FormatVersion {
		return nil, fmt.Errorf("load world model: format version %d, want %d", m.Version, FormatVersion)
	}
	if m.Checksum == "" {
		return nil, errors.New("load world model: no checksum")
	}
	sealed, err := m.Marshal()
	if err != nil {
		return nil, fmt.Errorf("load world model: %w", err)
	}
	var again Model
	if err := json.Unmarshal(sealed, &again); err != nil {
		return nil, fmt.Errorf("load world model: %w", err)
	}
	if again.Checksum != m.Checksum {
		return nil, fmt.Errorf("load world model: checksum mismatch (artefact says %.12s, content hashes to %.12s): the file is corrupted or was edited", m.Checksum, again.Checksum)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("load world model: %w", err)
	}
	return &m, nil
}

// FeatureSet returns the feature set the model reads.
func (m *Model) FeatureSet() FeatureSet {
	if m.Features == "" {
		return FeaturesV1
	}
	return m.Features
}

func (m *Model) validate() error {
	fs, err := ParseFeatureSet(string(m.Features))
	if err != nil {
		return err
	}
	names := fs.Names()
	if !slices.Equal(m.FeatureNames, names) {
		return fmt.Errorf("feature layout differs from this build (%d features in the artefact, %d here); refit with `wmrl worldmodel fit`", len(m.FeatureNames), len(names))
	}
	n := len(names)
	if len(m.Center) != n || len(m.Scale) != n || len(m.Weights) != n {
		return fmt.Errorf("parameter lengths %d/%d/%d, want %d", len(m.Center), len(m.Scale), len(m.Weights), n)
	}
	if !m.Link.valid() {
		return fmt.Errorf("unknown link %q", m.Link)
	}
	if !finite(m.Intercept) {
		return errors.New("intercept is not finite")
	}
	for j := range n {
		if !finite(m.Center[j]) || !finite(m.Weights[j]) || !finite(m.Scale[j]) || m.Scale[j] <= 0 {
			return fmt.Errorf("feature %s: center %v, scale %v, weight %v (want finite, scale > 0)", names[j], m.Center[j], m.Scale[j], m.Weights[j])
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
