"""The configuration: every key documented with its reason, the docs and example generated from config.py, and
``ptyd --print-config`` printing a file ptyd reads back as the same configuration."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from conftest import ROOT
from ptyd.config import Config, ConfigError, load_config
from ptyd.configdoc import example, keys, markdown


def test_every_key_has_a_reason_and_a_section() -> None:
    documented = keys()
    assert [k.name for k in documented] == list(Config.__struct_fields__)
    for key in documented:
        assert key.reason, f"{key.name} needs a comment above it in ptyd/config.py saying why its default is what it is"
        assert key.section, key.name


def test_generated_config_docs_are_current() -> None:
    assert (ROOT / "docs" / "config.md").read_text() == markdown(), "docs/config.md is stale: run `make docs`"
    assert (ROOT / "docs" / "config.example.toml").read_text() == example(), (
        "docs/config.example.toml is stale: run `make docs`"
    )


def test_the_example_file_is_a_valid_config_and_changes_nothing() -> None:
    assert load_config(ROOT / "docs" / "config.example.toml", required=True) == Config()


def test_print_config_reads_back_as_the_configuration_in_effect(tmp_path: Path) -> None:
    source = tmp_path / "config.toml"
    source.write_text('default_cols = 100\nshell_argv = ["/bin/bash", "-i"]\nprobe_max_interval_ms = 20.5\n')
    printed = subprocess.run(
        [sys.executable, "-m", "ptyd", "--config", str(source), "--print-config"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    again = tmp_path / "printed.toml"
    again.write_text(printed)
    config = load_config(again, required=True)
    assert config == load_config(source, required=True)
    assert (config.default_cols, config.shell_argv, config.probe_max_interval_ms) == (100, ("/bin/bash", "-i"), 20.5)
    assert (
        msgspec.structs.replace(config, default_cols=160, shell_argv=Config().shell_argv, probe_max_interval_ms=50.0)
        == Config()
    )


def test_keys_may_sit_in_a_ptyd_table(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[ptyd]\ndefault_rows = 30\n")
    assert load_config(path).default_rows == 30
    path.write_text("default_rows = 30\n[ptyd]\ndefault_rows = 31\n")
    with pytest.raises(ConfigError, match="default_rows given both"):
        load_config(path)


def test_an_unknown_key_is_named(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[ptyd]\ndefault_colz = 30\n")
    with pytest.raises(ConfigError, match="default_colz"):
        load_config(path)


@pytest.mark.parametrize("value", ["cgroups", "Auto", "none"])
def test_a_containment_typo_is_an_error_not_a_quiet_subreaper(tmp_path: Path, value: str) -> None:
    source = tmp_path / "config.toml"
    source.write_text(f'containment = "{value}"\n')
    with pytest.raises(ConfigError, match="containment"):
        load_config(source, required=True)
