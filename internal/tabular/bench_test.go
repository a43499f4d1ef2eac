package tabular

import (
	"context"
	"testing"

	"github.com/wmrl/wmrl/internal/program"
)

// BenchmarkFitPredict measures one execution per model family, with its
// default parameters after standardization, on a mid-size task: 1000 train
// rows, 250 test rows, 16 features.
func BenchmarkFitPredict(b *testing.B) {
	reg := synth(20, Regression, 1000, 250, 16, 0.3, wavyF)
	cls := synth(21, Classification, 1000, 250, 16, 0.3, wavyF)
	for _, fam := range program.Models() {
		d := reg
		if fam == "logistic" {
			d = cls
		}
		p, err := program.Parse("standardize | " + fam)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fam, func(b *testing.B) {
			for b.Loop() {
				if _, err := FitPredict(context.Background(), p, d, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGBTSize shows the cost of gradient boosting growing with
// trees × depth.
func BenchmarkGBTSize(b *testing.B) {
	d := synth(22, Regression, 1000, 250, 16, 0.3, wavyF)
	for _, text := range []string{"gbt trees=25 depth=2", "gbt trees=100 depth=3", "gbt trees=400 depth=6"} {
		p, err := program.Parse(text)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(text, func(b *testing.B) {
			for b.Loop() {
				if _, err := FitPredict(context.Background(), p, d, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
