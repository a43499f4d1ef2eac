package sandbox

import (
	"context"
	"testing"

	"github.com/wmrl/wmrl/internal/executor"
)

// BenchmarkExecute measures the cost of one execution of a cheap program
// (standardize | ridge on 400 x 8) in process, in the process sandbox and in the Docker
// sandbox: the difference is the sandbox's own overhead per execution.
func BenchmarkExecute(b *testing.B) {
	job := realJob(400, 8, "standardize | ridge alpha=1")
	req, err := NewRequest(job, testLimits())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("inprocess", func(b *testing.B) {
		for b.Loop() {
			if res, err := executor.Run(context.Background(), job); err != nil || res.Status != executor.StatusOK {
				b.Fatalf("%+v, %v", res, err)
			}
		}
	})
	run := func(b *testing.B, sb Sandbox) {
		for b.Loop() {
			if res, err := sb.Execute(context.Background(), req); err != nil || res.Status != executor.StatusOK {
				b.Fatalf("%+v, %v", res, err)
			}
		}
	}
	b.Run("process", func(b *testing.B) {
		p, err := NewProcess(realBinary)
		if err != nil {
			b.Fatal(err)
		}
		run(b, p)
	})
	b.Run("docker", func(b *testing.B) {
		if dockerDown != "" {
			b.Skip(dockerDown)
		}
		d, err := NewDocker(context.Background(), realBinary)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		run(b, d)
	})
}
