package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
)

// Register registers on w what a worker of task queue q serves: on
// QueueControl the workflows, under their stable names; on every queue
// every activity of a, under its stable name (activities.Register). An
// activity runs only where a workflow schedules it; the control worker
// also runs the step's local activities (StartStep, FinishStep).
func Register(w worker.Registry, q string, a *activities.Activities) {
	if q == QueueControl {
		w.RegisterWorkflowWithOptions(TrainingRun, workflow.RegisterOptions{Name: "TrainingRun"})
		w.RegisterWorkflowWithOptions(TrainingStep, workflow.RegisterOptions{Name: "TrainingStep"})
		w.RegisterWorkflowWithOptions(Preflight, workflow.RegisterOptions{Name: "Preflight"})
	}
	activities.Register(w, a)
}
