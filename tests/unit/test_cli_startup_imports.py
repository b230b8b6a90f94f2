"""``flotilla --help`` builds the whole parser; it must not load the event loop, the HTTP client, etcd's gRPC or
the controllers (each command imports them when it runs), so that the CLI starts as fast as kubectl's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

HEAVY = ("asyncio", "aiohttp", "grpc")
HEAVY_PACKAGES = ("flotilla.controllers", "flotilla.apiserver", "flotilla.client", "flotilla.runtime.registry",
                  "flotilla.storage", "flotilla.interpreter.dispatch", "flotilla.member.simulated")

PROBE = f"""
import json, sys
from flotilla.main import build_parser
build_parser()
print(json.dumps(sorted(m for m in sys.modules if m in {HEAVY!r} or m.startswith({HEAVY_PACKAGES!r}))))
"""


def test_building_the_parser_imports_no_heavy_module() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(SRC)})
    assert json.loads(out.stdout) == []


def test_help_prints_every_command_without_heavy_imports() -> None:
    probe = PROBE.replace("build_parser()", "import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()) as "
                                            "o, contextlib.suppress(SystemExit):\n    build_parser().parse_args(['--help'])")
    probe = probe.replace("print(json.dumps(", "assert 'controller-manager' in o.getvalue()\nprint(json.dumps(")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(SRC)})
    assert json.loads(out.stdout) == []
