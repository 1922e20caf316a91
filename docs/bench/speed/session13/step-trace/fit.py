# The steps of a step trace (step-trace.patch: decode rows, prompt tokens, attended positions,
# start in us, milliseconds per line) fitted by least squares as
# fixed + row x rows + prompt x prompt tokens + per1000att x attended / 1000, the burst's first
# all-prompt step left out. Usage: python3 fit.py trace-16-1.txt ...
import sys


def lstsq(X, y):
    n = len(X[0])
    A = [[sum(r[i] * r[j] for r in X) for j in range(n)] for i in range(n)]
    b = [sum(r[i] * v for r, v in zip(X, y)) for i in range(n)]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(A[r][i]))
        A[i], A[p], b[i], b[p] = A[p], A[i], b[p], b[i]
        for r in range(n):
            if r != i:
                f = A[r][i] / A[i][i]
                for c in range(i, n):
                    A[r][c] -= f * A[i][c]
                b[r] -= f * b[i]
    return [b[i] / A[i][i] for i in range(n)]


for name in sys.argv[1:]:
    steps = [[float(x) for x in line.split()] for line in open(name)]
    steps = [s for s in steps if s[1] < 500]
    X = [[1, s[0], s[1], s[2] / 1000] for s in steps]
    y = [s[4] for s in steps]
    c = lstsq(X, y)
    mixed = [s for s in steps if s[1] > 0]
    print(f"{name}: {len(steps)} steps, {sum(y):.0f} ms; mixed (with prompt tokens) {len(mixed)}, "
          f"{sum(s[4] for s in mixed):.0f} ms; fixed {c[0]:.3f} ms + {c[1]:.4f} ms/row + "
          f"{c[2]:.4f} ms/prompt token + {c[3]:.4f} ms/1000 attended")
