"""Running the `servefit` CLI in-process, as a user runs it from a shell."""

from __future__ import annotations

import pytest

from servefit.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `servefit ARGV...`; main() always ends in SystemExit."""
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    return exc.value.code, out, err
