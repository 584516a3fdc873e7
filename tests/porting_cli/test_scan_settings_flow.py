"""`pin_memory` in a dict of settings is a finding only where the dict reaches a loader (issue 45, item 4)."""

from __future__ import annotations

import pytest

from porting_cli.analysis.scan import scan_source

REACHES = [  # (source, the line of the NC214 finding)
    # pytorch/examples mnist: merged into the loader's kwargs, then unpacked into DataLoader
    ("import torch\ntrain_kwargs = {'batch_size': 1}\nif use_accel:\n"
     "    accel_kwargs = {'num_workers': 1, 'pin_memory': True}\n    train_kwargs.update(accel_kwargs)\n"
     "loader = torch.utils.data.DataLoader(ds, **train_kwargs)\n", 4),
    ("from torch.utils.data import DataLoader\nloader = DataLoader(ds, **{'pin_memory': True})\n", 2),
    ("kw = {}\nkw['pin_memory'] = True\nloader = DataLoader(ds, **kw)\n", 2),
    ("kw = dict(batch_size=2, pin_memory=True)\nloader = DataLoader(ds, **kw)\n", 1),
    ("kw = {}\nkw.update(pin_memory=True)\nloader = build_dataloader(**kw)\n", 2),
    ("base = {'pin_memory': True}\nkw = {**base, 'shuffle': True}\nloader = DataLoader(ds, **kw)\n", 1),
    ("import copy\nbase = {'pin_memory': True}\nkw = copy.deepcopy(base)\nloader = DataLoader(ds, **kw)\n", 2),
    ("base = {'pin_memory': True}\nkw = {}\nkw |= base\nloader = DataLoader(ds, **kw)\n", 1),
    ("class Data:\n    def __init__(self):\n        self.kw = {'pin_memory': True}\n"
     "    def loader(self):\n        return DataLoader(ds, **self.kw)\n", 3),
    # a loader-building function of the script is a loader wrapper
    ("def make(ds, **kw):\n    return DataLoader(ds, **kw)\ncfg = {'pin_memory': True}\nloader = make(ds, **cfg)\n", 3),
    # DeepSpeed pins host memory for a ZeRO offload itself
    ("ds_config = {'train_batch_size': 8,\n"
     "             'zero_optimization': {'offload_optimizer': {'device': 'cpu', 'pin_memory': True}}}\n", 2),
]

SETTINGS_ONLY = [
    "import json\nsettings = {'batch_size': 1, 'pin_memory': True}\njson.dump(settings, f)\n",
    "kw = {}\nkw['pin_memory'] = True\nprint(kw)\n",
    "kw = dict(batch_size=2, pin_memory=True)\nwandb.config.update(kw)\n",
    "kw = {}\nkw.update(pin_memory=True)\nlogger.info(kw)\n",
    # merged into a dict that is only logged, while another dict reaches the loader
    "extra = {'pin_memory': True}\nlogged = {}\nlogged.update(extra)\nprint(logged)\n"
    "loader = DataLoader(ds, **{'batch_size': 2})\n",
    "loader = DataLoader(ds, **{'pin_memory': False})\n",
]


@pytest.mark.parametrize("source, line", REACHES)
def test_a_pin_memory_setting_that_reaches_a_loader_is_a_finding(source, line):
    assert [(f.line, f.rule_id) for f in scan_source(source).findings] == [(line, "NC214")]


@pytest.mark.parametrize("source", SETTINGS_ONLY)
def test_a_pin_memory_setting_shown_to_reach_no_loader_is_no_finding(source):
    assert scan_source(source).findings == []
