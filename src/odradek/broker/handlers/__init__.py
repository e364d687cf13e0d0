"""One module per API key, named so they sort by key (k00_produce, k01_fetch, ...).

Importing a module registers its handler; `load_handlers` imports them all once at start-up.
"""

import importlib
import pkgutil


def load_handlers() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("k"):
            importlib.import_module(f"{__name__}.{info.name}")
