"""scikit-learn side of `make bench` (driven by internal/bench/isobench).

Reads one command per line on stdin and answers one line on stdout:

  version                      -> ok <sklearn> <numpy>
  load <id> <xfile> <yfile>    -> ok <n>        (raw little-endian float64)
  fit <id>                     -> ok <seconds>  (IsotonicRegression(out_of_bounds="clip").fit,
                                                 timed in-process with time.perf_counter)
  predict <id> <qfile> <out>   -> ok <m>        (predictions of the last fit, raw float64)

Any failure answers `err <message>` and exits non-zero.
"""

import sys
import time

import numpy as np
import sklearn
from sklearn.isotonic import IsotonicRegression


def main():
    data = {}
    models = {}
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        cmd, args = parts[0], parts[1:]
        try:
            if cmd == "version":
                reply = "ok %s %s" % (sklearn.__version__, np.__version__)
            elif cmd == "load":
                key, xfile, yfile = args
                x = np.fromfile(xfile, dtype="<f8")
                y = np.fromfile(yfile, dtype="<f8")
                if len(x) != len(y):
                    raise ValueError("x has %d values, y %d" % (len(x), len(y)))
                data[key] = (x, y)
                reply = "ok %d" % len(x)
            elif cmd == "fit":
                (key,) = args
                x, y = data[key]
                start = time.perf_counter()
                model = IsotonicRegression(out_of_bounds="clip").fit(x, y)
                elapsed = time.perf_counter() - start
                models[key] = model
                reply = "ok %r" % elapsed
            elif cmd == "predict":
                key, qfile, out = args
                q = np.fromfile(qfile, dtype="<f8")
                pred = np.asarray(models[key].predict(q), dtype="<f8")
                pred.tofile(out)
                reply = "ok %d" % len(pred)
            else:
                raise ValueError("unknown command %r" % cmd)
        except Exception as exc:  # report and stop: the driver fails loudly
            print("err %s: %s" % (cmd, exc), flush=True)
            sys.exit(1)
        print(reply, flush=True)


if __name__ == "__main__":
    main()
