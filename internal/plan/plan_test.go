package plan

import "testing"

// TestPinned pins known values, computed by the code these functions were
// moved from (activities). If this test fails, every existing run would
// choose different tasks, executions, initial policies or evaluation
// programs on resume: do not update the values unless that is intended.
func TestPinned(t *testing.T) {
	tests := []struct {
		name      string
		got, want uint64
	}{
		{"TaskIndex(1, 0, 0, 48)", uint64(TaskIndex(1, 0, 0, 48)), 15},
		{"TaskIndex(7, 3, 5, 48)", uint64(TaskIndex(7, 3, 5, 48)), 36},
		{"TaskIndex(42, 9, 2, 4)", uint64(TaskIndex(42, 9, 2, 4)), 1},
		{"ExecSeed(1, 0, 0, 0)", ExecSeed(1, 0, 0, 0), 0xba3a309af9b1df7b},
		{"ExecSeed(7, 3, 5, 2)", ExecSeed(7, 3, 5, 2), 0x68a12db31850d149},
		{"InitSeed(1)", InitSeed(1), 0x13ed24f1f5115407},
		{"InitSeed(7)", InitSeed(7), 0x35bae0b707f7dbac},
		{"EvalSampleSeed(3, 2, held-000, 5)", EvalSampleSeed(3, 2, "held-000", 5), 0xd00d88c979529d2d},
		{"EvalExecSeed(3, 2, held-000, 5)", EvalExecSeed(3, 2, "held-000", 5), 0xb22aa58c34df3d48},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %#x, want %#x", tt.name, tt.got, tt.want)
		}
	}
}

func TestTaskIndexInRange(t *testing.T) {
	for _, tasks := range []int{1, 2, 7, 48} {
		seen := make([]bool, tasks)
		for s := range 20 {
			for g := range 8 {
				i := TaskIndex(5, s, g, tasks)
				if i < 0 || i >= tasks {
					t.Fatalf("TaskIndex(5, %d, %d, %d) = %d", s, g, tasks, i)
				}
				seen[i] = true
			}
		}
		for i, ok := range seen {
			if !ok {
				t.Errorf("%d tasks: task %d never chosen in 160 groups", tasks, i)
			}
		}
	}
}

// TestTurnSeeds: turn 1 of a multi-turn trajectory draws with the
// single-shot seeds; later turns with seeds of their own.
func TestTurnSeeds(t *testing.T) {
	if TurnSampleSeed(7, 2, 3, 4, 1) != SampleSeed(7, 2, 3, 4) || TurnExecSeed(7, 2, 3, 4, 1) != ExecSeed(7, 2, 3, 4) {
		t.Error("turn 1's seeds are not the single-shot ones")
	}
	seen := map[uint64]bool{}
	for turn := 1; turn <= 5; turn++ {
		for _, s := range []uint64{TurnSampleSeed(7, 2, 3, 4, turn), TurnExecSeed(7, 2, 3, 4, turn)} {
			if seen[s] {
				t.Errorf("turn %d: seed %d used twice", turn, s)
			}
			seen[s] = true
		}
	}
}

func TestEvalTurnSeeds(t *testing.T) {
	if EvalTurnSampleSeed(7, 2, "t-1", 4, 1) != EvalSampleSeed(7, 2, "t-1", 4) ||
		EvalTurnExecSeed(7, 2, "t-1", 4, 1) != EvalExecSeed(7, 2, "t-1", 4) {
		t.Error("attempt 1's seeds are not the single-shot evaluation's")
	}
	seen := map[uint64]bool{}
	for i := range 3 {
		for turn := 1; turn <= 5; turn++ {
			for _, s := range []uint64{EvalTurnSampleSeed(7, 2, "t-1", i, turn), EvalTurnExecSeed(7, 2, "t-1", i, turn)} {
				if seen[s] {
					t.Errorf("sample %d attempt %d: seed %d used twice", i, turn, s)
				}
				seen[s] = true
			}
		}
	}
	if EvalTurnSampleSeed(7, 2, "t-1", 0, 2) == EvalTurnSampleSeed(7, 3, "t-1", 0, 2) {
		t.Error("attempt 2's seed does not depend on the checkpoint version")
	}
}
