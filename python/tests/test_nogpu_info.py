"""Without a GPU: the deprecated shortcut getters made from INFO_FIELDS (the one description of
``info``)."""

import pytest

import sized_readback as srb
from sized_readback import _native

# The getters each class had before info described them (live state excepted).
SHORTCUTS = {
    "Readback": {"capacity", "slots", "transport", "staged_copy", "device"},
    "GraphReadback": {"capacity", "slots", "device"},
    "AppendReadback": {"capacity", "slots", "spill_capacity", "transport", "staged_copy", "device"},
}


class _Info:
    """Stands in for a readback: the getters read only ``info``."""

    info = {"capacity": 4096, "slots": 3, "spill_capacity": 64, "transport": "staged",
            "staged_copy": "whole", "device": 1}


def test_info_fields_describe_the_dict_in_order():
    names = [name for name, _doc, _classes in _native.INFO_FIELDS]
    assert names == ["capacity", "slots", "buckets", "spill_capacity", "transport", "staged_copy",
                     "wait_mode", "device", "slot_bytes", "column_offsets", "trailer_offset",
                     "programmatic_launch", "kernel_image", "auto_staged_slots"]
    assert all(doc for _name, doc, _classes in _native.INFO_FIELDS)


def test_shortcut_getters_warn_and_return_the_info_entry():
    made = {cls: set() for cls in SHORTCUTS}
    for name, _doc, classes in _native.INFO_FIELDS:
        for cls in classes:
            made[cls].add(name)
    assert made == SHORTCUTS
    for cls, names in SHORTCUTS.items():
        for name in names:
            getter = getattr(getattr(srb, cls), name)
            assert isinstance(getter, property) and "Deprecated" in getter.__doc__
            with pytest.warns(DeprecationWarning, match=rf'use rb.info\["{name}"\]'):
                assert getter.fget(_Info()) == _Info.info[name]


def test_live_state_getters_are_not_deprecated():
    for cls, name in [("Readback", "slots_in_use"), ("Readback", "auto_staged_from"),
                      ("AppendReadback", "slots_in_use"), ("GraphReadback", "next_seq"),
                      ("GraphReadback", "last_overrun"), ("GraphReadback", "closed")]:
        assert not isinstance(getattr(getattr(srb, cls), name), property), (cls, name)
