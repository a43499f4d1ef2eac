package fusion

// Execution memory (denoise.Config.Memory): a program the run already
// executed on the same task at an earlier step needs no prediction. Its
// real score, an unbiased draw of what executing it again would give (the
// same value when execution is deterministic), stands in for the world
// model's calibrated score wherever Step reads one: the reward of a
// world-model trajectory, an anchor trajectory's d in the denoiser and the
// signal gate, and its control Â under the difference estimator. Anchors
// and world-model groups read the same function of (task, program), so the
// difference estimator's update keeps the anchor control's expectation.

// Execution is one real execution of an earlier step: what Memory keeps.
type Execution struct {
	TaskID  string
	Program string
	Score   float64
}

type memoryKey struct{ task, program string }

// Memory holds the mean real score of each (task, program) of a run's
// earlier executions.
type Memory struct {
	sum map[memoryKey]float64
	n   map[memoryKey]int
}

// NewMemory builds the memory of executions, summed in the order given (so
// the same executions in the same order give bit-identical means).
func NewMemory(executions []Execution) Memory {
	m := Memory{sum: map[memoryKey]float64{}, n: map[memoryKey]int{}}
	for _, e := range executions {
		k := memoryKey{e.TaskID, e.Program}
		m.sum[k] += e.Score
		m.n[k]++
	}
	return m
}

// Len is the number of distinct (task, program) pairs remembered.
func (m Memory) Len() int { return len(m.n) }

// Score returns the mean real score of program on task and whether the
// memory holds it.
func (m Memory) Score(task, program string) (float64, bool) {
	k := memoryKey{task, program}
	n := m.n[k]
	if n == 0 {
		return 0, false
	}
	return m.sum[k] / float64(n), true
}

// Fill sets Known on every trajectory of ts the memory holds and returns
// how many it set.
func (m Memory) Fill(ts []Trajectory) int {
	var hits int
	for i := range ts {
		if v, ok := m.Score(ts[i].TaskID, ts[i].Program); ok {
			ts[i].Known = &v
			hits++
		}
	}
	return hits
}
