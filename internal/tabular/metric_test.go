package tabular

import (
	"errors"
	"math"
	"testing"
)

func TestMetric(t *testing.T) {
	tests := []struct {
		name string
		kind Kind
		y    []float64
		pred []float64
		want float64
	}{
		{"auc perfect", Classification, []float64{0, 0, 1, 1}, []float64{0.1, 0.2, 0.3, 0.4}, 1},
		{"auc reversed", Classification, []float64{0, 0, 1, 1}, []float64{0.4, 0.3, 0.2, 0.1}, 0},
		{"auc one swap", Classification, []float64{0, 0, 1, 1}, []float64{0.1, 0.4, 0.35, 0.8}, 0.75},
		{"auc all tied", Classification, []float64{0, 1, 0, 1, 1}, []float64{3, 3, 3, 3, 3}, 0.5},
		{"auc partial tie", Classification, []float64{0, 1, 0, 1}, []float64{0.2, 0.5, 0.5, 0.9}, 0.875},
		{"r2 perfect", Regression, []float64{1, 2, 3}, []float64{1, 2, 3}, 1},
		{"r2 half", Regression, []float64{1, 2, 3}, []float64{1, 2, 4}, 0.5},
		{"r2 mean", Regression, []float64{1, 2, 3}, []float64{2, 2, 2}, 0},
		{"r2 negative", Regression, []float64{1, 2, 3}, []float64{3, 2, 1}, -3},
	}
	for _, tt := range tests {
		got, err := Metric(tt.kind, tt.y, tt.pred)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: Metric = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMetricErrors(t *testing.T) {
	tests := []struct {
		name string
		kind Kind
		y    []float64
		pred []float64
	}{
		{"length", Regression, []float64{1, 2}, []float64{1}},
		{"empty", Regression, nil, nil},
		{"constant", Regression, []float64{2, 2}, []float64{1, 2}},
		{"one class", Classification, []float64{1, 1}, []float64{0.1, 0.2}},
		{"bad label", Classification, []float64{0, 2}, []float64{0.1, 0.2}},
		{"kind", "ranking", []float64{0, 1}, []float64{0.1, 0.2}},
	}
	for _, tt := range tests {
		if _, err := Metric(tt.kind, tt.y, tt.pred); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := Metric(Regression, []float64{1, 2}, []float64{1, v}); !errors.Is(err, ErrNonFinite) {
			t.Errorf("prediction %v: error %v, want ErrNonFinite", v, err)
		}
	}
}
