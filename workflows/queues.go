package workflows

import (
	"fmt"
	"strings"
)

// Task queues. Workflows and the control activities run on QueueControl;
// each other queue holds one kind of work, so that sandbox and GPU workers
// can run on other machines (`wmrl-worker --queues sandbox`).
const (
	QueueControl    = "wmrl-control"
	QueueRollout    = "wmrl-rollout"
	QueueWorldModel = "wmrl-worldmodel"
	QueueSandbox    = "wmrl-sandbox"
	QueueGPU        = "wmrl-gpu"
)

// QueueNames returns the short names of the queues (as --queues takes them)
// in a fixed order.
func QueueNames() []string {
	return []string{"control", "rollout", "worldmodel", "sandbox", "gpu"}
}

// Queue returns the task queue of a short name.
func Queue(name string) (string, error) {
	switch name {
	case "control":
		return QueueControl, nil
	case "rollout":
		return QueueRollout, nil
	case "worldmodel":
		return QueueWorldModel, nil
	case "sandbox":
		return QueueSandbox, nil
	case "gpu":
		return QueueGPU, nil
	}
	return "", fmt.Errorf("unknown queue %q: valid queues are %s", name, strings.Join(QueueNames(), ", "))
}
