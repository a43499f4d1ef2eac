# seeds16.py: the control and v2 + difference + memory on suites 11 and 13,
# seeds 1-16, paired by seed; the earlier v2 + difference at 8 seeds beside.
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
    n = len(d); m = sum(d) / n
    return m, math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1) / n), n
suites = {
    '11': (['../no-harm/g11/results.json:anchor', '../difference/s11x/anchor/results.json:anchor', 'control-s11-9-16/results.json:anchor'],
           ['m-s11/results.json:wmrl', 'm-s11-6-16/results.json:wmrl'],
           ['../difference/suite11-8seeds/v2-results.json:wmrl'],
           ['../no-harm/g11/results.json:grpo']),
    '13': (['../four-suites/g13/results.json:anchor', '../difference/s13x/anchor/results.json:anchor', 'control-s13-9-16/results.json:anchor'],
           ['m-s13/results.json:wmrl', 'm-s13-6-16/results.json:wmrl'],
           ['../difference/v2-s13/results.json:wmrl', '../difference/s13x/v2/results.json:wmrl'],
           ['../four-suites/g13/results.json:grpo']),
}
print('| suite | run | seeds | control | run | vs control |')
print('|---|---|---:|---:|---:|---:|')
for s, (c, m, v2, g) in suites.items():
    C, M, V = load(*c), load(*m), load(*v2)
    for name, O in (('v2 + difference + memory', M), ('v2 + difference', V)):
        for lo, hi in ((1, 5), (6, 16), (1, 16), (1, 8)):
            seeds = [k for k in range(lo, hi + 1) if k in O and k in C]
            if len(seeds) < hi - lo + 1:
                continue
            mm, se, n = paired(O, C, seeds)
            cm = sum(C[k] for k in seeds) / n; om = sum(O[k] for k in seeds) / n
            print(f'| {s} | {name} | {lo}–{hi} | {cm:.4f} | {om:.4f} | {mm:+.4f} ± {se:.4f} |')
    print(f'| {s} | per-seed control | | ' + ' '.join(f'{C[k]:.3f}' for k in sorted(C)) + ' | | |')
    print(f'| {s} | per-seed memory | | ' + ' '.join(f'{M[k]:.3f}' for k in sorted(M)) + ' | | |')
