"""Where a servefit package's data files are: the package's own folder.

servefit is installed as files (a wheel unpacked by pip, or an editable checkout), never run
from a zip, so a table beside a module is a plain file next to its `__file__`.
`importlib.resources` answers the same for that case but imports tempfile, shutil, random and
zipfile on the way: 14 ms of a 0.25 s `servefit plan`.
"""

from __future__ import annotations

import importlib
from pathlib import Path


def package_dir(package: str) -> Path:
    """The folder of the (imported, or importable) package `package`."""
    module = importlib.import_module(package)
    paths = getattr(module, "__path__", None)
    if not paths:
        raise ValueError(f"{package} is a module, not a package")
    return Path(next(iter(paths)))
