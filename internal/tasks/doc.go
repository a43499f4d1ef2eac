// Package tasks is the on-disk format of real research tasks, in the spirit
// of MLE-bench's competitions: a dataset split into what a solution sees
// and what only the grader sees, a metric, limits, and the scores of a
// fixed panel of reference solutions. It loads and checks a task
// directory, and keeps the imported tasks in a content-addressed store.
//
// A task is a directory:
//
//	task.yaml                   the spec (Spec): id, title, kind, metric,
//	                            direction, time_limit, memory_limit, cpus,
//	                            id_column, target, labels, source, license, seed
//	description.md              what a solution is told: the question, the
//	                            data, the submission format, the metric
//	public/train.csv            features, id_column and target
//	public/test.csv             the same columns less the target
//	public/sample_submission.csv  id_column,target for every test id, in
//	                            test order: the submission's shape
//	public/...                  any further files a solution may read
//	private/answers.csv         id_column,target for every test id, in test
//	                            order; never shown to a solution
//	leaderboard.csv             solution,score: the reference panel, best
//	                            first (a header alone before the panel ran)
//
// A submission has the columns of sample_submission.csv: for a label
// metric (accuracy, balanced_accuracy, macro_f1) each target is one of the
// task's labels; for a probability metric (roc_auc, log_loss; binary tasks
// only) it is the probability of the positive label, labels[1]; for a
// regression metric (rmse, mae, r2) a finite number.
//
// Grade checks a solution's submission.csv as Load checks
// sample_submission.csv (rows may come in any order) and scores it against
// private/answers.csv with the task's metric (Score; scikit-learn's
// definitions, checked against scikit-learn in the tests). It runs outside
// the sandbox, which never sees private/.
//
// Load refuses a malformed task with an *Invalid listing every problem, each
// naming its file, its field (a task.yaml field or a CSV column) and its
// line where known: a missing or unknown field, a value out of bounds, a
// metric that does not fit the kind or the direction, a test.csv that holds
// the answers, answers whose ids are not the test ids, a leaderboard not
// best first, symlinks, hidden or unexpected files.
//
// # Store
//
// Imported tasks live under the data directory (WMRL_DATA_DIR), in
// tasks/ (Store): not in the cache, since an import cannot be rebuilt from
// anything wmrl holds, and not in Postgres, since the sandbox mounts a task's
// public/ directory from disk and every worker reads the data directory. Each
// import is kept under the SHA-256 of its files (Hash), so a run can record
// the id and hash of the task it trained on and read the very same files
// later, even after the id was pointed at new files.
//
// # Reference panel
//
// A task's leaderboard comes from one fixed panel of Python solutions, the
// same for every task, from trivial baselines (prior or mean, majority or
// median) through linear and logistic models with several
// regularisations, k-nearest neighbours and naive Bayes to forests,
// gradient boosting and an RBF SVM. Each solution is one file
// deploy/pytasks/panel/<name>.py, name a task id-like word
// ("linear-strong", "forest-200"), run as `python3 solution.py` in the
// Python sandbox (package pysandbox) with the task's public/ mounted
// read-only at /data/public, description.md and a task.json (the Spec as
// JSON, pysandbox.TaskJSON) at /data, and a writable /work; it writes
// /work/submission.csv in the shape of sample_submission.csv and reads
// nothing else. A solution reads the kind, metric and labels from
// /data/task.json, so one file serves every task, and fixes its own random
// state. The grader, outside the container, checks the submission as Load
// checks sample_submission.csv and scores it against private/answers.csv;
// a solution that fails, times out or writes a malformed submission gets
// no row. The panel runs once per task, under the task's own limits, on
// the prepared directory before it is imported (pysandbox.RunPanel and
// WriteLeaderboard); its scores are written to leaderboard.csv, best
// first, ties by name. The same task, panel and image give the same bytes.
package tasks
