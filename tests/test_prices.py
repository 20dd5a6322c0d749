"""Price table: every row dated and sourced; bad choices are clear errors."""

from __future__ import annotations

import pytest

from sweep import prices
from sweep.errors import ConfigError


def test_every_row_has_prices_date_and_source() -> None:
    table = prices.table()
    assert {"h200", "h100", "a100", "l40s", "cpu"} <= set(table)
    for name, row in table.items():
        assert row["on_demand"] > 0 and row["spot"] > 0, name
        assert row["spot"] <= row["on_demand"], name
        assert row["date"] and row["source"], name


def test_resolve() -> None:
    p = prices.resolve("H200", "spot")
    assert p.usd_per_hour == prices.table()["h200"]["spot"] and "h200 spot" in p.label
    assert prices.resolve("h100", usd_per_hour=2.0).usd_per_hour == 2.0
    assert prices.usd(3600, 2.5) == pytest.approx(2.5)


@pytest.mark.parametrize(
    ("args", "match"),
    [(("tpu",), "price.gpu"), (("h200", "reserved"), "price.kind"), (("h200", "on_demand", -1.0), "usd_per_hour")],
)
def test_bad_prices(args: tuple, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        prices.resolve(*args)


def test_an_unknown_gpu_with_a_line_break_is_named_on_one_line() -> None:
    # found by tests/test_bad_input_properties.py: a drawn name holding a newline split the error over two lines
    with pytest.raises(ConfigError) as caught:
        prices.resolve("h\n100")
    assert "\n" not in str(caught.value) and "'h\\n100'" in str(caught.value)
