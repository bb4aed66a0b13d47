"""What kolo.torch's test scripts share: counted checks, parts that fail on their own (an
exception in one is its failure; the others still run), and one verdict line per rank
("LABEL: N checks, M failed", which tools/gpu-check.sh reads), exiting non-zero on a failure."""
import sys

failures = []
_counted = [0]
_only = set()


def expect(ok, what):
    _counted[0] += 1
    if not ok:
        failures.append(what)


def run_only(names):
    """Only these parts run (by function name); none given: all."""
    _only.update(names)


def section(fn):
    """A decorator that runs the part at once."""
    if _only and fn.__name__ not in _only:
        return fn
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - reported as the part's failure
        expect(False, f"{fn.__name__}: {type(e).__name__}: {e}")
    return fn


def finish(label):
    print(f"{label}: {_counted[0]} checks, {len(failures)} failed", flush=True)
    for f in failures:
        print(f"{label}: FAIL {f}", flush=True)
    sys.exit(1 if failures else 0)
