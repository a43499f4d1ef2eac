"""Writes wmrl's real-data tasks from the datasets Debian's python3-sklearn
and python3-statsmodels ship (nothing is downloaded).

Usage: /usr/bin/python3 prepare.py --seed N --out OUT

Each task becomes OUT/<id>/ in the format of wmrl's internal/tasks (task.yaml,
description.md, public/{train,test,sample_submission}.csv,
private/answers.csv, leaderboard.csv). The split is drawn from the seed and
the task id only, so the same seed and the same Debian packages give
byte-identical files, whatever the order or the subset of tasks. Rows are
shuffled before ids are given, so an id says nothing about the answer (some
datasets are sorted by their target). Classification tasks are split
stratified by label; modechoice is split by traveller, so a traveller's four
alternatives stay together. The leaderboard is a header alone: the reference
panel that fills it runs in the sandbox (see internal/tasks's package doc).

The script installs nothing; deploy/pytasks.sh installs the packages.
"""

import argparse
import csv
import hashlib
import io
import json
import math
import os
import re
import subprocess
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")

import pandas as pd  # noqa: E402
import sklearn.datasets as skd  # noqa: E402
import statsmodels.datasets as smd  # noqa: E402

TEST_FRACTION = 0.25
TIME_LIMIT = "10m"
MEMORY_LIMIT = "2GiB"

METRIC_TEXT = {
    "accuracy": ("maximize", "the fraction of test rows whose label is right"),
    "balanced_accuracy": ("maximize", "the mean over labels of the fraction of that label's test rows predicted right"),
    "macro_f1": ("maximize", "the unweighted mean over labels of F1"),
    "roc_auc": ("maximize", "the area under the ROC curve of the predicted probabilities of the positive label"),
    "log_loss": ("minimize", "the mean negative log-likelihood of the predicted probabilities of the positive label (clipped to [1e-15, 1-1e-15])"),
    "rmse": ("minimize", "the root mean squared error"),
    "mae": ("minimize", "the mean absolute error"),
    "r2": ("maximize", "the coefficient of determination R² (1 - SSE/SST over the test rows)"),
}
PROBABILITY_METRICS = {"roc_auc", "log_loss"}


def debian_version(package):
    """The installed Debian version of package, or '' off Debian."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package],
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def snake(name):
    s = re.sub(r"[^0-9A-Za-z]+", "_", str(name)).strip("_").lower()
    if not s or s[0].isdigit():
        s = "x_" + s
    return s


def clean_text(s):
    """Text for description.md and task.yaml: no tabs, no trailing spaces,
    no control characters."""
    s = s.replace("\r\n", "\n").replace("\t", "    ")
    s = "".join(ch for ch in s if ch == "\n" or ord(ch) >= 0x20 and ord(ch) != 0x7F)
    return "\n".join(line.rstrip() for line in s.split("\n")).strip("\n")


# Each task: its id, title, question, kind, metric, a loader returning
# (features DataFrame, target Series, labels or None, group Series or None),
# the package and loader name for the source line, and the dataset's own
# documentation.

def sk_frame(bunch, names=None):
    names = names or list(bunch.feature_names)
    return pd.DataFrame(np.asarray(bunch.data), columns=[snake(n) for n in names])


def sk_source(loader):
    return "python3-sklearn", "sklearn.datasets." + loader


def load_breast_cancer():
    b = skd.load_breast_cancer()
    y = pd.Series(np.where(b.target == 0, "malignant", "benign"))
    return sk_frame(b), y, ["benign", "malignant"], None, b.DESCR


def load_wine():
    b = skd.load_wine()
    y = pd.Series([b.target_names[t] for t in b.target])
    return sk_frame(b), y, [str(n) for n in b.target_names], None, b.DESCR


def load_iris():
    b = skd.load_iris()
    y = pd.Series([b.target_names[t] for t in b.target])
    return sk_frame(b), y, [str(n) for n in b.target_names], None, b.DESCR


def load_digits():
    b = skd.load_digits()
    y = pd.Series([str(int(t)) for t in b.target])
    return sk_frame(b), y, [str(i) for i in range(10)], None, b.DESCR


def load_diabetes():
    b = skd.load_diabetes(scaled=False)
    return sk_frame(b), pd.Series(b.target.astype(float)), None, None, b.DESCR


def sm_doc(mod):
    parts = [mod.TITLE, mod.SOURCE, mod.DESCRSHORT, mod.DESCRLONG, mod.NOTE]
    return "\n\n".join(clean_text(str(p)) for p in parts if p)


def sm_data(name):
    mod = getattr(smd, name)
    return mod, mod.load_pandas().data.copy()


def load_fair():
    mod, d = sm_data("fair")
    y = pd.Series(np.where(d["affairs"] > 0, "yes", "no"))
    return d.drop(columns=["affairs"]), y, ["no", "yes"], None, sm_doc(mod)


def load_anes96():
    mod, d = sm_data("anes96")
    y = pd.Series(np.where(d["vote"] > 0, "dole", "clinton"))
    return d.drop(columns=["vote"]), y, ["clinton", "dole"], None, sm_doc(mod)


def load_randhie():
    mod, d = sm_data("randhie")
    return d.drop(columns=["mdvis"]), d["mdvis"].astype(float), None, None, sm_doc(mod)


def load_star98():
    mod, d = sm_data("star98")
    y = d["NABOVE"] / (d["NABOVE"] + d["NBELOW"])
    return d.drop(columns=["NABOVE", "NBELOW"]), y, None, None, sm_doc(mod)


def load_grunfeld():
    mod, d = sm_data("grunfeld")
    return d.drop(columns=["invest"]), d["invest"], None, None, sm_doc(mod)


def load_modechoice():
    mod, d = sm_data("modechoice")
    y = pd.Series(np.where(d["choice"] > 0, "yes", "no"))
    return d.drop(columns=["choice"]), y, ["no", "yes"], d["individual"], sm_doc(mod)


def load_engel():
    mod, d = sm_data("engel")
    return d.drop(columns=["foodexp"]), d["foodexp"], None, None, sm_doc(mod)


def load_macrodata():
    mod, d = sm_data("macrodata")
    return d.drop(columns=["unemp"]), d["unemp"], None, None, sm_doc(mod)


def load_cancer():
    mod, d = sm_data("cancer")
    return d.drop(columns=["cancer"]), d["cancer"], None, None, sm_doc(mod)


SK = "as distributed with scikit-learn (python3-sklearn); see the dataset description for its origin"
SM = "as distributed with statsmodels (python3-statsmodels): "

TASKS = [
    dict(id="breast-cancer", title="Breast cancer diagnosis from cell-nucleus measurements",
         question="Is a breast mass malignant, given 30 measurements of the cell nuclei in a fine-needle aspirate image?",
         kind="classification", metric="roc_auc", target="diagnosis", load=load_breast_cancer,
         source=sk_source("load_breast_cancer"), license=SK),
    dict(id="wine-cultivar", title="Wine cultivar from chemical analysis",
         question="Which of three cultivars does a wine come from, given 13 results of its chemical analysis?",
         kind="classification", metric="macro_f1", target="cultivar", load=load_wine,
         source=sk_source("load_wine"), license=SK),
    dict(id="iris-species", title="Iris species from flower measurements",
         question="Which of three iris species is a flower, given its sepal and petal lengths and widths?",
         kind="classification", metric="accuracy", target="species", load=load_iris,
         source=sk_source("load_iris"), license=SK),
    dict(id="digits", title="Handwritten digits from 8x8 images",
         question="Which digit is written, given an 8x8 image of pixel intensities 0..16?",
         kind="classification", metric="accuracy", target="digit", load=load_digits,
         source=sk_source("load_digits"), license=SK),
    dict(id="diabetes-progression", title="Diabetes progression after one year",
         question="How far has diabetes progressed one year after baseline, given age, sex, body mass index, blood pressure and six blood serum measurements?",
         kind="regression", metric="rmse", target="progression", load=load_diabetes,
         source=sk_source("load_diabetes(scaled=False)"), license=SK),
    dict(id="fair-affairs", title="Extramarital affairs (Fair, 1978)",
         question="Has a married woman had an extramarital affair, given her marriage rating, age, years married, children, religiousness, education and her and her husband's occupations?",
         kind="classification", metric="log_loss", target="affair", load=load_fair,
         source=("python3-statsmodels", "statsmodels.datasets.fair (affairs > 0)"), license=SM),
    dict(id="anes96-vote", title="1996 US presidential vote (ANES)",
         question="Did a respondent of the 1996 American National Election Study vote for Dole rather than Clinton, given party identification, ideology placements, age, education, income and population?",
         kind="classification", metric="balanced_accuracy", target="vote", load=load_anes96,
         source=("python3-statsmodels", "statsmodels.datasets.anes96"), license=SM),
    dict(id="randhie-visits", title="Doctor visits in the RAND Health Insurance Experiment",
         question="How many outpatient visits to a medical doctor does a person make in a year, given their insurance plan's coinsurance and deductibles, income and health?",
         kind="regression", metric="mae", target="mdvis", load=load_randhie, test_fraction=0.2,
         source=("python3-statsmodels", "statsmodels.datasets.randhie"), license=SM),
    dict(id="star98-pass-rate", title="California school math pass rates (STAR 1998)",
         question="What fraction of a California school district's students score above the national median in math, given its demographics, teachers and spending?",
         kind="regression", metric="r2", target="pass_rate", load=load_star98,
         source=("python3-statsmodels", "statsmodels.datasets.star98 (NABOVE / (NABOVE + NBELOW))"), license=SM),
    dict(id="grunfeld-invest", title="Corporate investment (Grunfeld, 1935-1954)",
         question="How much does a large US firm invest in a year, given its market value, its capital stock, the firm and the year?",
         kind="regression", metric="rmse", target="invest", load=load_grunfeld,
         source=("python3-statsmodels", "statsmodels.datasets.grunfeld"), license=SM),
    dict(id="modechoice", title="Travel mode choice between Sydney and Melbourne",
         question="Is a travel mode (air, train, bus or car) the one a traveller chose, given its costs and times and the traveller's income and party size? Each traveller has four rows and chose exactly one; a traveller's rows are all in train or all in test.",
         kind="classification", metric="roc_auc", target="chosen", load=load_modechoice,
         source=("python3-statsmodels", "statsmodels.datasets.modechoice"), license=SM),
    dict(id="engel-food", title="Household food expenditure from income (Engel)",
         question="How much does a Belgian working-class household spend on food, given its income?",
         kind="regression", metric="mae", target="foodexp", load=load_engel,
         source=("python3-statsmodels", "statsmodels.datasets.engel"), license=SM),
    dict(id="macro-unemployment", title="US unemployment rate from macroeconomic indicators",
         question="What is the US unemployment rate in a quarter, given that quarter's GDP, consumption, investment, prices, money, interest rates and population? (Quarters are split at random, not in time order.)",
         kind="regression", metric="r2", target="unemp", load=load_macrodata,
         source=("python3-statsmodels", "statsmodels.datasets.macrodata"), license=SM),
    dict(id="cancer-counts", title="Breast cancer counts by county population",
         question="How many cases of breast cancer are observed in a county, given its population?",
         kind="regression", metric="rmse", target="cases", load=load_cancer,
         source=("python3-statsmodels", "statsmodels.datasets.cancer"), license=SM),
]


def task_rng(seed, task_id):
    """The task's generator: from the seed and the id only."""
    digest = hashlib.sha256(f"wmrl-pytasks:{seed}:{task_id}".encode()).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))


def split(rng, n, y, labels, groups, fraction):
    """Train and test row indices, each shuffled."""
    if groups is not None:
        keys = np.array(sorted(set(groups.tolist())))
        keys = keys[rng.permutation(len(keys))]
        n_test = max(1, int(round(fraction * len(keys))))
        test_keys = set(keys[:n_test].tolist())
        is_test = np.array([g in test_keys for g in groups.tolist()])
        test, train = np.flatnonzero(is_test), np.flatnonzero(~is_test)
    elif labels is not None:
        train, test = [], []
        yv = np.asarray(y)
        for label in labels:
            idx = np.flatnonzero(yv == label)
            idx = idx[rng.permutation(len(idx))]
            k = int(round(fraction * len(idx)))
            test.extend(idx[:k].tolist())
            train.extend(idx[k:].tolist())
        train, test = np.array(train), np.array(test)
    else:
        perm = rng.permutation(n)
        k = int(round(fraction * n))
        test, train = perm[:k], perm[k:]
    return train[rng.permutation(len(train))], test[rng.permutation(len(test))]


def fmt_value(v, integral):
    if isinstance(v, (str, np.str_)):
        return str(v)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if integral:
        return str(int(v))
    return repr(float(v))


def column_values(s):
    """A column's values as strings: integral numbers without '.0'."""
    if s.dtype.kind in "iub":
        return [str(int(v)) for v in s.tolist()]
    if s.dtype.kind == "f":
        vals = s.to_numpy(dtype=float)
        finite = vals[~np.isnan(vals)]
        integral = bool(np.all(finite == np.round(finite))) and bool(np.all(np.abs(finite) < 2**53))
        return [fmt_value(float(v), integral) for v in vals]
    return [fmt_value(v, False) for v in s.tolist()]


def write_csv(path, header, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(buf.getvalue())


def yaml_str(s):
    return json.dumps(s, ensure_ascii=False)


def column_kind(s):
    if s.dtype.kind in "iubf":
        return "number"
    return "text"


def write_task(out, spec, seed, versions):
    X, y, labels, groups, doc = spec["load"]()
    X = X.reset_index(drop=True)
    X.columns = [snake(c) for c in X.columns]
    y = pd.Series(y).reset_index(drop=True)
    if groups is not None:
        groups = pd.Series(groups).reset_index(drop=True)
    tid, target, kind, metric = spec["id"], spec["target"], spec["kind"], spec["metric"]
    assert "id" not in X.columns and target not in X.columns, tid
    if kind == "classification":
        assert set(y.tolist()) <= set(labels), tid
    else:
        y = y.astype(float)
    rng = task_rng(seed, tid)
    n = len(X)
    train, test = split(rng, n, y, labels, groups, spec.get("test_fraction", TEST_FRACTION))
    order = np.concatenate([train, test])
    ids = np.empty(n, dtype=np.int64)
    ids[order] = np.arange(n)  # ids follow the shuffled order

    cols = {c: column_values(X[c]) for c in X.columns}
    yv = column_values(y) if kind == "regression" else [str(v) for v in y.tolist()]
    features = list(X.columns)

    d = os.path.join(out, tid)
    os.makedirs(os.path.join(d, "public"))
    os.makedirs(os.path.join(d, "private"))
    write_csv(os.path.join(d, "public", "train.csv"), ["id"] + features + [target],
              [[str(ids[i])] + [cols[c][i] for c in features] + [yv[i]] for i in train])
    write_csv(os.path.join(d, "public", "test.csv"), ["id"] + features,
              [[str(ids[i])] + [cols[c][i] for c in features] for i in test])
    write_csv(os.path.join(d, "private", "answers.csv"), ["id", target], [[str(ids[i]), yv[i]] for i in test])

    if kind == "regression":
        guess = repr(float(np.mean(y.to_numpy()[train])))
    elif metric in PROBABILITY_METRICS:
        guess = "0.5"
    else:
        counts = pd.Series([yv[i] for i in train]).value_counts()
        guess = max(labels, key=lambda l: (counts.get(l, 0), -labels.index(l)))
    write_csv(os.path.join(d, "public", "sample_submission.csv"), ["id", target], [[str(ids[i]), guess] for i in test])
    with open(os.path.join(d, "leaderboard.csv"), "w", encoding="utf-8", newline="") as f:
        f.write("solution,score\n")

    package, loader = spec["source"]
    version = versions.get(package, "")
    source = f"{package} {version}".strip() + f", {loader}"
    license_ = spec["license"]
    if license_ == SM:
        mod = getattr(smd, loader.split(".")[2].split(" ")[0])
        license_ = SM + clean_text(str(mod.COPYRIGHT)).replace("\n", " ")
    direction = METRIC_TEXT[metric][0]
    lines = [
        f"id: {tid}",
        f"title: {yaml_str(spec['title'])}",
        f"kind: {kind}",
        f"metric: {metric}",
        f"direction: {direction}",
        f"time_limit: {TIME_LIMIT}",
        f"memory_limit: {MEMORY_LIMIT}",
        "cpus: 1",
        "id_column: id",
        f"target: {target}",
    ]
    if labels is not None:
        lines.append("labels: [" + ", ".join(yaml_str(l) for l in labels) + "]")
    lines += [f"source: {yaml_str(source)}", f"license: {yaml_str(license_)}", f"seed: {seed}"]
    with open(os.path.join(d, "task.yaml"), "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines) + "\n")

    with open(os.path.join(d, "description.md"), "w", encoding="utf-8", newline="") as f:
        f.write(describe(spec, X, labels, train, test, source, doc) + "\n")
    return dict(id=tid, kind=kind, metric=metric, rows=n, train=len(train), test=len(test), features=len(features))


def plural(n, noun):
    return f"{n} {noun}" + ("" if n == 1 else "s")


def describe(spec, X, labels, train, test, source, doc):
    kind, metric, target = spec["kind"], spec["metric"], spec["target"]
    direction, what = METRIC_TEXT[metric]
    out = [f"# {spec['title']}", "", spec["question"], "", "## Files", "",
           f"- `public/train.csv`: {len(train)} rows: `id`, {plural(X.shape[1], 'feature column')} and the target `{target}`.",
           f"- `public/test.csv`: {len(test)} rows: `id` and the same feature columns, without `{target}`.",
           "- `public/sample_submission.csv`: a valid submission (a constant guess) for every test id, in test order.",
           "", "## Columns", "", "| column | type |", "|---|---|"]
    for c in X.columns:
        out.append(f"| `{c}` | {column_kind(X[c])} |")
    out += ["", "## Submission", ""]
    if kind == "regression":
        out.append(f"Write `submission.csv` with the columns `id,{target}`: one row per test id, `{target}` a finite number.")
    elif metric in PROBABILITY_METRICS:
        out.append(f"Write `submission.csv` with the columns `id,{target}`: one row per test id, `{target}` the "
                   f"probability (in [0, 1]) that the label is `{labels[1]}` rather than `{labels[0]}`.")
    else:
        out.append(f"Write `submission.csv` with the columns `id,{target}`: one row per test id, `{target}` one of "
                   + ", ".join(f"`{l}`" for l in labels) + ".")
    out += ["", "## Metric", "", f"`{metric}` ({direction}): {what}, over the test rows.", "",
            "## Source", "", f"{source}. The rows were shuffled and split into train and test with a fixed seed; "
            "the test answers are kept private.", "", "## About the data", "", "```", clean_text(doc), "```"]
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--only", default="", help="comma-separated task ids (default: all)")
    a = p.parse_args()
    if not 0 <= a.seed < 2**63:
        p.error("--seed: want 0 <= seed < 2^63")
    if os.path.exists(a.out) and os.listdir(a.out):
        p.error(f"--out {a.out}: not empty")
    os.makedirs(a.out, exist_ok=True)
    only = set(filter(None, a.only.split(",")))
    unknown = only - {t["id"] for t in TASKS}
    if unknown:
        p.error("--only: unknown task " + ", ".join(sorted(unknown)))
    versions = {pkg: debian_version(pkg) for pkg in ("python3-sklearn", "python3-statsmodels")}
    for spec in TASKS:
        if only and spec["id"] not in only:
            continue
        r = write_task(a.out, spec, a.seed, versions)
        print(f"{r['id']}: {r['kind']}, {r['metric']}, {r['train']} train + {r['test']} test rows, "
              f"{plural(r['features'], 'feature')}", file=sys.stderr)


if __name__ == "__main__":
    main()
