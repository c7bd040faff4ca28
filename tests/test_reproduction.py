"""Reproductions (reproduction.py): the one-factor-at-a-time ablation flips exactly the
assumptions that differ from the other profile and reports Δ = flipped − as run (checked here
against the stored runs); the reading says "disagrees" when the numbers do; ``--report`` writes
one self-contained page that a headless browser loads; bad input exits 2 with one line."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numasim import experiment as ex
from numasim import profile_table, reproduction
from numasim.cli import main

TINY = """
name = "tiny-repro"
title = "origin-aware vs linux26 on a 4-cell Superdome"
source = "a test"
machines = ["hp-superdome-4"]
baseline = "linux26@multilevel"
policies = ["origin-aware@multilevel"]
replications = 3
seed = 11

[assumptions]
memory = {{ value = "parent", source = "a sentence of the paper about memory" }}

[[workload]]
name = "io"
spec = "kind=io,exec=10-100,wait=50,arrival=uniform:300"

[sweep]
n = [20, 40, 60]

[reference]
source = "Table 9 (§9)"
quote = "the policy wins"
rows = [{rows}]
"""
ROWS = (
    '{ workload = "io", n = 20, baseline = 100, policy = 95 }, '
    '{ workload = "io", n = 40, gain_pct = 6.0 }, '
    '{ workload = "io", n = 60, gain_pct = 7.0 }'
)


def tiny(d: Path, rows: str = ROWS) -> Path:
    path = d / "tiny-repro.toml"
    path.write_text(TINY.format(rows=rows))
    return path


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory):
    """One ``reproduce --ablate --report`` of the tiny file: (experiment file, out dir, page)."""
    d = tmp_path_factory.mktemp("repro")
    out, page = d / "out", d / "pages" / "tiny.html"
    page.parent.mkdir()
    args = ["reproduce", str(tiny(d)), "--out", str(out), "--jobs", "1", "--ablate",
            "--report", str(page)]  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_DATA_HOME", str(d / "data"))  # no fitted profile of the user's
        assert main(args) == 0
    return tiny(d), out, page


def test_the_ablation_flips_exactly_what_differs_from_the_other_profile(reproduced):
    path, out, _ = reproduced
    p = reproduction.plan(ex.load(path))
    # The file runs the kernel26 profile with memory=parent (the paper's value): only slice and
    # wake differ from the paper profile; exec, cost and remote, which both profiles read alike, are
    # flipped to their other value; of the open choices only origin-aware's si applies (an IO
    # workload with uniform arrivals: neither m nor the random window).
    assert (p.current, p.other) == ("kernel26", "paper")
    assert [(f.name, f.value, f.flipped, f.choice) for f in p.flips] == [
        ("slice", "wall", "work", False), ("wake", "previous", "idlest", False),
        ("exec", "cpu", "total", False), ("cost", "kernel", "paper", False),
        ("remote", "slit", "scaled", False), ("si", "queued", "all", True)]  # fmt: skip
    assert p.kept == [("memory", "parent")]
    rows = pd.read_csv(out / "ablation.csv")
    assert sorted(set(rows.assumption)) == ["cost", "exec", "remote", "si", "slice", "wake"]
    assert len(rows) == 6 * 3  # six flips × three n × one policy
    for ext in ("png", "svg"):
        assert (out / "figures" / f"tiny-repro-ablation-hp-superdome-4-io.{ext}").stat().st_size


def test_the_delta_is_the_flipped_gain_minus_the_base_gain_from_the_stored_runs(reproduced):
    _, out, _ = reproduced
    # Gains straight from the store, by setting: (B_r − P_r) / B_r × 100, averaged.
    db = sqlite3.connect(out / "results.sqlite")
    tat: dict = defaultdict(dict)
    for key_json, row_json in db.execute("SELECT key_json, row_json FROM runs"):
        k = json.loads(key_json)
        setting = ",".join(f"{a}={v}" for a, v in sorted(k["assumptions"].items()))
        tat[(setting, k["n"], k["replication"])][k["policy"]] = json.loads(row_json)["mean_tat_ms"]
    db.close()

    def gain(setting: str, n: int, policy: str = "origin-aware") -> float:
        g = [(r["linux26"] - r[policy]) / r["linux26"] * 100
             for (s, nn, _), r in tat.items() if s == setting and nn == n]  # fmt: skip
        assert len(g) == 3
        return float(np.mean(g))

    def at(**changed: str) -> str:
        values = {"cost": "kernel", "exec": "cpu", "load": "work", "memory": "parent",
                  "remote": "slit", "slice": "wall", "wake": "previous", **changed}  # fmt: skip
        return ",".join(f"{k}={v}" for k, v in values.items())

    base = at()
    flips = {"slice": (at(slice="work"), "origin-aware"),
             "wake": (at(wake="idlest"), "origin-aware"),
             "exec": (at(exec="total"), "origin-aware"),
             "cost": (at(cost="paper"), "origin-aware"),
             "remote": (at(remote="scaled"), "origin-aware"),
             "si": (base, "origin-aware:si=all")}  # fmt: skip
    # Besides the flips, the report's profile table ran the paper profile (kernel26 is the
    # file's own setting, reused).
    paper = at(slice="work", wake="idlest")
    assert {s for s, _, _ in tat} == {base, paper, *(s for s, _ in flips.values())}
    rows = pd.read_csv(out / "ablation.csv")
    for r in rows.itertuples():
        setting, policy = flips[r.assumption]
        expected = gain(setting, r.n, policy) - gain(base, r.n)
        assert r.delta_pp == pytest.approx(expected, abs=1e-9)
        assert r.delta_pp == pytest.approx(r.flipped_gain_pct - r.gain_pct, abs=1e-12)
        assert r.delta_ci_low <= r.delta_pp <= r.delta_ci_high


def test_a_rerun_reuses_every_run_of_the_ablation(reproduced, run):
    path, out, _ = reproduced
    r = run("reproduce", path, "--out", out, "--jobs", "1", "--ablate")
    assert r.code == 0, r.err
    assert "ablation: computed 0, reused 108 runs" in r.out  # 6 flips × 3 n × 3 reps × 2
    assert "not flipped (already the paper value): memory=parent" in r.out
    assert re.search(
        r"^ n .*slice=work\s+Δ pp\s+wake=idlest\s+Δ pp\s+exec=total\s+Δ pp"
        r"\s+cost=paper\s+Δ pp\s+remote=scaled\s+Δ pp\s+si=all\s+Δ pp$",
        r.out,
        re.M,
    ), r.out


def _gains(gain_by_n: dict[int, float], half: float = 0.5) -> pd.DataFrame:
    return pd.DataFrame([{"machine": "hp-superdome-4", "workload": "io", "n": n,
                          "policy": "origin-aware@multilevel", "baseline_mean": 100.0,
                          "policy_mean": 100.0 - g, "gain_pct": g, "gain_ci_low": g - half,
                          "gain_ci_high": g + half, "replications": 3}
                         for n, g in gain_by_n.items()])  # fmt: skip


def test_the_reading_states_disagreement_when_the_signs_are_opposite(tmp_path):
    exp = ex.load(tiny(tmp_path))  # published: +5, +6, +7 % (rising)
    text = " ".join(reproduction.reading(exp, _gains({20: -1.0, 40: -2.0, 60: -3.0}), 0.95))
    assert "SIGN disagrees" in text and "at all 3 n" in text
    assert "TREND disagrees" in text and "MAGNITUDE disagrees" in text
    assert "0 of 3 published gains inside" in text
    assert not re.search(r"\b(SIGN|TREND|MAGNITUDE) (partly )?agrees", text)
    # The same signs and trend, and every published value inside numasim's interval.
    text = " ".join(reproduction.reading(exp, _gains({20: 5.1, 40: 5.8, 60: 7.2}), 0.95))
    assert "SIGN agrees: the same sign at all 3 n" in text
    assert "TREND agrees: both rise" in text
    assert "MAGNITUDE agrees" in text and "3 of 3 published gains inside" in text
    assert "disagrees" not in text


def test_the_reading_without_published_numbers_says_so(tmp_path):
    path = tmp_path / "noref.toml"
    path.write_text(tiny(tmp_path).read_text().split("[reference]")[0])
    text = " ".join(reproduction.reading(ex.load(path), _gains({20: 1.0, 40: 2.0, 60: 3.0}), 0.95))
    assert "carries no published numbers" in text and "nothing to compare" in text
    assert "agrees" not in text


def test_the_report_is_one_self_contained_page_with_the_sources(reproduced):
    path, _, page = reproduced
    assert [p.name for p in page.parent.iterdir()] == [page.name]  # nothing beside it
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>")
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', text)
    assert refs and all(r.startswith("data:image/png;base64,") for r in refs)
    assert not re.search(r"https?://", text) and "@import" not in text and "url(" not in text
    import html

    for _, _, why in ex.load(path).assumption_sources():
        assert html.escape(why) in text
    assert "a sentence of the paper about memory" in text
    for section in ["Reading", "Setup", "Published and reproduced", "numasim's results",
                    "Ablation: which assumption carries the result"]:  # fmt: skip
        assert f"<h2>{section}</h2>" in text
    assert "Table 9 (§9)" in text and "the policy wins" in text
    assert text.count("<figure><img") == 2  # the experiment's figure and the ablation's


def test_the_report_loads_in_headless_chromium(reproduced, tmp_path):
    browser = next((p for b in ("chromium", "chromium-browser", "google-chrome")
                    if (p := shutil.which(b))), None)  # fmt: skip
    if browser is None:
        pytest.fail("no headless browser: install Debian's chromium (make test installs it)")
    _, _, page = reproduced
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    body = re.search(r"<body([^>]*)>", dom)
    assert body, dom[:500]
    status = dict(re.findall(r'data-([\w-]+)="([^"]*)"', body.group(1)))
    assert status == {"loaded": "yes", "figures": "2", "figures-drawn": "2", "errors": "0",
                      "error-list": ""}  # fmt: skip


@pytest.mark.parametrize("where", ["a-file/report.html", "missing-dir/report.html", "readonly"])
def test_a_report_that_cannot_be_written_exits_2_with_one_line_before_running(run, tmp_path,
                                                                              where):  # fmt: skip
    (tmp_path / "a-file").write_text("not a directory")
    if where == "readonly":
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only directory")
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        where = "ro/report.html"
    out = tmp_path / "out"
    r = run("reproduce", tiny(tmp_path), "--out", out, "--report", tmp_path / where)
    assert r.code == 2
    assert r.err.count("\n") == 1 and r.err.startswith("numasim: error: --report: "), r.err
    assert not out.exists()  # refused before the sweep


def test_ablate_json_carries_the_ablation_rows(reproduced, run):
    path, out, _ = reproduced
    r = run("reproduce", path, "--out", out, "--jobs", "1", "--ablate", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert len(data["rows"]) == 3 and len(data["ablation"]) == 18
    assert {row["assumption"] for row in data["ablation"]} == {
        "slice",
        "wake",
        "exec",
        "cost",
        "remote",
        "si",
    }


def test_a_flip_replaces_an_assume_item_naming_the_same_assumption(reproduced):
    path, _, _ = reproduced
    exp = ex.load(path)
    exp.assume = "memory=first-run,paper"  # the profile first, then the item: memory stays
    assert exp.assumptions["memory"] == "first-run"
    flip = next(f for f in reproduction.plan(exp).flips if f.name == "memory")
    out = reproduction.flipped(exp, flip)
    assert out.assume == "paper,memory=parent"
    assert out.assumptions["memory"] == "parent"


def test_report_says_before_running_that_it_runs_the_ablation_too(run, tmp_path):
    from test_experiments import tiny as tiny_experiment

    path = tiny_experiment(tmp_path, reps=2)  # 2 n × 3 variants × 2 replications: 12 runs
    r = run("reproduce", path, "--out", tmp_path / "out", "--jobs", "1",
            "--report", tmp_path / "r.html")  # fmt: skip
    assert r.code == 0, r.err
    assert r.err.splitlines()[0] == (
        "--report includes the ablation (its page reports it), so it reruns the experiment once "
        "per flipped assumption or choice (7): up to 84 runs beside the 12 asked, 96 in all "
        "(runs already stored, and the cells a choice leaves as they are, are reused)"
    )
    assert "ablation: computed 84, reused 0" in r.out


def _profiles_page(run, d: Path, fitted: bool) -> str:
    path = d / "tiny-repro.toml"
    rows = ROWS.rsplit(", {", 1)[0]  # n = 20 and 40 only
    path.write_text(TINY.format(rows=rows).replace("replications = 3", "replications = 2")
                    .replace("n = [20, 40, 60]", "n = [20, 40]"))  # fmt: skip
    if fitted:
        f = d / "data" / "numasim" / "fitted" / "tiny-repro.json"
        f.parent.mkdir(parents=True)
        assume = "kernel26,slice=work,wake=idlest,cost=paper"
        f.write_text(json.dumps({"schema": "numasim fitted profile 1",
                                 "name": "fitted:tiny-repro", "m": None,
                                 "assume": assume}))  # fmt: skip
    page = d / "r.html"
    r = run("reproduce", path, "--out", d / "out", "--jobs", "1", "--report", page)
    assert r.code == 0, r.err
    names = "paper, kernel26, fitted:tiny-repro" if fitted else "paper, kernel26"
    assert (f"--report also runs the experiment under each profile it compares with the "
            f"published result ({names})") in r.err  # fmt: skip
    return page.read_text()


@pytest.mark.parametrize("fitted", [False, True])
def test_the_report_sets_the_published_table_beside_each_profile(run, tmp_path, monkeypatch,
                                                                 fitted):  # fmt: skip
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    text = _profiles_page(run, tmp_path, fitted)
    section = text.split("<h2>Published vs numasim under each profile</h2>")[1]
    section = section.split("<h2>")[0]
    assert "<h3>hp-superdome-4 · io</h3>" in section
    for col in ("paper gain %", "kernel26 gain %", "published gain %", "published baseline"):
        assert col in section
    assert ("fitted:tiny-repro gain %" in section) is fitted
    reading = section.split("<h3>Reading</h3>")[1]
    assert "under paper: SIGN" in reading and "under kernel26: SIGN" in reading
    assert ("under fitted:tiny-repro: SIGN" in reading) is fitted
    # Every column's setting ran into the one store; the fitted one (the paper profile's
    # slice and wake with cost=paper: three flips at once) is made by no other run.
    db = sqlite3.connect(tmp_path / "out" / "results.sqlite")
    settings = {json.dumps(json.loads(k)["assumptions"], sort_keys=True)
                for (k,) in db.execute("SELECT key_json FROM runs")}  # fmt: skip
    db.close()
    cols = profile_table.profile_columns(ex.load(tmp_path / "tiny-repro.toml"))
    assert [c.label for c in cols] == ["paper", "kernel26"] + ["fitted:tiny-repro"] * fitted
    for c in cols:
        assert json.dumps(c.exp.assumptions, sort_keys=True) in settings
    both = [s for s in settings if '"slice": "work"' in s and '"wake": "idlest"' in s
            and '"cost": "paper"' in s]  # fmt: skip
    assert bool(both) is fitted


AVERAGE_REF = """
[reference]
source = "§9"
quote = "the policy wins by 5 % on average"
average_gain_pct = 5.0
"""


def test_profiles_set_a_published_average_beside_each_profile(run, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    path = tmp_path / "tiny-avg.toml"
    text = (
        TINY.format(rows="").split("[reference]")[0].replace("replications = 3", "replications = 2")
    )
    path.write_text(text.replace("n = [20, 40, 60]", "n = [20, 40]") + AVERAGE_REF)
    out = tmp_path / "out"
    # Under the paper profile the run's own rows are the paper column's: the same seeds and store.
    r = run("reproduce", path, "--out", out, "--jobs", "1", "--assume", "paper", "--profiles",
            "--json")  # fmt: skip
    assert r.code == 0, r.err
    assert "--profiles also runs the experiment under each profile" in r.err
    data = json.loads(r.out)
    prof = data["profiles"]
    assert prof["kind"] == "average" and prof["columns"] == ["paper", "kernel26"]
    by = {row["profile"]: row for row in prof["rows"]}
    own = [row["gain_pct"] for row in data["rows"]]
    assert by["paper"]["gain_pct"] == pytest.approx(np.mean(own), abs=1e-9)
    assert by["paper"]["cells"] == 2
    for row in prof["rows"]:
        assert row["published_gain_pct"] == 5.0
        assert row["diff_pp"] == pytest.approx(row["gain_pct"] - 5.0)
        assert row["gain_min"] <= row["gain_pct"] <= row["gain_max"]
    (reading,) = prof["reading"]
    assert "under paper: SIGN" in reading and "under kernel26: SIGN" in reading
    assert "No trend is published" in reading
    # The text output prints the same table: every run is reused.
    r = run("reproduce", path, "--out", out, "--jobs", "1", "--assume", "paper", "--profiles")
    assert r.code == 0, r.err
    assert "computed 0" in r.out or "resumed" in r.out
    section = r.out.split("published vs numasim under each profile (paper, kernel26)")[1]
    assert "published average gain %" in section and "reading:" in section
    line = next(x for x in section.splitlines() if x.strip().startswith("hp-superdome-4"))
    assert line.split()[1:] == [report_fmt(5.0), report_fmt(by["paper"]["gain_pct"]),
                                report_fmt(by["kernel26"]["gain_pct"])]  # fmt: skip


def report_fmt(x: float) -> str:
    from numasim import report

    return report.fmt(x, 2)


def test_profiles_set_the_claims_of_an_x_axis_experiment_beside_each(run, tmp_path, monkeypatch):
    from test_claims import tiny_x

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    path = tiny_x(tmp_path, reps=2)
    out = tmp_path / "out"
    r = run("reproduce", path, "--out", out, "--jobs", "1", "--assume", "kernel26",
            "--profiles", "--json")  # fmt: skip
    assert r.code == 0, r.err
    data = json.loads(r.out)
    prof = data["profiles"]
    assert prof["kind"] == "claims" and prof["columns"] == ["paper", "kernel26"]
    assert len(prof["rows"]) == 2 * 2  # two claims, two profiles
    # The kernel26 column is the run as asked: its verdicts are the comparison's own.
    own = {c["claim"]: c["verdict"] for c in data["claims"]}
    for row in prof["rows"]:
        assert row["holds"] + row["fails"] + row["undecided"] == row["comparisons"]
        if row["profile"] == "kernel26":
            assert row["verdict"] == own[row["claim"]]
    (reading,) = prof["reading"]
    assert re.search(r"under paper: \d of 2 claims hold", reading)
    page = tmp_path / "x.html"
    r = run("reproduce", path, "--out", out, "--jobs", "1", "--assume", "kernel26",
            "--report", page)  # fmt: skip
    assert r.code == 0, r.err
    section = page.read_text().split("<h2>Published vs numasim under each profile</h2>")[1]
    assert "verdict of each claim" in section and '<th class="num">kernel26</th>' in section
    assert "[1]" in r.out.split("published vs numasim under each profile")[1]


def test_profiles_without_a_published_result_say_so(run, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    path = tmp_path / "tiny-none.toml"
    text = (
        TINY.format(rows="").split("[reference]")[0].replace("replications = 3", "replications = 2")
    )
    path.write_text(text.replace("n = [20, 40, 60]", "n = [20]"))
    r = run("reproduce", path, "--out", tmp_path / "out", "--jobs", "1", "--profiles", "--json")
    assert r.code == 0, r.err
    assert "publishes no table, average or claim to compare with" in r.err
    assert "profiles" not in json.loads(r.out)
