"""The cabling plan: both forms and CSV files load into one cable list; bad plans are refused with file, line and
JSON path before anything is read from the fabric (pure: files in tmp_path and the corpus only)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from fabricproof.errors import InputError
from fabricproof.subnet.plan import PlanEnd, Role, load_plan, parse_csv

IB_FABRIC = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "ib-fabric"
HOST_CSV = IB_FABRIC / "ndt-plan-switch-to-host-2223-links-director-fabric.csv"
SWITCH_CSV = IB_FABRIC / "ndt-plan-switch-to-switch-6390-links-director-fabric.csv"

LAB_FORM = """\
kind: FabricPlan
version: 1
name: lab
defaults: {width: 4x, speed: HDR}
links:
  - {a: "node01 mlx5_0", a_port: 1, b: leaf-su1-r0, b_port: 1}
  - {a: leaf-su1-r0, a_port: 33, b: spine-1, b_port: 1, speed: HDR}
  - {a: leaf-su1-r0, a_port: 34, b: spine-2, b_port: 1, width: 2x, speed: EDR}
"""

RAILS = """\
kind: FabricPlan
version: 1
name: rails
defaults: {width: 4x, speed: NDR}
rails:
  hosts: {group: gpu}
  su_size: 4
  count: 2
  leaf: "leaf-su{su}-r{rail}"
  spines: {name: "spine-{n}", count: 3}
  uplinks: 3
"""


def write(tmp_path: Path, text: str, name: str = "plan.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems(exc: pytest.ExceptionInfo[InputError]) -> list[tuple[str, int | None, str, str]]:
    return [(Path(p.file).name, p.line, p.pointer, p.message) for p in exc.value.problems]


def test_the_lab_form_loads_with_defaults_and_per_cable_rates(tmp_path):
    plan = load_plan(write(tmp_path, LAB_FORM))
    assert plan.name == "lab"
    assert [(lk.a, lk.b, lk.width, lk.speed) for lk in plan.links] == [
        (PlanEnd("node01 mlx5_0", 1), PlanEnd("leaf-su1-r0", 1), "4x", "HDR"),
        (PlanEnd("leaf-su1-r0", 33), PlanEnd("spine-1", 1), "4x", "HDR"),
        (PlanEnd("leaf-su1-r0", 34), PlanEnd("spine-2", 1), "2x", "EDR"),
    ]
    assert [lk.where for lk in plan.links] == [f"{tmp_path / 'plan.yaml'}:{n}" for n in (6, 7, 8)]
    assert plan.roles() == {"leaf-su1-r0": Role("leaf", "1", 0), "spine-1": Role("spine"), "spine-2": Role("spine")}


def test_a_json_plan_loads_like_yaml(tmp_path):
    path = write(tmp_path, '{"kind": "FabricPlan", "version": 1, "name": "j", "links": '
                 '[{"a": "0x0c42a10300a9b026", "a_port": 3, "b": "spine-1", "b_port": 2}]}', "plan.json")
    assert [(lk.a, lk.b, lk.width) for lk in load_plan(path).links] == [
        (PlanEnd("0x0c42a10300a9b026", 3), PlanEnd("spine-1", 2), None)]


def test_a_json_plan_names_its_cables_by_json_path_and_refuses_a_port_twice(tmp_path):
    """Its lines would cost a second parse of the whole plan (a 25,000-cable plan: 0.2 s read, 2 s more for lines)."""
    cable = '{"a": "n1 mlx5_0", "a_port": 1, "b": "leaf-1", "b_port": 1}'
    path = write(tmp_path, f'{{"kind": "FabricPlan", "version": 1, "name": "j", "links": [{cable}]}}', "p.json")
    assert [lk.where for lk in load_plan(path).links] == [f"{path} /links/0"]
    path.write_text(f'{{"kind": "FabricPlan", "version": 1, "name": "j", "links": [{cable}, {cable.replace("n1", "n2")}]}}')
    with pytest.raises(InputError) as exc:
        load_plan(path)
    assert problems(exc) == [("p.json", None, "/links/1", f"leaf-1 port 1 is planned twice (also at {path} /links/0)")]


def test_the_corpus_ndt_csvs_load_every_row():
    hosts = parse_csv(HOST_CSV.read_text(), str(HOST_CSV))
    switches = parse_csv(SWITCH_CSV.read_text(), str(SWITCH_CSV))
    assert (len(hosts), len(switches)) == (2223, 6390)
    # a host row: StartDevice is the system, StartPort the HCA's node description (its port 1)
    assert (hosts[0].a, hosts[0].b) == (PlanEnd("SAT111092710053 ibp11s0f0", 1), PlanEnd("SAT11-0101-0927-20IB0", 1))
    assert hosts[0].where == f"{HOST_CSV}:2"
    # a director port "Blade 16_Port 2/20" is port 20 of ASIC U2 on leaf blade L16 of the chassis
    assert (switches[0].a, switches[0].b) == (PlanEnd("SAT11-0101-0927-20IB0", 21),
                                              PlanEnd("SAT11-0101-0903-01IB1-A/L16/U2", 20))
    assert switches[-1].where == f"{SWITCH_CSV}:6391"


@pytest.mark.parametrize("name, line, words", [
    ("ndt-plan-NEGATIVE-missing-startport-column.csv", 1, "the header lacks column StartPort"),
    ("ndt-plan-NEGATIVE-invalid-port-names.csv", 2, "port 'abra' of SAT11-0101-0927-20IB0 is not 'Port N'"),
])
def test_the_corpus_negative_csvs_are_refused_with_file_and_line(tmp_path, name, line, words):
    with pytest.raises(InputError) as exc:
        load_plan(write(tmp_path, f"kind: FabricPlan\nversion: 1\nname: n\ninclude: [{IB_FABRIC / name}]\n"))
    (file, at, _, message), = problems(exc)
    assert (file, at) == (name, line) and words in message
    assert str(exc.value).startswith(f"{IB_FABRIC / name}:{line}: ")


def test_a_plan_includes_csv_files_beside_it_and_mixes_them_with_its_own_cables(tmp_path):
    (tmp_path / "more.csv").write_text("#StartDevice,StartPort,EndDevice,EndPort,LinkType\r\n"
                                       "node02,node02 mlx5_0,leaf-su1-r0,Port 2, Data\r\n\r\n"
                                       "leaf-su1-r0,35,spine-3,port 1,Data\r\n")
    plan = load_plan(write(tmp_path, LAB_FORM + "include: [more.csv]\n"))
    assert [(lk.a, lk.b, lk.width, lk.speed, Path(lk.where).name) for lk in plan.links[3:]] == [
        (PlanEnd("node02 mlx5_0", 1), PlanEnd("leaf-su1-r0", 2), "4x", "HDR", "more.csv:2"),
        (PlanEnd("leaf-su1-r0", 35), PlanEnd("spine-3", 1), "4x", "HDR", "more.csv:4"),
    ]


def test_the_rails_rule_expands_into_cables(tmp_path):
    hosts = [f"node{i:02d}" for i in range(1, 9)]
    plan = load_plan(write(tmp_path, RAILS), groups={"gpu": hosts, "other": ["x"]})
    host_cables = [(lk.a, lk.b) for lk in plan.links if " " in lk.a.device]
    uplinks = [(lk.a, lk.b) for lk in plan.links if " " not in lk.a.device]
    assert len(host_cables) == 8 * 2 and len(uplinks) == 4 * 3
    # rail r of host i of SU u on leaf-su{u}-r{r} port i+1
    assert host_cables[:2] == [(PlanEnd("node01 mlx5_0", 1), PlanEnd("leaf-su1-r0", 1)),
                               (PlanEnd("node01 mlx5_1", 1), PlanEnd("leaf-su1-r1", 1))]
    assert (PlanEnd("node06 mlx5_1", 1), PlanEnd("leaf-su2-r1", 2)) in host_cables
    # uplinks from port su_size+1, round-robin over the spines, each spine's ports in order
    assert uplinks[:4] == [(PlanEnd("leaf-su1-r0", 5), PlanEnd("spine-1", 1)),
                           (PlanEnd("leaf-su1-r0", 6), PlanEnd("spine-2", 1)),
                           (PlanEnd("leaf-su1-r0", 7), PlanEnd("spine-3", 1)),
                           (PlanEnd("leaf-su1-r1", 5), PlanEnd("spine-1", 2))]
    assert {lk.speed for lk in plan.links} == {"NDR"}
    assert plan.roles()["leaf-su2-r1"] == Role("leaf", "2", 1) and plan.roles()["spine-3"] == Role("spine")


def test_the_rails_rule_takes_a_host_list_hca_names_and_spine_names(tmp_path):
    plan = load_plan(write(tmp_path, """\
        kind: FabricPlan
        version: 1
        name: r
        rails: {hosts: [a1, a2, a3], su_size: 2, hcas: [ibp11s0f0, ibp21s0f0], leaf: "L{su}-{rail}",
                spines: [S1, S2], uplinks: 1, uplink_port: 33}
        """))
    assert [(str(lk.a), str(lk.b)) for lk in plan.links] == [
        ("a1 ibp11s0f0 port 1", "L1-0 port 1"), ("a1 ibp21s0f0 port 1", "L1-1 port 1"),
        ("a2 ibp11s0f0 port 1", "L1-0 port 2"), ("a2 ibp21s0f0 port 1", "L1-1 port 2"),
        ("a3 ibp11s0f0 port 1", "L2-0 port 1"), ("a3 ibp21s0f0 port 1", "L2-1 port 1"),
        ("L1-0 port 33", "S1 port 1"), ("L1-1 port 33", "S2 port 1"), ("L2-0 port 33", "S1 port 2"),
        ("L2-1 port 33", "S2 port 2")]
    assert plan.rail_of("ibp21s0f0") == 1


BAD = [
    ("kind: FabricPlan\nversion: 1\nname: x\nlinkz: []\n", 4, "/linkz", "unknown key 'linkz'; did you mean 'links'?"),
    ("kind: FabricPlan\nversion: 1\nname: x\nlinks:\n  - {a: n1 mlx5_0, a_port: one, b: l1, b_port: 1}\n", 5,
     "/links/0/a_port", "'one' is not of type 'integer'"),
    ("kind: FabricPlan\nversion: 1\nname: x\ndefaults: {width: 4X}\n", 4, "/defaults/width",
     "'4X' is not one of ['1x', '2x', '4x', '8x', '12x']"),
    ("kind: Baseline\nversion: 1\nname: x\n", 1, "/kind", "'FabricPlan' was expected"),
    ("kind: FabricPlan\nversion: 1\nname: x\nlinks:\n  - {a: l1, a_port: 3, b: l1, b_port: 3}\n", 5, "/links/0",
     "a cable from l1 port 3 to itself"),
    ("kind: FabricPlan\nversion: 1\nname: x\ninclude: [nothere.csv]\n", 4, "/include/0", "nothere.csv: file not found"),
    ("kind: FabricPlan\nversion: 1\nname: x\nrails: {hosts: {group: gpu}, su_size: 2, leaf: 'l{su}-{rail}', spines: [s],"
     " uplinks: 1}\n", 4, "/rails/hosts/group", "the hosts of group 'gpu' need the inventory"),
    ("kind: FabricPlan\nversion: 1\nname: x\nrails: {hosts: [a, b], su_size: 2, leaf: 'l{su}', spines: [s],"
     " uplinks: 1}\n", 4, "/rails/leaf", "pattern 'l{su}' gives 'l1' to two leaves: use both {su} and {rail}"),
    ("kind: FabricPlan\nversion: 1\nname: x\nrails: {hosts: [a], su_size: 2, leaf: 'l{su}-{rack}', spines: [s],"
     " uplinks: 1}\n", 4, "/rails/leaf", "pattern 'l{su}-{rack}' cannot be filled"),
    ("kind: FabricPlan\nversion: 1\nname: x\nrails: {hosts: [a], su_size: 2, leaf: 'l{su}-{rail}', spines: [s],"
     " uplinks: 1, uplink_port: 2}\n", 4, "/rails/uplink_port", "uplink port 2 is a host port (hosts take ports 1-2)"),
]


@pytest.mark.parametrize("text, line, pointer, words", BAD, ids=[b[2] + ":" + b[3][:20] for b in BAD])
def test_a_bad_plan_is_refused_with_file_line_and_json_path(tmp_path, text, line, pointer, words):
    with pytest.raises(InputError) as exc:
        load_plan(write(tmp_path, text))
    found = problems(exc)
    assert any(p[:3] == ("plan.yaml", line, pointer) and words in p[3] for p in found), found
    assert str(exc.value).splitlines()[0].startswith(f"{tmp_path / 'plan.yaml'}:{line}: at {pointer} ")


def test_a_group_the_inventory_lacks_is_refused(tmp_path):
    with pytest.raises(InputError) as exc:
        load_plan(write(tmp_path, RAILS), groups={"cpu": ["c1"]})
    assert problems(exc) == [("plan.yaml", 6, "/rails/hosts/group", "no group 'gpu' in the inventory")]


def test_a_port_planned_twice_names_both_places(tmp_path):
    (tmp_path / "more.csv").write_text("StartDevice,StartPort,EndDevice,EndPort\nnode09,node09 mlx5_0,leaf-su1-r0,1\n")
    with pytest.raises(InputError) as exc:
        load_plan(write(tmp_path, LAB_FORM + "include: [more.csv]\n"))
    assert problems(exc) == [("more.csv", 2, "", f"leaf-su1-r0 port 1 is planned twice (also at "
                                                 f"{tmp_path / 'plan.yaml'}:6)")]


def test_a_csv_row_with_too_few_fields_or_an_empty_device_names_its_line(tmp_path):
    csv = tmp_path / "bad.csv"
    csv.write_text("StartDevice,StartPort,EndDevice,EndPort,LinkType\nl1,1,l2\n,1,l2,2,Data\nl1,Port 300,l2,2,Data\n")
    with pytest.raises(InputError) as exc:
        parse_csv(csv.read_text(), str(csv))
    assert [(p.line, p.message) for p in exc.value.problems] == [
        (2, "3 fields, the header has 5"), (3, "empty StartDevice"), (4, "port 'Port 300' is out of range (1-255)")]


def test_a_cable_written_again_from_its_other_end_counts_once(tmp_path):
    (tmp_path / "both.csv").write_text("StartDevice,StartPort,EndDevice,EndPort\nl1,40,dir-A,Blade 20_Port 2/1\n"
                                       "dir-A,Blade 20_Port 2/1,l1,Port 40\n")
    plan = load_plan(write(tmp_path, "kind: FabricPlan\nversion: 1\nname: n\ninclude: [both.csv]\n"))
    assert [(lk.a, lk.b, Path(lk.where).name) for lk in plan.links] == [
        (PlanEnd("l1", 40), PlanEnd("dir-A/L20/U2", 1), "both.csv:2")]


def test_the_readmes_plan_example_loads(tmp_path):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    example = readme.split("### Fabric plans", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "cabling.csv").write_text("#StartDevice,StartPort,EndDevice,EndPort,LinkType\n"
                                          "login02,login02 mlx5_0,leaf-mgmt,Port 2, Data\n")
    plan = load_plan(write(tmp_path, example), groups={"gpu": [f"node{i:02d}" for i in range(1, 65)]})
    # 2 explicit + 1 CSV + 64 hosts x 8 rails + 16 leaves x 16 uplinks
    assert len(plan.links) == 2 + 1 + 64 * 8 + 16 * 16
    assert plan.roles()["leaf-mgmt"] == Role("leaf") and plan.roles()["leaf-su2-r7"] == Role("leaf", "2", 7)


def test_one_cable_planned_twice_at_different_rates_is_refused(tmp_path):
    with pytest.raises(InputError) as exc:
        load_plan(write(tmp_path, LAB_FORM + "  - {a: spine-1, a_port: 1, b: leaf-su1-r0, b_port: 33, speed: NDR}\n"))
    assert problems(exc) == [("plan.yaml", 9, "", f"the cable spine-1 port 1 to leaf-su1-r0 port 33 is planned at 4x "
                                                   f"NDR here and at 4x HDR at {tmp_path / 'plan.yaml'}:7")]


def test_an_explicit_plans_roles_come_from_its_cables(tmp_path):
    """Leaves cabled to the same hosts are one scalable unit; a switch cabled to leaves is a spine, above it core."""
    hosts = [f"node{i:02d}" for i in range(1, 9)]
    rule = load_plan(write(tmp_path, RAILS), groups={"gpu": hosts})
    listed = "".join(f"  - {{a: {lk.a.device}, a_port: {lk.a.port}, b: {lk.b.device}, b_port: {lk.b.port}}}\n"
                     for lk in rule.links)
    plan = load_plan(write(tmp_path, "kind: FabricPlan\nversion: 1\nname: x\nlinks:\n" + listed
                           + "  - {a: spine-1, a_port: 40, b: core-1, b_port: 1}\n", "listed.yaml"))
    assert {k: v for k, v in plan.roles().items() if k != "core-1"} == rule.roles()
    assert plan.roles()["core-1"] == Role("core")
