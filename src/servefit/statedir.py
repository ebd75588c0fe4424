"""Where servefit keeps what it writes for the user: runs, calibration entries."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir(env: str, name: str) -> Path:
    """$`env`, else $XDG_STATE_HOME/servefit/`name` (~/.local/state/servefit/`name`)."""
    given = os.environ.get(env)
    if given:
        return Path(given).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(state) / "servefit" / name
