"""theory.summary: a pack's default phase diagram is computed once per loaded pack, and again after an edit."""
from __future__ import annotations

import os

from recallkit.theory import summary
from recallkit.theory.pack import PACKS_DIR, load_pack


def test_the_diagram_is_kept_per_pack_and_an_edited_pack_gets_its_own(tmp_path):
    path = tmp_path / "mine.toml"
    text = (PACKS_DIR / "example.toml").read_text()
    path.write_text(text)
    pack = load_pack(path)
    first = summary.default_regions(pack)
    assert summary.default_regions(load_pack(path)) is first  # same file, same pack object, same diagram
    path.write_text(text.replace("box = { a = [0.75, 3], c = [-0.1, 1.1] }", "box = { a = [1, 2], c = [0, 1] }"))
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))  # a later mtime, whatever the clock
    edited = summary.default_regions(load_pack(path))
    assert edited is not first
    assert first.to_dict()["box"] != edited.to_dict()["box"]


def test_two_packs_of_one_name_and_label_do_not_share_a_diagram():
    # a shipped pack's label is "pack NAME", not a file: a cache keyed by name, label and file time mixed these up
    import tomllib

    from recallkit.theory.pack import pack_from_dict

    text = (PACKS_DIR / "example.toml").read_text()
    wide = pack_from_dict(tomllib.loads(text), "pack example")
    narrow = pack_from_dict(tomllib.loads(text.replace("box = { a = [0.75, 3], c = [-0.1, 1.1] }",
                                                       "box = { a = [1, 2], c = [0, 1] }")), "pack example")
    assert summary.default_regions(wide).to_dict()["box"] != summary.default_regions(narrow).to_dict()["box"]
