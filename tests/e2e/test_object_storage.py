"""convert, verify and index against a real S3 protocol server on loopback (moto's server mode)."""

import json

from conftest import run_cli, run_process, sample_args, tree_digest


def s3_digest(url):
    """{relative key: sha256} of every object under an s3:// prefix."""
    import hashlib

    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    fs.invalidate_cache()
    return {path[len(root) + 1:]: hashlib.sha256(fs.cat_file(path)).hexdigest() for path in sorted(fs.find(root))}


def test_convert_to_s3_gives_the_local_bytes_and_resumes(sample_dir, converted, bucket):
    out = f"{bucket}/imagenet"
    result = run_process(*sample_args(sample_dir, out, "--workers", 2, "--json"))
    assert result.returncode == 0, result.stderr
    assert s3_digest(out) == tree_digest(converted)
    again = run_process(*sample_args(sample_dir, out, "--workers", 1, "--json"))
    assert json.loads(again.stdout)["shards_kept"] == 6


def test_interrupted_upload_is_resumed(sample_dir, converted, bucket):
    """An upload cut short leaves a manifest that lists only what arrived; the rerun does the rest."""
    import fsspec

    out = f"{bucket}/imagenet"
    assert run_process(*sample_args(sample_dir, out, "--workers", 1)).returncode == 0
    fs, root = fsspec.core.url_to_fs(out)
    manifest = json.loads(fs.cat_file(f"{root}/manifest.json"))
    manifest["complete"] = False
    manifest["shards"] = manifest["shards"][:2]  # as if the run died after two shards
    fs.pipe_file(f"{root}/manifest.json", json.dumps(manifest).encode())
    fs.rm(f"{root}/train-00003-of-00004")
    result = run_process(*sample_args(sample_dir, out, "--workers", 1, "--json"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["shards_written"] == 4
    assert s3_digest(out) == tree_digest(converted)


def test_verify_and_index_on_s3(sample_dir, bucket):
    import fsspec

    out = f"{bucket}/imagenet"
    assert run_process(*sample_args(sample_dir, out, "--workers", 1)).returncode == 0
    result = run_cli("verify", out, "--workers", 1, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["records"] == 64
    fs, root = fsspec.core.url_to_fs(out)
    fs.pipe_file(f"{root}/dali_idx/train-00001-of-00004.idx", b"0 16\n")
    result = run_cli("verify", out, "--workers", 1, "--quick", "--json")
    assert result.exit_code == 1 and "index" in json.loads(result.stdout)["summary"]["problem_counts"]
    index = run_cli("index", f"{out}/train-00001-of-00004", "--index-dir", f"{out}/dali_idx", "--workers", 1)
    assert index.exit_code == 0, index.output
    assert run_cli("verify", out, "--workers", 1, "--quick").exit_code == 0


def test_convert_from_archives_in_a_bucket(bucket, tmp_path):
    import fsspec

    from imagenet_build.tools.sample_dataset import make_sample

    sample = tmp_path / "sample"
    make_sample(sample, classes=3, per_class=6, validation_per_class=2, tarballs=True)
    fs, root = fsspec.core.url_to_fs(bucket)
    for name in ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar", "ILSVRC2012_bbox_train_v2.tar.gz"):
        fs.put_file(str(sample / name), f"{root}/{name}")
    common = ["--labels-file", sample / "labels.txt", "--validation-labels-file", sample / "validation_labels.txt",
              "--train-shards", 2, "--validation-shards", 2, "--layout-threads", 2, "--workers", 2]
    remote = run_process("convert", "--train-tar", f"{bucket}/ILSVRC2012_img_train.tar",
                         "--validation-tar", f"{bucket}/ILSVRC2012_img_val.tar",
                         "--bbox-tar", f"{bucket}/ILSVRC2012_bbox_train_v2.tar.gz",
                         "--output-dir", tmp_path / "from-bucket", *common)
    assert remote.returncode == 0, remote.stderr
    local = run_process("convert", "--train-dir", sample / "train", "--validation-dir", sample / "validation",
                        "--bounding-box-file", sample / "bboxes.csv", "--output-dir", tmp_path / "from-folders",
                        *common)
    assert local.returncode == 0, local.stderr
    a, b = tree_digest(tmp_path / "from-bucket"), tree_digest(tmp_path / "from-folders")
    a.pop("manifest.json"), b.pop("manifest.json")
    assert a == b


# ------------------------------------------------------------------ engines (each engine's runs: tests/engines/)


def test_a_retried_shard_task_writes_the_same_bytes(sample_dir, tmp_path):
    """Runners retry tasks: writing a shard twice (or from two workers) must give one result."""
    from imagenet_build.catalog.classes import load_catalog
    from imagenet_build.format.destination import destination
    from imagenet_build.plan import SplitPlan
    from imagenet_build.sources import scan_class_folders
    from imagenet_build.writer.shard_writer import write_shard

    cat = load_catalog(sample_dir / "labels.txt")
    spec = SplitPlan(scan_class_folders("train", sample_dir / "train", cat, "fail"), cat, {}, 4, 2).spec(1)
    dest = destination(tmp_path / "out", None)
    (tmp_path / "out" / "dali_idx").mkdir(parents=True)
    first = write_shard(spec, (dest,), "fail")
    before = tree_digest(tmp_path / "out")
    assert write_shard(spec, (dest,), "fail") == first
    assert tree_digest(tmp_path / "out") == before


def test_no_credentials_is_one_line_not_a_traceback(sample_dir, bucket, tmp_path):
    """The S3 backend's own error (botocore's NoCredentialsError is not an OSError) is one line naming the URL."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    env.update(AWS_EC2_METADATA_DISABLED="true", AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_CONFIG_FILE=str(tmp_path / "none"))
    out = f"{bucket}/no-credentials"
    result = run_process(*sample_args(sample_dir, out, "--workers", 1), env=env)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {out}") and "Credentials" in lines[0], result.stderr
