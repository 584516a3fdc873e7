"""Per-class fixes for the Diffusers tiny-config builder, as data.

The rules of `shrink.py` build most classes from their default config. Where they cannot, an
entry here names the class and the constructor arguments to apply after shrinking, or a `SKIP`
reason. Every entry says why it exists, so it can be dropped when Diffusers changes.
"""

from __future__ import annotations

from typing import Any

OVERRIDES: dict[str, dict[str, Any]] = {
}

SKIP: dict[str, str] = {
}
