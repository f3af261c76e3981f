"""Commands that work on search experiments only refuse a system's own kind of file in one line, naming the
file and saying where it is run instead (through the installed command)."""
import shutil
import subprocess

import pytest

CLI = shutil.which("recallkit")


@pytest.mark.parametrize("command, tail", [
    (["sweep"], "not a search experiment (its system runs it: recallkit report)"),
    (["results"], "not a search experiment (its system draws its own report pages)"),
    (["figures"], "not a search experiment (its system draws its own report pages); recallkit figures draws "
                  "search experiments"),
])
def test_a_systems_own_kind_is_refused_in_one_line(command, tail, tmp_path):
    assert CLI is not None
    result = subprocess.run([CLI, *command, "geometric_construction"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("error: ") and lines[0].endswith("geometric_construction.toml: " + tail)
