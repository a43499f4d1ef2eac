package main

import (
	"math"
	"testing"

	"github.com/wmrl/wmrl/internal/grpoloop"
)

func TestMeanSD(t *testing.T) {
	tests := []struct {
		name          string
		give          []float64
		wantM, wantSD float64
	}{
		{"empty", nil, 0, 0},
		{"one", []float64{0.5}, 0.5, 0},
		{"two", []float64{1, 3}, 2, math.Sqrt(2)},
		{"three", []float64{0.58, 0.66, 0.50}, 0.58, 0.08},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, sd := MeanSD(tt.give)
			if math.Abs(m-tt.wantM) > 1e-12 || math.Abs(sd-tt.wantSD) > 1e-12 {
				t.Errorf("MeanSD(%v) = %v, %v; want %v, %v", tt.give, m, sd, tt.wantM, tt.wantSD)
			}
		})
	}
}

func TestFamilies(t *testing.T) {
	tests := []struct {
		name     string
		give     []string
		wantN    int
		wantName string
		wantTop  float64
		wantFail bool
	}{
		{"none", nil, 0, "", 0, false},
		{"one family", []string{"logistic", "standardize | logistic alpha=0.1"}, 1, "logistic", 1, false},
		{"two families", []string{"logistic", "knn", "standardize | knn k=3"}, 2, "knn", 2.0 / 3, false},
		{"unparsable", []string{"not a program ("}, 0, "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, name, top, err := Families(tt.give)
			if (err != nil) != tt.wantFail {
				t.Fatalf("Families(%q) error %v, want failure %v", tt.give, err, tt.wantFail)
			}
			if err == nil && (n != tt.wantN || name != tt.wantName || math.Abs(top-tt.wantTop) > 1e-12) {
				t.Errorf("Families(%q) = %d, %q, %v; want %d, %q, %v", tt.give, n, name, top, tt.wantN, tt.wantName, tt.wantTop)
			}
		})
	}
}

func TestSummarise(t *testing.T) {
	res := grpoloop.StepResult{Step: 4, MeanScore: 0.6, Trajectories: []grpoloop.Trajectory{
		{Program: "logistic", LogProb: -2},
		{Program: "logistic", LogProb: -2},
		{Program: "knn", LogProb: -5},
	}}
	ss, err := Summarise(res)
	if err != nil {
		t.Fatal(err)
	}
	if ss.Step != 4 || ss.Distinct != 2 || ss.Families != 2 || math.Abs(ss.Entropy-3) > 1e-12 || ss.TopFamily != "logistic" || math.Abs(ss.TopShare-2.0/3) > 1e-12 {
		t.Errorf("Summarise = %+v, want step 4, 2 distinct, 2 families, entropy 3, top logistic with share 2/3", ss)
	}
}

func TestMode(t *testing.T) {
	tests := []struct {
		name      string
		give      []string
		want      string
		wantShare float64
	}{
		{"none", nil, "", 0},
		{"one", []string{"knn"}, "knn", 1},
		{"majority", []string{"knn", "gbt", "gbt", "mean"}, "gbt", 0.5},
		{"tie keeps the first to reach it", []string{"knn", "gbt", "gbt", "knn"}, "gbt", 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, share := Mode(tt.give)
			if got != tt.want || math.Abs(share-tt.wantShare) > 1e-12 {
				t.Errorf("Mode(%q) = %q, %v; want %q, %v", tt.give, got, share, tt.want, tt.wantShare)
			}
		})
	}
}
