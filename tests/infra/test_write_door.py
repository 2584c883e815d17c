"""infra/write_door.py, the files: a file replaced whole or not at all, never written onto what is not a regular
file or through a link, never outside the folder asked for, each refusal in its exact line (the folders, removals
and scratch space: test_write_door_folders.py)."""

import fcntl
import os
import stat
from pathlib import Path

import pytest

from imagenet_build.infra import write_door
from imagenet_build.infra.write_door import WriteRefused


def refused(call, *args, **kwargs):
    with pytest.raises(WriteRefused) as error:
        call(*args, **kwargs)
    return error.value.path, error.value.problem


def fifo(path):
    os.mkfifo(path)
    return path


def link(path, to):
    os.symlink(to, path)
    return path


WRITES = "imagenet-build writes only a regular file or a new name; name another"


def test_only_a_regular_file_or_nothing_is_written_over(tmp_path):
    (tmp_path / "file").write_text("x")
    for fine in (tmp_path / "file", tmp_path / "new", tmp_path / "file" / "below", "s3://bucket/x"):
        write_door.check_target(fine)
    assert refused(write_door.check_target, fifo(tmp_path / "fifo")) == (
        str(tmp_path / "fifo"), f"is a FIFO, not a regular file: {WRITES}")
    assert refused(write_door.check_target, link(tmp_path / "out", "/dev/stdout"), removing=True) == (
        str(tmp_path / "out"), "is a symbolic link (to /dev/stdout), not a regular file: left alone: remove it by hand "
                               "if it is not wanted")
    assert refused(write_door.check_target, tmp_path)[1] == f"is a folder, not a regular file: {WRITES}"


def test_an_objects_key_is_never_judged_as_a_local_path(tmp_path, monkeypatch):
    """s3://b/x taken as a local path is s3:/b/x below the working folder: a FIFO or a file there is no object's."""
    monkeypatch.chdir(tmp_path)
    os.makedirs("s3:/b")
    os.mkfifo("s3:/b/fifo")
    Path("s3:/b/file").write_text("x")
    write_door.check_target("s3://b/fifo")
    write_door.check_folder("s3://b/file")
    write_door.make_folder("s3://b/new/folder")
    assert sorted(os.listdir("s3:/b")) == ["fifo", "file"]


def test_a_folder_to_write_into_is_a_folder_a_link_to_one_or_nothing(tmp_path):
    (tmp_path / "file").write_text("x")
    for fine in (tmp_path, link(tmp_path / "to-folder", tmp_path), tmp_path / "new", tmp_path / "file" / "below",
                 "s3://bucket/x"):
        write_door.check_folder(fine)
    assert refused(write_door.check_folder, tmp_path / "file") == (str(tmp_path / "file"),
                                                                   "is a file, not a folder; name a folder")
    assert refused(write_door.check_folder, fifo(tmp_path / "fifo"))[1] == "is a FIFO, not a folder; name a folder"


def test_a_file_stays_inside_the_folder_asked_for(tmp_path):
    (tmp_path / "out" / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    link(tmp_path / "out" / "job", tmp_path / "outside")
    out = tmp_path / "out"
    for inside in (out / "f", out / "sub" / "f", out / "new" / "f", out / "sub" / ".." / "f"):
        write_door.check_within(inside, out)
    write_door.check_within(out, out, is_folder=True)
    write_door.check_within(tmp_path / "anywhere", None)
    write_door.check_within(tmp_path / "f", "/")
    message = f"lies outside {out}, where this verb writes (it leads to {tmp_path / 'outside'}: a link?); remove the " \
              "link"
    assert refused(write_door.check_within, out / "job" / "f", out) == (str(out / "job" / "f"), message)
    assert refused(write_door.check_within, out / "job", out, is_folder=True) == (str(out / "job"), message)
    assert refused(write_door.check_within, tmp_path / "out2" / "f", out)[1].startswith(f"lies outside {out},")
    assert refused(write_door.check_within, out / ".." / "f", out)[1].startswith(f"lies outside {out},")


def test_a_folder_named_as_itself_is_within_and_a_step_back_is_resolved(tmp_path):
    """The folder named in the same words (a `.`, a doubled or trailing separator aside) is the folder, even reached
    through a link; a `..` after a link in the folder asked for steps back from where the link leads."""
    (tmp_path / "real" / "deep").mkdir(parents=True)
    (tmp_path / "out").mkdir()
    link(tmp_path / "via", tmp_path / "real")
    link(tmp_path / "out" / "hop", tmp_path / "real" / "deep")
    for folder in (str(tmp_path / "via"), f"{tmp_path}/via/", f"{tmp_path}//via/."):
        write_door.check_within(f"{folder}/f", tmp_path / "via")
        write_door.check_within(tmp_path / "via" / "f", folder)
        write_door.check_within(folder, tmp_path / "via", is_folder=True)
    # the folder asked for named as out/hop/..: real/, where the link leads and steps back from, not out/
    assert refused(write_door.check_within, tmp_path / "out" / "f", tmp_path / "out" / "hop" / "..")[1].startswith(
        "lies outside")
    # a file named out/hop/../f is written where the link leads, stepped back: real/f, outside out/ (a string's
    # normalising would have taken it for out/f)
    assert refused(write_door.check_within, f"{tmp_path}/out/hop/../f", tmp_path / "out")[1].startswith(
        "lies outside")
    write_door.check_within(f"{tmp_path}/out/sub/../f", tmp_path / "out")  # no link: out/f indeed


def test_an_objects_key_stays_below_the_prefix_asked_for():
    for inside in ("s3://b/out/f", "s3://b/out/job/results/f"):
        write_door.check_within(inside, "s3://b/out/")
    write_door.check_within("s3://b/boX/f", "s3://b/boX/")
    write_door.check_within("s3://b/out", "s3://b/out", is_folder=True)
    for outside in ("s3://b/output/f", "s3://b/f", "s3://b/out", "s3://b/out/../f", "s3://b/out/x/../../f"):
        assert refused(write_door.check_within, outside, "s3://b/out") == (outside, "lies outside s3://b/out, where "
                                                                                    "this verb writes")
    assert refused(write_door.check_within, "s3://b/out/..", "s3://b/out", is_folder=True)[1].startswith("lies")
    assert refused(write_door.check_within, "s3://b/outer", "s3://b/out", is_folder=True)[1].startswith("lies")


def test_temporary_names_are_hidden_beside_the_file_and_known_again(tmp_path):
    tmp = write_door.temp_name(tmp_path / "manifest.json")
    assert tmp == tmp_path / f".manifest.json.{os.getpid()}.tmp" and write_door.is_temp_name(tmp.name)
    for name in ("manifest.json", ".manifest.json.tmp", ".manifest.json.12.tmpx", "x.manifest.json.12.tmp"):
        assert not write_door.is_temp_name(name)


def test_an_error_names_the_file_the_user_knows():
    named = write_door._naming(OSError(28, "No space left on device", "/x/.m.1.tmp"), "/x/m")
    assert (type(named), named.errno, named.strerror, named.filename) == (OSError, 28, "No space left on device",
                                                                          "/x/m")
    unsaid = write_door._naming(FileNotFoundError(2, "", "/x/.m.1.tmp"), "/x/m")
    assert (type(unsaid), unsaid.strerror, unsaid.filename) == (FileNotFoundError, "[Errno 2] : '/x/.m.1.tmp'", "/x/m")
    bare = OSError("no errno")
    assert write_door._naming(bare, "/x/m") is bare


def test_a_file_opened_to_write_is_created_emptied_or_appended_never_through_a_link(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(b"old")
    with write_door.open_write(path) as f:
        f.write(b"new")
    assert path.read_bytes() == b"new" and stat.S_IMODE(os.stat(path).st_mode) == 0o644 & ~_umask()
    with write_door.open_write(path, append=True) as f:
        f.write(b"er")
    assert path.read_bytes() == b"newer"
    fd = write_door.open_fd(tmp_path / "g", within=tmp_path)
    assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC  # no process started meanwhile holds it
    os.write(fd, b"gg")
    os.close(fd)
    fd = write_door.open_fd(tmp_path / "g")
    os.write(fd, b"g")
    os.close(fd)
    assert (tmp_path / "g").read_bytes() == b"g" and stat.S_IMODE(os.stat(tmp_path / "g").st_mode) == 0o644 & ~_umask()
    assert refused(write_door.open_fd, link(tmp_path / "l", path))[1].startswith("is a symbolic link (to ")
    assert refused(write_door.open_fd, tmp_path / "f", within=tmp_path / "elsewhere")[1].startswith("lies outside")
    assert path.read_bytes() == b"newer"
    assert refused(write_door.open_write, tmp_path / "h", within=tmp_path / "elsewhere")[1].startswith("lies outside")
    assert not (tmp_path / "h").exists()
    monkeypatch.setattr(write_door, "check_target", lambda path: None)  # a link made after the check:
    with pytest.raises(OSError):  # never opened through
        write_door.open_fd(tmp_path / "l")


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_file_written_piece_by_piece_appears_whole_or_not_at_all(tmp_path):
    path = tmp_path / "a.tar"
    with write_door.new_file(path, within=tmp_path) as f:
        assert fcntl.fcntl(f.fileno(), fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        assert stat.S_IMODE(os.fstat(f.fileno()).st_mode) == 0o644 & ~_umask()
        f.write(b"one ")
        assert not path.exists()
        f.write(b"two")
    assert path.read_bytes() == b"one two" and os.listdir(tmp_path) == ["a.tar"]
    with pytest.raises(ValueError), write_door.new_file(path) as f:
        f.write(b"half")
        raise ValueError("the library failed")
    assert path.read_bytes() == b"one two" and os.listdir(tmp_path) == ["a.tar"]
    ran = []
    with pytest.raises(WriteRefused), write_door.new_file(fifo(tmp_path / "fifo")):
        ran.append(True)  # refused before the library is handed a file
    assert ran == [] and sorted(os.listdir(tmp_path)) == ["a.tar", "fifo"]


def test_a_temporary_file_is_synced_and_removed_on_failure(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(write_door.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    tmp = write_door.write_temp(tmp_path / "m", b"data", within=tmp_path)
    assert tmp == write_door.temp_name(tmp_path / "m") and tmp.read_bytes() == b"data" and len(synced) == 1
    write_door.write_bytes(tmp_path / "n", b"data", sync=False)
    assert len(synced) == 1 and (tmp_path / "n").read_bytes() == b"data"
    os.unlink(tmp)

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(write_door.os, "fsync", full)
    with pytest.raises(OSError) as error:
        write_door.write_temp(tmp_path / "m", b"new")
    assert (error.value.errno, error.value.filename) == (28, str(tmp_path / "m"))

    def stopped(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(write_door.os, "fsync", stopped)
    with pytest.raises(KeyboardInterrupt):
        write_door.write_temp(tmp_path / "m", b"new")
    assert os.listdir(tmp_path) == ["n"]
    assert refused(write_door.write_temp, tmp_path / "x" / "m", b"", within=tmp_path / "y")[1].startswith("lies")


def test_a_temporary_name_is_made_anew_never_opened_as_it_is(tmp_path):
    stale = write_door.temp_name(tmp_path / "m")
    stale.write_bytes(b"left by an earlier process of the same number")
    os.chmod(stale, 0o600)
    write_door.write_bytes(tmp_path / "m", b"m")
    assert (tmp_path / "m").read_bytes() == b"m" and os.listdir(tmp_path) == ["m"]
    assert stat.S_IMODE(os.stat(tmp_path / "m").st_mode) == 0o644 & ~_umask()  # made anew, not the stale one's
    os.mkfifo(stale)  # opened to write, a FIFO with no reader would block
    assert refused(write_door.write_bytes, tmp_path / "m", b"new") == (
        str(stale), "is a FIFO, not a regular file: left alone: remove it by hand if it is not wanted")
    os.unlink(stale)
    os.symlink(tmp_path / "elsewhere", stale)
    with pytest.raises(WriteRefused):
        write_door.write_bytes(tmp_path / "m", b"new")
    assert (tmp_path / "m").read_bytes() == b"m" and not (tmp_path / "elsewhere").exists()


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "manifest.json"
    write_door.write_bytes(target, b"old")

    def no_space(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(write_door.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space"):
        write_door.write_bytes(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
    write_door.write_bytes(target, b"new")
    assert target.read_bytes() == b"new"


@pytest.mark.parametrize("failure, raised", [(OSError(30, "Read-only file system"), OSError),
                                             (KeyboardInterrupt(), KeyboardInterrupt)])
def test_a_failed_rename_names_the_file_and_leaves_no_temporary(tmp_path, monkeypatch, failure, raised):
    def fails(source, target):
        raise failure

    monkeypatch.setattr(write_door.os, "replace", fails)
    with pytest.raises(raised) as error:
        write_door.write_bytes(tmp_path / "m", b"new")
    if raised is OSError:
        assert (error.value.errno, error.value.filename) == (30, str(tmp_path / "m"))
    assert os.listdir(tmp_path) == []


def test_a_write_syncs_its_folder_unless_asked_not(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(write_door, "fsync_dir", synced.append)
    write_door.write_bytes(tmp_path / "a", b"a", within=tmp_path)
    write_door.write_bytes(tmp_path / "b", b"b", sync=False)
    assert synced == [tmp_path] and (tmp_path / "b").read_bytes() == b"b"


def test_a_folder_is_synced_and_its_descriptor_closed(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(write_door.os, "fsync", lambda fd: synced.append(os.fstat(fd)) or real_fsync(fd))
    before = len(os.listdir("/proc/self/fd"))
    write_door.fsync_dir(tmp_path)
    assert len(synced) == 1 and synced[0].st_ino == os.stat(tmp_path).st_ino and stat.S_ISDIR(synced[0].st_mode)
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize("target", ["a FIFO", "a link", "a link to /dev/null", "outside"])
def test_nothing_is_written_onto_a_node_through_a_link_or_outside(tmp_path, target):
    (tmp_path / "out").mkdir()
    (tmp_path / "elsewhere").write_bytes(b"elsewhere")
    path = {"a FIFO": lambda: fifo(tmp_path / "out" / "p"), "a link": lambda: link(tmp_path / "out" / "p",
                                                                                   tmp_path / "elsewhere"),
            "a link to /dev/null": lambda: link(tmp_path / "out" / "p", "/dev/null"),
            "outside": lambda: link(tmp_path / "out" / "sub", tmp_path) / "p"}[target]()
    before = os.lstat(path) if os.path.lexists(path) else None
    with pytest.raises(WriteRefused):
        write_door.write_bytes(path, b"new", within=tmp_path / "out")
    after = os.lstat(path) if os.path.lexists(path) else None
    assert (before and (before.st_ino, before.st_mode)) == (after and (after.st_ino, after.st_mode))
    assert (tmp_path / "elsewhere").read_bytes() == b"elsewhere" and not (tmp_path / "p").exists()
    assert [n for n in os.listdir(tmp_path / "out") if write_door.is_temp_name(n)] == []


def test_a_rename_applies_both_rules_to_its_target(tmp_path):
    (tmp_path / "a").write_bytes(b"a")
    write_door.replace(tmp_path / "a", tmp_path / "b", within=tmp_path)
    assert (tmp_path / "b").read_bytes() == b"a" and not (tmp_path / "a").exists()
    assert refused(write_door.replace, tmp_path / "b", fifo(tmp_path / "p"))[1].startswith("is a FIFO")
    assert refused(write_door.replace, tmp_path / "b", tmp_path / "c", within=tmp_path / "x")[1].startswith("lies")
    assert (tmp_path / "b").read_bytes() == b"a"


def test_an_object_is_written_and_uploaded_below_its_prefix_alone(bucket, tmp_path):
    from imagenet_build.infra import read_door

    write_door.write_bytes(f"{bucket}/out/m", b"m", within=f"{bucket}/out")
    (tmp_path / "s").write_bytes(b"s")
    write_door.upload(tmp_path / "s", f"{bucket}/out/s", within=f"{bucket}/out")
    assert read_door.read_bytes(f"{bucket}/out/m") == b"m" and read_door.read_bytes(f"{bucket}/out/s") == b"s"
    for call, args in ((write_door.write_bytes, (f"{bucket}/elsewhere/m", b"m")),
                       (write_door.upload, (tmp_path / "s", f"{bucket}/elsewhere/s"))):
        assert refused(call, *args, within=f"{bucket}/out")[1].startswith(f"lies outside {bucket}/out")
    assert not write_door.storage.exists(f"{bucket}/elsewhere/m")


def test_a_file_name_that_cannot_be_written_is_refused_before_any_work(tmp_path):
    from imagenet_build.infra.errors import InputError

    def said(path):
        with pytest.raises(InputError) as error:
            write_door.check_writable(path)
        return error.value.path, error.value.problem

    (tmp_path / "file").write_text("x")
    write_door.check_writable(tmp_path / "page.html")
    write_door.check_writable(tmp_path / "file")
    assert os.listdir(tmp_path) == ["file"]  # the temporary file tried, and removed
    assert said(tmp_path) == (str(tmp_path), "is a folder; give a file name")
    os.symlink(tmp_path, tmp_path / "link")
    assert said(tmp_path / "link")[1].startswith("is a symbolic link (to ")
    assert said(tmp_path / "nowhere" / "p.html") == (str(tmp_path / "nowhere" / "p.html"),
                                                     f"folder {tmp_path / 'nowhere'} does not exist")
    assert said(tmp_path / "file" / "p.html") == (str(tmp_path / "file" / "p.html"),
                                                  f"{tmp_path / 'file'} is not a folder")
    assert said("/proc/self/page.html") == ("/proc/self/page.html",
                                            "cannot be written here (No such file or directory)")
    os.mkfifo(write_door.temp_name(tmp_path / "p.html"))
    assert said(tmp_path / "p.html")[1].startswith("is a FIFO")


def test_a_file_whose_folder_is_gone_is_named_as_given(tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        write_door.write_bytes(tmp_path / "gone" / "manifest.json", b"m")
    assert error.value.filename == str(tmp_path / "gone" / "manifest.json")
    write_door._drop(tmp_path / "gone" / "x")  # a temporary file already gone: nothing to do
