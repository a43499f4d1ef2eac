package temporallog

import (
	"testing"

	"go.temporal.io/sdk/log"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestNew(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	l := New(zap.New(core)).(log.WithLogger).With("WorkflowID", "w1")
	l.Info("started", "Attempt", 2, 7, "seven", "dangling")
	l.Error("failed")
	entries := logs.All()
	if len(entries) != 2 || entries[0].Message != "started" || entries[1].Level != zap.ErrorLevel {
		t.Fatalf("entries %+v", entries)
	}
	got := entries[0].ContextMap()
	if got["WorkflowID"] != "w1" || got["Attempt"] != int64(2) || got["7"] != "seven" || got["dangling"] != "(missing)" {
		t.Fatalf("fields %v", got)
	}
}
