"""The flex attention suite as the engine and the CLI see it: `neuron-check flex-attention`.

Items are ("flex_attention", subject, forward|backward, dtype, eager|compile); subjects are the
score_mod / mask_mod variants of conformance/flex/variants.py. See docs/flex-attention.md.
"""

from __future__ import annotations

from conformance.flex.plan import SUITE as NAME
from conformance.flex.plan import FlexOptions
from conformance.suite import ModuleSuite

SUITE = ModuleSuite(name=NAME, command="flex-attention", options_type=FlexOptions, default_timeout_s=180.0,
                    planner="conformance.flex.plan:plan", runner="conformance.flex.run")
