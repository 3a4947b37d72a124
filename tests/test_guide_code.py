"""Every code block a user copies from README.md and the guide runs as written.

- Python blocks (```` ```python ```` and the landing page's ```` ```{code-cell} ````) are executed
  in a fresh folder: each README block in a namespace of its own (a README block must not lean on
  another's variables), a guide page's blocks in order in one namespace (a page is one session).
- Shell blocks are checked, not run (they install, or run studies for hours): every
  ``bayes-loco`` command must parse with the command line's own parser, and every script a line
  names must exist.

The blocks use the sizes they show; the heaviest, the Bayesian ones, fit a small problem
(N = 1,000, d_x = 8) in about 30 s.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDE = sorted([ROOT / "docs" / "index.md", *(ROOT / "docs" / "howto").glob("*.md")])
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```\s*$", re.M | re.S)
PYTHON = {"python", "{code-cell} python", "{code-cell} ipython3"}
SHELL = {"bash", "sh", "console"}


def blocks(path: Path, kinds: set[str]) -> list[str]:
    out = []
    for match in FENCE.finditer(path.read_text(encoding="utf-8")):
        if match["info"].strip() in kinds:
            # a code cell's options (":tags: [...]") are not code
            out.append("\n".join(line for line in match["body"].splitlines() if not line.startswith(":")))
    return out


def _ids(paths):
    return [p.relative_to(ROOT).as_posix() for p in paths]


@pytest.fixture
def quiet(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "1")
    yield tmp_path
    import matplotlib.pyplot as plt

    plt.close("all")


def test_the_readme_and_the_guide_have_code():
    assert len(blocks(README, PYTHON)) >= 3
    assert blocks(ROOT / "docs" / "index.md", PYTHON)
    silent = [p.name for p in GUIDE if p.parent.name == "howto" and p.name != "index.md"
              and not blocks(p, PYTHON | SHELL)]
    assert not silent, f"how-to guides without code: {silent}"


@pytest.mark.parametrize("index", range(len(blocks(README, PYTHON))))
def test_a_readme_block_runs_on_its_own(index, quiet):
    code = blocks(README, PYTHON)[index]
    exec(compile(code, f"README.md, python block {index + 1}", "exec"), {"__name__": "__readme__"})


RUNNABLE = [p for p in GUIDE if blocks(p, PYTHON)]


@pytest.mark.parametrize("page", RUNNABLE, ids=_ids(RUNNABLE))
def test_a_guide_pages_blocks_run_in_order(page, quiet):
    namespace = {"__name__": "__guide__"}
    for i, code in enumerate(blocks(page, PYTHON), 1):
        exec(compile(code, f"{page.relative_to(ROOT)}, python block {i}", "exec"), namespace)


def _commands(path: Path) -> list[str]:
    lines = []
    for code in blocks(path, SHELL):
        for line in code.splitlines():
            line = line.split(" #")[0].strip()  # a comment after the command
            lines += [part.strip() for part in line.split("&&") if part.strip()]
    return lines


@pytest.mark.parametrize("path", [README, *GUIDE], ids=_ids([README, *GUIDE]))
def test_shell_lines_name_real_commands_and_scripts(path):
    from bayes_loco.cli import build_parser

    for line in _commands(path):
        words = shlex.split(line)
        if words[0].endswith("bayes-loco"):
            args = words[1:]
            if "--help" in args or "--version" in args:  # the command named must exist
                assert args[0] in ("--help", "--version", "demo", "run", "compare", "plot"), line
                continue
            try:
                build_parser().parse_args(args)
            except SystemExit as exit_:  # argparse exits on a bad line: say which
                raise AssertionError(f"{path.name}: {line!r} does not parse") from exit_
        elif words[0] in ("bash", "python") or words[0].endswith("/python"):
            script = next((w for w in words[1:] if w.endswith((".sh", ".py"))), None)
            if script and not script.startswith("-"):
                assert (ROOT / script).is_file(), f"{path.name}: {line!r} names {script}, which is not there"
