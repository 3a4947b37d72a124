"""Every benchmark with a command line still builds it: ``--help`` runs without an error.

The benchmarks run on demand, not in the suite; this catches a name they use that moved. One
subprocess runs them all (each as ``__main__`` with ``--help``), so the cost is one import of the package.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

DRIVER = textwrap.dedent("""
    import runpy, sys
    failed = []
    for path in sys.argv[1:]:
        sys.argv = [path, "--help"]
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (0, None):
                failed.append(f"{path}: exit {exc.code}")
        except Exception as exc:
            failed.append(f"{path}: {type(exc).__name__}: {exc}")
        else:
            failed.append(f"{path}: --help did not exit")
    print("\\n".join(failed))
""")


def test_every_benchmark_s_command_line_builds():
    with_parser = [str(p) for p in sorted(BENCHMARKS.glob("bench_*.py")) if "argparse" in p.read_text()]
    assert len(with_parser) >= 8
    done = subprocess.run([sys.executable, "-c", DRIVER, *with_parser], capture_output=True, text=True,
                          timeout=600, cwd=BENCHMARKS)
    assert done.returncode == 0, done.stderr[-2000:]
    failed = [line for line in done.stdout.splitlines() if line.startswith(str(BENCHMARKS))]
    assert not failed, failed
