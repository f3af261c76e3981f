import subprocess
import sys


def test_version_flag():
    from recallkit import __version__

    out = subprocess.run([sys.executable, "-m", "recallkit.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"recallkit {__version__}"
