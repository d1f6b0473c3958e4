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
    # Values Placement would refuse half-way through building the fleet (a traceback before).
    (("count = 3", "count = 3\ndisk_gb = -1"), "fleet.hosts[0].disk_gb"),
    (("count = 3", "count = 3\ncpu_allocation_ratio = -1.0"), "fleet.hosts[0].cpu_allocation_ratio"),
    (("count = 3", "count = 3\ncpu_allocation_ratio = inf"), "fleet.hosts[0].cpu_allocation_ratio"),
    (("count = 3", "count = 3\nreserved_memory_mb = 999999999"), "fleet.hosts[0].reserved_memory_mb"),
    (("count = 3", 'count = 3\ntraits = ["lowercase"]'), "fleet.hosts[0].traits"),
    (("count = 3", 'count = 3\nkind = "ironic"\nnode_class = "gold-1"'), "fleet.hosts[0].node_class"),
    (("count = 3", 'count = 3\nkind = "numa"\nvcpus = 1\nnuma_nodes = 2'), "fleet.hosts[0]"),
    (("count = 3", 'count = 3\nkind = "gpu-nic"\nnics = 1\nphysnet = "net 0"'), "fleet.hosts[0].physnet"),
    # A fleet too large to build, and a division by zero or a negative duration at run time.
    (("count = 3", "count = 99999999999"), "fleet.hosts[0].count"),
    (("count = 3", "count = 150000\n[[fleet.hosts]]\nname = \"g\"\ncount = 150000"), "fleet.hosts"),
    (("[[designs]]", "[lifetimes]\nmean_s = 0\n[[designs]]"), "lifetimes.mean_s"),
    (("[[designs]]", "[lifetimes]\nmean_s = nan\n[[designs]]"), "lifetimes.mean_s"),
    (("[[designs]]", "[arrivals]\nrate_per_s = inf\n[[designs]]"), "arrivals.rate_per_s"),
    (("[[designs]]", "[arrivals]\nbursts = [{at_s = -1.0, count = 3}]\n[[designs]]"), "arrivals.bursts[0].at_s"),
    (("[[designs]]", "[timing]\nfill_sample_s = 0\n[[designs]]"), "timing.fill_sample_s"),
    (("[[designs]]", "[timing]\nbuild_jitter = 2\n[[designs]]"), "timing.build_jitter"),
    (("[[designs]]", "[timing]\nbuild_s = -5\n[[designs]]"), "timing.build_s"),
    (('name = "sc"', 'name = "sc"\nmultipliers = {ram_weight_multiplier = nan}'), "designs[0].multipliers"),
    # Flavors that ask for nothing, or for traits no Placement could know.
    (("vcpus = 1", "vcpus = -1"), "flavors[0].vcpus"),
    (("vcpus = 1\nmemory_mb = 512", "vcpus = 0\nmemory_mb = 0"), "flavors[0]"),
    (("memory_mb = 512", 'memory_mb = 512\nimage_traits = ["avx2"]'), "flavors[0].image_traits"),
    (("memory_mb = 512", 'memory_mb = 512\nextra_specs = {"trait:nope" = "required"}'), "flavors[0].extra_specs"),
    # ... or for what the scheduler does not model (it would be placed as if it had not asked)
    (("memory_mb = 512", 'memory_mb = 512\nextra_specs = {"hw:numa_nodes" = "2"}'),
     "flavors[0].extra_specs: hw:numa_nodes: guest NUMA topologies"),
])
def test_bad_scenarios_name_file_and_key(tmp_path, change, where):
    path = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(scenario.ScenarioError) as err:
        scenario.load(path)
    assert str(path) in str(err.value) and where in str(err.value)


def test_the_shipped_scenarios_and_traits_of_both_kinds_load(tmp_path):
    import pathlib

    for path in sorted(pathlib.Path(__file__).parents[2].joinpath("scenarios").glob("*.toml")):
        scenario.load(path)
    text = GOOD.replace("count = 3", 'count = 3\ntraits = ["HW_CPU_X86_AVX2", "CUSTOM_FAST"]')
    assert scenario.load(write(tmp_path, text)).fleet.hosts[0].traits == ["HW_CPU_X86_AVX2", "CUSTOM_FAST"]


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


@pytest.mark.parametrize("content, message", [
    (b"arrival_s,flavor\n1.0,f\n2.0\n", r"t\.csv:3: expected at least arrival_s and flavor"),
    (b"arrival_s,flavor\n\x8a\xff,f\n", "not a CSV trace: not UTF-8 text"),
    (None, "cannot read the trace: Is a directory"),
])
def test_a_broken_trace_is_one_line_naming_it(tmp_path, content, message):
    if content is None:
        (tmp_path / "t.csv").mkdir()
    else:
        (tmp_path / "t.csv").write_bytes(content)
    path = write(tmp_path, GOOD + '[arrivals]\ntrace = "t.csv"\n')
    with pytest.raises(scenario.ScenarioError, match=message):
        scenario.load(path)


def test_a_binary_scenario_is_not_valid_toml(tmp_path):
    path = tmp_path / "s.toml"
    path.write_bytes(b"\x8a\xff\x00garbage")
    with pytest.raises(scenario.ScenarioError, match="not valid TOML: not UTF-8 text"):
        scenario.load(path)


def test_a_bad_placement_url_creates_no_out_directory(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["simulate", str(write(tmp_path, GOOD)), "--out", str(out), "--placement-url", "ftp://x"]
    assert main(argv) == 2
    assert "--placement-url" in capsys.readouterr().err and not out.exists()
