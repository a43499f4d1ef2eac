package suite

import (
	"fmt"
	"math"

	"github.com/wmrl/wmrl/internal/tabular"
)

// question phrases a task's research question. The wording depends on the
// family and on the seeded choice of one of two phrasings, and names the
// sizes and the metric, so the agent knows what is asked and how it is
// judged.
func question(r *rng, c combo, trainRows, features int, info genInfo) string {
	target := "the numeric target y"
	if c.kind == tabular.Classification {
		target = "the binary label y"
	}
	var q string
	alt := r.intn(2) == 1
	switch c.family {
	case Linear:
		q = fmt.Sprintf("Which pipeline best predicts %s from %d numeric features, given %d training rows?", target, features, trainRows)
		if alt {
			q = fmt.Sprintf("How well can %s be predicted from %d features of very different scales, and by which pipeline?", target, features)
		}
	case Sparse:
		q = fmt.Sprintf("Which pipeline best predicts %s from %d features where only a few matter?", target, features)
		if alt {
			q = fmt.Sprintf("Only a handful of %d features drive %s: which pipeline finds them and predicts best?", features, target)
		}
	case Interactions:
		q = fmt.Sprintf("Which pipeline best predicts %s when pairs of its %d features act together rather than alone?", target, features)
		if alt {
			q = fmt.Sprintf("%s depends on products of features, not on single features: which pipeline models that best from %d features?", capitalize(target), features)
		}
	case Nonlinear:
		q = fmt.Sprintf("Which pipeline best models a non-linear relation between %d features and %s?", features, target)
		if alt {
			q = fmt.Sprintf("%s bends, saturates and jumps with some of its %d features: which pipeline predicts it best?", capitalize(target), features)
		}
	case Outliers:
		q = fmt.Sprintf("Which pipeline predicts %s most reliably when some feature values are extreme outliers?", target)
		if c.kind == tabular.Regression {
			q = fmt.Sprintf("Which pipeline predicts %s most reliably when some feature values and some training targets are gross errors?", target)
		}
		if alt {
			q = fmt.Sprintf("The %d training rows contain extreme values in several of %d features: which pipeline is robust to them and predicts %s best?", trainRows, features, target)
		}
	case Imbalance:
		pct := int(math.Round(100 * info.prevalence))
		q = fmt.Sprintf("Which pipeline best ranks the rare positive class (about %d%% of rows) from %d features?", pct, features)
		if alt {
			q = fmt.Sprintf("Positives are rare (about %d%%): which pipeline separates them best from %d features?", pct, features)
		}
	case Irrelevant:
		q = fmt.Sprintf("Which pipeline best predicts %s from %d features, most of which are pure noise?", target, features)
		if alt {
			q = fmt.Sprintf("About %d of %d features carry signal about %s: which pipeline ignores the rest and predicts best?", info.relevant, features, target)
		}
	default:
		panic("suite: unknown family " + string(c.family))
	}
	return q + " Scored by " + metricWords(c.kind) + " on hidden test rows."
}

func metricWords(k tabular.Kind) string {
	if k == tabular.Classification {
		return "ROC AUC"
	}
	return "R²"
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
