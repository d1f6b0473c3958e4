"""A module of filters registers by being there: ``filters`` imports every
``*_filters`` module of its package, so adding one needs no edit elsewhere."""
from __future__ import annotations

import sys
import textwrap

from billeting.scheduler import filters
from billeting.scheduler.filter_base import REGISTRY


def test_the_built_in_modules_of_filters_are_found():
    assert filters.import_filter_modules() == ["aggregate_filters", "capability_filters"]
    assert {"ComputeCapabilitiesFilter", "ImagePropertiesFilter", "AggregateInstanceExtraSpecsFilter",
            "NumInstancesFilter"} <= set(REGISTRY)


def test_a_new_module_of_filters_registers_without_an_import_line(tmp_path, monkeypatch):
    package = tmp_path / "extra_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "rack_filters.py").write_text(textwrap.dedent("""
        from billeting.scheduler.filter_base import Filter

        class OddRackFilter(Filter):
            name = "OddRackFilter"
            cost = 1
            explains = "were on even racks"

            def passes(self, host, decision):
                return True
    """))
    (package / "helpers.py").write_text("raise AssertionError('only *_filters modules are imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert filters.import_filter_modules("extra_pkg") == ["rack_filters"]
        assert REGISTRY["OddRackFilter"].__module__ == "extra_pkg.rack_filters"
        assert [f.name for f in filters.build(("OddRackFilter",))] == ["OddRackFilter"]
    finally:
        REGISTRY.pop("OddRackFilter", None)
        for name in [m for m in sys.modules if m == "extra_pkg" or m.startswith("extra_pkg.")]:
            del sys.modules[name]
