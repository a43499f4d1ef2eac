// Package budget refuses programs by their estimated cost, so that a
// program's score never depends on the machine's speed or load.
//
// A wall-clock deadline kill would make a score depend on timing, so before
// a program runs its work is estimated with tabular.EstimateCost on the
// task's sizes; a program whose estimate exceeds the run's budget is scored
// as a timeout (Refusal) without running, the same way on every machine.
// The per-execution deadline (DefaultDeadlineSeconds) is only a safety net,
// set well above what DefaultBudget admits.
package budget
