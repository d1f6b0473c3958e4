"""Scenario files: good ones load, bad ones say which file and key."""
import pytest

from billeting.cli import main
from billeting.sim import scenario, workload

GOOD = """
name = "t"
[fleet]
[[fleet.hosts]]
name = "h"
count = 3
[[flavors]]
name = "f"
vcpus = 1
memory_mb = 512
[[designs]]
name = "sc"
design = "scheduler-claims"
"""


def write(tmp_path, text, name="s.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_good_scenario_loads_with_defaults(tmp_path):
    s = scenario.load(write(tmp_path, GOOD))
    assert s.host_count == 3 and s.candidates_limit == 1000 and s.designs[0].alternates == 2


@pytest.mark.parametrize("change, where", [
    (("count = 3", 'count = "x"'), "fleet.hosts[0].count"),
    (("vcpus = 1", "vcpus = 1\ncolour = 2"), "flavors[0]"),
    (('design = "scheduler-claims"', 'design = "magic"'), "designs[0].design"),
    (("count = 3", "count = 0"), "fleet.hosts[0].count"),
    (('name = "sc"', 'name = "sc"\nalternates = -1'), "designs[0]"),
])
def test_bad_scenarios_name_file_and_key(tmp_path, change, where):
    path = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(scenario.ScenarioError) as err:
        scenario.load(path)
    assert str(path) in str(err.value) and where in str(err.value)


def test_bad_toml_and_missing_file(tmp_path):
    with pytest.raises(scenario.ScenarioError, match="not valid TOML"):
        scenario.load(write(tmp_path, "name = "))
    with pytest.raises(scenario.ScenarioError, match="no such file"):
        scenario.load(tmp_path / "nope.toml")


def test_cli_exits_2_without_a_traceback(tmp_path, capsys):
    path = write(tmp_path, GOOD.replace("count = 3", "count = -1"))
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "fleet.hosts[0].count" in err and "Traceback" not in err
    assert main(["simulate", str(write(tmp_path, GOOD, "ok.toml")), "--designs", "nonsense"]) == 2


def test_trace_replay(tmp_path):
    write(tmp_path, "arrival_s,flavor,lifetime_s,group\n2.5,f,10,\n1.0,f,,ha#1\n1.5,f,5,ha#1\n", "t.csv")
    text = GOOD + '[arrivals]\ntrace = "t.csv"\n[[groups]]\nname = "ha"\npolicy = "anti-affinity"\nflavor = "f"\n'
    s = scenario.load(write(tmp_path, text))
    arrivals = workload.generate(s)
    assert [a.at_s for a in arrivals] == [1.0, 1.5, 2.5]
    assert arrivals[0].group is arrivals[1].group and arrivals[0].group.key == "ha#1"
    assert arrivals[1].lifetimes == (5.0,) and arrivals[2].group is None
    bad = text.replace("2.5,f", "2.5,nope")
    write(tmp_path, "arrival_s,flavor,lifetime_s,group\n2.5,nope,10,\n", "t.csv")
    with pytest.raises(scenario.ScenarioError, match="no flavor named 'nope'"):
        scenario.load(write(tmp_path, bad))
