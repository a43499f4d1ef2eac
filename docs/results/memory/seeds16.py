# seeds16.py: the anchor control and the four difference variants on suites
# 11 and 13, seeds 1-16, paired by seed with the control (run from this
# directory). Seeds 1-5 are the protocol; 6-16 were decided before
# any of their runs had finished.
import json, math

def load(*specs):
    out = {}
    for spec in specs:
        path, _, mode = spec.partition(':')
        for r in json.load(open(path))['runs']:
            if not mode or r['mode'] == mode:
                out[r['seed']] = r['heldout_score']
    return out

def paired(o, b, seeds):
    d = [o[s] - b[s] for s in seeds]
    n = len(d)
    m = sum(d) / n
    return m, math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1) / n)

D = '../difference/'
suites = {
    '11': {
        'control': ['../no-harm/g11/results.json:anchor', D + 's11x/anchor/results.json:anchor', 'control-s11-9-16/results.json:anchor'],
        'frozen + difference': [D + 'suite11-8seeds/fz-results.json:wmrl', 'fz-s11-9-16/results.json:wmrl'],
        'v2 + difference': [D + 'suite11-8seeds/v2-results.json:wmrl', 'v2-s11-9-16/results.json:wmrl'],
        'frozen + difference + memory': ['f-s11/results.json:wmrl', 'f-s11-6-16/results.json:wmrl'],
        'v2 + difference + memory': ['m-s11/results.json:wmrl', 'm-s11-6-16/results.json:wmrl'],
    },
    '13': {
        'control': ['../four-suites/g13/results.json:anchor', D + 's13x/anchor/results.json:anchor', 'control-s13-9-16/results.json:anchor'],
        'frozen + difference': [D + 'fz-s13/results.json:wmrl', D + 's13x/fz/results.json:wmrl', 'fz-s13-9-16/results.json:wmrl'],
        'v2 + difference': [D + 'v2-s13/results.json:wmrl', D + 's13x/v2/results.json:wmrl', 'v2-s13-9-16/results.json:wmrl'],
        'frozen + difference + memory': ['f-s13/results.json:wmrl', 'f-s13-6-16/results.json:wmrl'],
        'v2 + difference + memory': ['m-s13/results.json:wmrl', 'm-s13-6-16/results.json:wmrl'],
    },
}
ranges = [(1, 5), (6, 16), (1, 16)]
print('| suite | run | held-out, seeds 1–16 | vs control, seeds 1–5 | seeds 6–16 | **seeds 1–16** | no harm at 16 |')
print('|---|---|---:|---:|---:|---:|---|')
for s, runs in suites.items():
    C = load(*runs['control'])
    assert sorted(C) == list(range(1, 17)), (s, sorted(C))
    print(f"| {s} | control | {sum(C.values()) / 16:.4f} | – | – | – | |")
    for name, specs in runs.items():
        if name == 'control':
            continue
        O = load(*specs)
        assert sorted(O) == list(range(1, 17)), (s, name, sorted(O))
        cells = []
        for lo, hi in ranges:
            m, se = paired(O, C, range(lo, hi + 1))
            cells.append((m, se))
        m, se = cells[-1]
        verdict = 'met' if m >= -se else 'missed'
        print(f"| {s} | {name} | {sum(O.values()) / 16:.4f} | " +
              ' | '.join(f'{m:+.4f} ± {se:.4f}' for m, se in cells) + f' | {verdict} |')
for s, runs in suites.items():
    for name, specs in runs.items():
        O = load(*specs)
        print(f'suite {s} {name}: ' + ' '.join(f'{O[k]:.3f}' for k in sorted(O)))
