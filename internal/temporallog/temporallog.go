// Package temporallog bridges zap into the Temporal SDK's logger, so the
// SDK's own messages (pollers, retries, workflow and activity loggers) go to
// a wmrl process's log with the same format and level.
package temporallog

import (
	"fmt"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
)

// zapLogger adapts a zap logger to the Temporal SDK's log.Logger.
type zapLogger struct {
	z *zap.SugaredLogger
}

var (
	_ log.Logger     = zapLogger{}
	_ log.WithLogger = zapLogger{}
)

// New returns z as a Temporal SDK logger.
func New(z *zap.Logger) log.Logger {
	// Skip the adapter's own frame so that the caller is the SDK's.
	return zapLogger{z: z.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

func (l zapLogger) Debug(msg string, keyvals ...any) { l.z.Debugw(msg, pairs(keyvals)...) }
func (l zapLogger) Info(msg string, keyvals ...any)  { l.z.Infow(msg, pairs(keyvals)...) }
func (l zapLogger) Warn(msg string, keyvals ...any)  { l.z.Warnw(msg, pairs(keyvals)...) }
func (l zapLogger) Error(msg string, keyvals ...any) { l.z.Errorw(msg, pairs(keyvals)...) }

// With returns a logger that adds keyvals to every message.
func (l zapLogger) With(keyvals ...any) log.Logger {
	return zapLogger{z: l.z.With(pairs(keyvals)...)}
}

// pairs makes the SDK's alternating key/value list safe for zap: keys that
// are not strings are formatted, and a trailing key without a value gets
// one, instead of zap's "ignored key" error.
func pairs(keyvals []any) []any {
	out := make([]any, 0, len(keyvals)+1)
	for i := 0; i < len(keyvals); i += 2 {
		k, ok := keyvals[i].(string)
		if !ok {
			k = fmt.Sprint(keyvals[i])
		}
		var v any = "(missing)"
		if i+1 < len(keyvals) {
			v = keyvals[i+1]
		}
		out = append(out, k, v)
	}
	return out
}
