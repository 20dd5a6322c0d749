"""The flag catalog's page: docs/perf-flags.md is generated from it and must not go stale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sweep.perf import CATALOG
from sweep.perf.catalog import markdown

ROOT = Path(__file__).resolve().parents[2]


def test_docs_perf_flags_is_the_catalog_as_generated() -> None:
    page = (ROOT / "docs" / "perf-flags.md").read_text()
    assert page == markdown(), "docs/perf-flags.md is stale: run python -m sweep.perf > docs/perf-flags.md"


def test_the_page_has_one_row_per_flag_with_its_default_and_where_it_acts() -> None:
    page = markdown()
    for flag in CATALOG.values():
        (line,) = [line for line in page.splitlines() if line.startswith(f"| `{flag.name}` |")]
        assert flag.where in line and ("exact" in line) == flag.exact


def test_python_m_sweep_perf_prints_the_page() -> None:
    out = subprocess.run([sys.executable, "-m", "sweep.perf"], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout == markdown() and out.stderr == ""


def test_each_flag_is_written_once_and_its_role_read_from_it() -> None:
    import dataclasses

    from sweep.perf import BACKEND_FLAGS, UPDATE_FLAGS, Flags

    assert list(CATALOG) == [f.name for f in dataclasses.fields(Flags)]  # the catalog is read from the fields
    assert UPDATE_FLAGS == ("fused_optimizer", "fast_finite_check", "lazy_loss_readout", "critic_chunk",
                            "cuda_graph_update")  # fmt: skip
    assert BACKEND_FLAGS == ("buffer_donation",)
