package builtin

import (
	"fmt"
	"slices"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/program"
)

// feedbackStatuses are the statuses of the feedback's one-hot, in order:
// the ladder's, then ungraded.
var feedbackStatuses = append(executor.Statuses(), backend.StatusUngraded)

// feedbackBuckets is turns.Buckets (the score buckets 0-4).
const feedbackBuckets = 5

// FeedbackDim is the length of the built-in policy's feedback input: the
// bag of the previous program's tokens (a count per vocabulary token,
// divided by the program's length), one-hot its status, one-hot its score
// bucket. A policy of a multi-turn run (policy settings Turns > 1) has a
// card FeedbackDim longer than the task's features: the task's features,
// then the feedback, zero at turn 1.
func FeedbackDim() int { return program.VocabSize() + len(feedbackStatuses) + feedbackBuckets }

// feedbackCard is the input of a multi-turn policy: the task's features,
// then the feedback of prev (zeros when prev is nil: turn 1).
func feedbackCard(features []float64, prev *backend.Previous) ([]float64, error) {
	out := make([]float64, len(features)+FeedbackDim())
	copy(out, features)
	if prev == nil {
		return out, nil
	}
	fb := out[len(features):]
	// A previous text that is no program (its status says so) leaves the
	// bag empty.
	if prog, err := program.Parse(prev.Text); err == nil {
		if tokens, err := program.Encode(prog); err == nil {
			for _, tok := range tokens {
				fb[tok] += 1 / float64(len(tokens))
			}
		}
	}
	at := slices.Index(feedbackStatuses, executor.Status(prev.Status))
	if at < 0 {
		return nil, fmt.Errorf("previous attempt: unknown status %q", prev.Status)
	}
	fb[program.VocabSize()+at] = 1
	if prev.Graded {
		if prev.Bucket < 0 || prev.Bucket >= feedbackBuckets {
			return nil, fmt.Errorf("previous attempt: score bucket %d: want 0-%d", prev.Bucket, feedbackBuckets-1)
		}
		fb[program.VocabSize()+len(feedbackStatuses)+prev.Bucket] = 1
	}
	return out, nil
}

// cardDim is the built-in policy's input length for a task's features
// under the run's settings.
func cardDim(s backend.PolicySettings, features int) int {
	if s.Turns > 1 {
		return features + FeedbackDim()
	}
	return features
}

// FeedbackCard is the input of a multi-turn policy for a task's features
// and the previous attempt (nil at turn 1), as Sample and Update build it;
// the built-in Tinker server (internal/serve/tinkerserve) builds the same
// from a trajectory's tokens.
func FeedbackCard(features []float64, prev *backend.Previous) ([]float64, error) {
	return feedbackCard(features, prev)
}

// CardDim is the built-in policy's input length for a task's features
// under the run's settings: the features, and room for the previous
// attempt when Turns > 1.
func CardDim(s backend.PolicySettings, features int) int { return cardDim(s, features) }
