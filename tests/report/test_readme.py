"""The README opens with its title, one line saying what servefit does, the two commands
(install and run the bundled example; install and test), then the seed's failing case; the
output it quotes is what `servefit plan` prints at 100 columns."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from servefit.cli.main import main

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_opening():
    lines = README.splitlines()
    assert lines[0] == "# servefit"
    assert lines[1] == "" and lines[2] and lines[4] == ""  # one sentence, two lines
    block = re.search(r"```bash\n(.*?)\n```", README, re.S).group(1).splitlines()
    assert len(block) == 2
    install_run, install_test = block
    assert " && pip install . && servefit plan " in install_run
    assert "--mem-fraction-static 0.85" in install_run  # the failing case, not its fix
    assert install_test.endswith("pip install -e '.[test]' && pytest -n auto")
    assert README.index("```bash") < README.index("## The case that started it")


def test_quoted_output_is_real(capsys, monkeypatch):
    """Every line the README quotes from the failing seed (the block after its first
    `$ servefit plan`) is a line plan prints, `...` marking what is left out."""
    m = re.search(r"```console\n\$ (servefit plan .*?)\n(FAILS:.*?)\n```", README, re.S)
    command = m.group(1).replace("\\\n", " ")
    quoted = [x for x in m.group(2).splitlines() if x != "..."]
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as exc:
        main(shlex.split(command)[1:])
    out = capsys.readouterr()[0].splitlines()
    assert exc.value.code == 1
    missing = [x for x in quoted if x not in out]
    assert not missing, missing
