package pysandbox

import (
	"context"
	"testing"
)

// BenchmarkGrade measures one execution's cost, end to end (staging,
// container create and start, the reader and the solution's execs, the
// submission read out, removal, grading), for three solutions: one that
// only copies the sample submission (the sandbox's own overhead), one that
// also imports numpy, pandas and scikit-learn, and the logistic
// regression of TestGood (a typical solution: start, import, fit).
//
//	go test ./internal/pysandbox -run '^$' -bench Grade -benchtime 5x
func BenchmarkGrade(b *testing.B) {
	e := newTestEnv(b, Options{})
	for _, c := range []struct{ name, source string }{
		{"copy", succeed},
		{"import", "import numpy, pandas, sklearn.linear_model\n" + succeed},
		{"logistic", logistic},
	} {
		b.Run(c.name, func(b *testing.B) {
			var cpu, wall float64
			for b.Loop() {
				r, err := e.sb.Grade(context.Background(), e.a, c.source, testLimits(finishDeadline), 1)
				if err != nil || r.Status != StatusValid {
					b.Fatalf("%+v, %v", r, err)
				}
				cpu += r.Run.CPUSeconds
				wall += r.Run.WallSeconds
			}
			b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
			b.ReportMetric(wall/float64(b.N), "solution-wall-s/op")
		})
	}
}
