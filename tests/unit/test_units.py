"""The systemd units are edited in systemd/ at the top of the tree; the package carries a copy (ptyd/daemon/units/,
package data beside install.sh) so that an installed ptyd can install them. The copy must be the source."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "systemd"
SHIPPED = ROOT / "ptyd" / "daemon" / "units"


@pytest.mark.parametrize("unit", ["ptyd.socket", "ptyd.service"])
def test_the_package_carries_the_units_of_systemd_unchanged(unit: str) -> None:
    assert (SHIPPED / unit).read_bytes() == (SOURCE / unit).read_bytes(), f"{unit} differs: run make units"


def test_every_unit_in_systemd_is_carried() -> None:
    units = {path.name for path in SOURCE.iterdir() if path.suffix in (".socket", ".service")}
    assert units == {"ptyd.socket", "ptyd.service"}
    assert units <= {path.name for path in SHIPPED.iterdir()}
