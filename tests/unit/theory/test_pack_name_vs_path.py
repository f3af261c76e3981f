"""Which argument names a registered pack and which a file: a name (letters, digits, underscores) means the
registered pack of that name even beside a file or folder so named (a plugin's own layout puts its package folder,
named like its pack, in the working directory); ./NAME, DIR/NAME and NAME.toml are paths; a name nothing is
registered by is a file of that name, else one line saying so. The commands' help states the rule."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from recallkit.theory.errors import InputError
from recallkit.theory.pack import resolve_pack_path, shipped_packs
from tests.pack_texts import MINIMAL_PACK, write_pack

__all__: list[str] = []


def test_a_registered_name_wins_over_a_folder_of_that_name(tmp_path, monkeypatch):
    (tmp_path / "example").mkdir()
    monkeypatch.chdir(tmp_path)
    path, label = resolve_pack_path("example")
    assert path == shipped_packs()["example"] and label == "pack example"


def test_a_registered_name_wins_over_a_file_of_that_name_which_dot_slash_names(tmp_path, monkeypatch):
    write_pack(tmp_path, MINIMAL_PACK, "example")
    monkeypatch.chdir(tmp_path)
    assert resolve_pack_path("example")[0] == shipped_packs()["example"]
    path, label = resolve_pack_path("./example")
    assert path.resolve() == (tmp_path / "example").resolve() and label == "./example"


@pytest.mark.parametrize("given", ["example.toml", "sub/example"])
def test_a_toml_suffix_or_a_separator_is_always_a_path(tmp_path, monkeypatch, given):
    (tmp_path / "sub").mkdir()
    write_pack(tmp_path, MINIMAL_PACK, given)
    monkeypatch.chdir(tmp_path)
    path, label = resolve_pack_path(given)
    assert path.resolve() == (tmp_path / given).resolve() and label == given


def test_a_name_no_pack_is_registered_by_is_a_file_of_that_name(tmp_path, monkeypatch):
    assert "mine" not in shipped_packs()
    write_pack(tmp_path, MINIMAL_PACK, "mine")
    monkeypatch.chdir(tmp_path)
    path, label = resolve_pack_path("mine")
    assert path.resolve() == (tmp_path / "mine").resolve() and label == "mine"


def test_neither_a_registered_name_nor_a_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as unknown:
        resolve_pack_path("no_such_pack")
    message = str(unknown.value)
    assert "\n" not in message
    assert message.startswith("pack 'no_such_pack': no such pack (shipped: ") and "example" in message
    with pytest.raises(InputError, match=r"^missing\.toml: pack file not found$"):
        resolve_pack_path("missing.toml")


@pytest.mark.parametrize("command", ["show", "regions", "bounds", "predict"])
def test_the_help_of_every_pack_command_states_the_rule(command):
    cli = shutil.which("recallkit")
    assert cli is not None
    shown = subprocess.run([cli, "theory", command, "--help"], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "COLUMNS": "400"})
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.replace("│", " ").split())
    assert "a registered pack's name wins over a file or folder of that name" in text, text
    assert "./NAME, DIR/NAME or NAME.toml is a path" in text, text
