"""verify's checks are registered classes: a class is a check (a row of the report, its problems in the JSON)
by being defined, at whichever scope it looks, and the docs' table names exactly the checks there are."""

import json
import re
from pathlib import Path

import pytest

from conftest import run_cli
from imagenet_build.verify.check import REGISTRY, registered
from imagenet_build.verify.folder import FolderCheck
from imagenet_build.verify.problems import Finding
from imagenet_build.verify.record import RecordCheck
from imagenet_build.verify.shard import ShardCheck

DOCS = Path(__file__).resolve().parents[2] / "docs" / "verify.md"
SHARDS = 6  # the converted sample: 4 train and 2 validation shards


@pytest.fixture
def throwaway():
    """Checks defined in a test leave the registry when it ends. (They are local classes, which a worker
    process cannot unpickle: verify runs with --workers 1, in this process.)"""
    before = dict(REGISTRY)
    yield
    REGISTRY.clear()
    REGISTRY.update(before)


def define(scope, warning=False):
    """A check of one scope finding one thing per record 0, per shard, or once in the folder."""
    if scope == "record":
        class FirstRecord(RecordCheck):
            name, rank, covers = "first-record", 95, "flags record 0 of each shard"

            def run_record(self, record):
                return ["record 0 flagged"] if record.number == 0 else []
        check = FirstRecord
    elif scope == "shard":
        class EveryShard(ShardCheck):
            name, rank, covers = "every-shard", 95, "flags each shard"

            def run_shard(self, shard):
                return [Finding(shard.name, None, None, f"{len(shard.entries)} records flagged")]
        check = EveryShard
    else:
        class TheFolder(FolderCheck):
            name, rank, covers = "the-folder", 95, "flags the folder once"

            def run_folder(self, folder):
                yield Finding("manifest.json", None, None, f"{len(folder.results)} shards flagged")
        check = TheFolder
    check.warning = warning
    return check


@pytest.mark.parametrize("scope,found", [("record", SHARDS), ("shard", SHARDS), ("folder", 1)])
def test_a_check_class_is_run_and_reported_by_being_defined(converted, throwaway, scope, found):
    check = define(scope)
    result = run_cli("verify", converted, "--workers", 1, "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and report["ok"] is False
    assert report["summary"]["checks"][-2:] == ["real-labels", check.name]  # its rank: after them, before decode
    assert report["summary"]["problem_counts"] == {check.name: found}
    assert {p["check"] for p in report["problems"]} == {check.name}
    text = run_cli("verify", converted, "--workers", 1).stdout
    assert re.search(rf"^{check.name} +{found} problem\(s\) +{check.covers}$", text, re.M), text


def test_a_warning_check_reports_apart_and_leaves_the_build_sound(converted, throwaway):
    check = define("record", warning=True)
    result = run_cli("verify", converted, "--workers", 1, "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["ok"] and report["problems"] == []
    assert report["summary"]["warning_counts"][check.name] == SHARDS and check.name not in report["summary"]["checks"]
    text = run_cli("verify", converted, "--workers", 1).stdout
    assert f"warning: {check.name}: {SHARDS} record(s): {check.covers}" in text


def test_a_check_runs_only_in_the_modes_it_says(converted, throwaway):
    """A record check needs the payloads, which --quick never reads: not run there, and the report says so."""
    check = define("record")
    report = json.loads(run_cli("verify", converted, "--workers", 1, "--quick", "--json").stdout)
    assert report["ok"] and check.name not in report["summary"]["checks"]
    assert re.search(rf"^{check.name} +not run ", run_cli("verify", converted, "--workers", 1, "--quick").stdout, re.M)


def test_two_checks_of_one_name_are_refused(throwaway):
    define("shard")
    with pytest.raises(TypeError, match="two checks named 'every-shard'"):
        class Another(ShardCheck):
            name, rank, covers = "every-shard", 96, "the same name again"

            def run_shard(self, shard):
                return []


def test_the_docs_table_names_every_check_and_the_warnings_section_every_warning():
    text = DOCS.read_text()
    table = text[text.index("| check | what |"):].split("\n\n")[0]
    documented = re.findall(r"^\| `([a-z-]+)` \|", table, re.M)
    checks = [check.name for check in registered() if not check.warning]
    assert documented == checks  # the same checks, in the report's order
    warnings = text[text.index("## Warnings"):].split("\n## ")[0]
    assert all(f"`{check.name}`" in warnings for check in registered() if check.warning)
    assert any(check.warning for check in registered())
