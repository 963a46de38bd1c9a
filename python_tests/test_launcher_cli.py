"""The launcher's command line (``python -m minitorch_dist.run``): ``--help``, usage errors
with a did-you-mean, the program and the machines checked before any rank starts, and a
rank's own usage error reported once."""
import subprocess
import sys

import pytest

from minitorch_dist.launch import report
from minitorch_dist.launch.cli import build_parser, check_program, main, parse_options
from minitorch_dist.launch.network import check_slots, parse_hosts, read_hostfile
from mpi_jobs import REPO, child_env, needs_mpi


def _launcher(*args, timeout=90, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "minitorch_dist.run", *args], cwd=cwd,
                          env=child_env(), capture_output=True, text=True, timeout=timeout)


# ---- --help -------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_exits_0_and_describes_every_option(flag, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([flag])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for action in build_parser()._actions:
        for name in action.option_strings:
            assert name in text, name
        assert action.help and action.help.split()[0] in text
    assert "examples:" in text and "python -m minitorch_dist.run -n 2" in text


def test_help_from_the_command_line_goes_to_stdout():
    done = _launcher("--help")
    assert done.returncode == 0 and done.stderr == ""
    assert "--rank0-only" in done.stdout and "--hostfile FILE" in done.stdout


# ---- usage errors -------------------------------------------------------------------------------
def test_a_mistyped_option_is_refused_with_a_did_you_mean(capsys):
    assert main(["-n", "2", "--timout", "60", "x.py"]) == 2
    err = capsys.readouterr().err
    assert "unknown option '--timout' (did you mean --timeout?)" in err
    assert "usage: python -m minitorch_dist.run" in err


def test_an_option_far_from_every_name_gets_no_guess(capsys):
    assert main(["-n", "2", "--zzzzzz", "x.py"]) == 2
    err = capsys.readouterr().err
    assert "unknown option '--zzzzzz'" in err and "did you mean" not in err


def test_options_end_at_the_program():
    options = parse_options(["-n", "2", "--rank0-only", "--tag", "s.py", "--timout", "-n", "5"])
    assert options["argv"] == ["s.py", "--timout", "-n", "5"]
    assert options["rank0_only"] and options["tag"] and options["n"] == 2
    assert parse_options(["-n", "1", "--", "-weird.py"])["argv"] == ["-weird.py"]
    assert parse_options(["--timeout=5", "-n", "1", "-c", "pass"])["timeout"] == 5.0
    assert parse_options(["-n", "1", "--no-tag", "-m", "pkg", "x"])["argv"] == ["-m", "pkg", "x"]
    assert parse_options(["-np", "3", "--host", "a:3", "s.py"])["hosts"] == "a:3"


@pytest.mark.parametrize("args, said", [
    ([], "need -n N and a script"),
    (["-n", "2"], "need -n N and a script"),
    (["-n", "2", "-m"], "-m needs a module"),
    (["-n", "two", "s.py"], "bad value 'two' for -n"),
    (["-n", "2", "--timeout"], "--timeout: expected one argument"),
    (["-n", "2", "--hosts", "a", "--hostfile", "f", "s.py"], "not both"),
])
def test_usage_errors_name_what_is_wrong(args, said, capsys):
    assert main(args) == 2
    assert said in capsys.readouterr().err


# ---- the program is checked before any rank starts ------------------------------------------------
def test_a_missing_script_or_module_starts_no_rank(tmp_path):
    with pytest.raises(ValueError, match="script 'nope.py' does not exist"):
        check_program(["nope.py"])
    with pytest.raises(ValueError, match="-m no_such_module_xyz: no module named"):
        check_program(["-m", "no_such_module_xyz"])
    with pytest.raises(ValueError, match="is a directory"):
        check_program([str(tmp_path)])
    check_program(["-c", "pass"])
    check_program(["-m", "minitorch_dist.run"])
    # no rank ran: nothing printed but the launcher's line, at once
    done = _launcher("-n", "2", "nope.py", timeout=30)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"minitorch_dist.run: script 'nope.py' does not exist (from {REPO}); the launcher's "
        "options come before it"]


def test_a_module_is_looked_up_from_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "my_local_job.py").write_text("print('ran')\n")
    monkeypatch.chdir(tmp_path)
    check_program(["-m", "my_local_job"])
    assert str(tmp_path) not in sys.path


# ---- machines -----------------------------------------------------------------------------------
def test_hosts_are_parsed_and_each_bad_entry_is_named():
    assert parse_hosts("n1:4,n2") == [("n1", 4), ("n2", None)]
    assert parse_hosts(["a", "b:2"]) == [("a", None), ("b", 2)]
    with pytest.raises(ValueError, match="--hosts needs at least one machine"):
        parse_hosts("")
    with pytest.raises(ValueError, match="--hosts entry 'b:0': the slot count"):
        parse_hosts("a,b:0")
    with pytest.raises(ValueError, match="--hosts entry 'a b'"):
        parse_hosts("a b")
    with pytest.raises(ValueError, match="entry 3 of 'a,b,' is empty"):
        parse_hosts("a,b,")


def test_an_empty_hosts_option_is_refused(capsys):
    assert main(["-n", "2", "--hosts", "", "x.py"]) == 2
    assert "--hosts needs at least one machine" in capsys.readouterr().err


def test_too_few_slots_are_refused_before_mpi_says_so():
    with pytest.raises(ValueError, match=r"-n 4 needs 4 slots but --hosts gives 2 \(a:1, b:1\)"):
        check_slots(parse_hosts("a,b"), 4, False, "--hosts")
    check_slots(parse_hosts("a,b"), 4, True, "--hosts")        # --oversubscribe: MPI's call
    check_slots(parse_hosts("a:2,b:2"), 4, False, "--hosts")
    check_slots([("a", None)], 8, False, "--hostfile")        # a host file's default: MPI's


def test_a_hostfile_is_read_and_a_bad_line_is_named(tmp_path):
    good = tmp_path / "hosts"
    good.write_text("# the cluster\nnode1 slots=4\nnode2:2\n\nnode3 max_slots=8  # spare\n")
    assert read_hostfile(str(good)) == [("node1", 4), ("node2", 2), ("node3", None)]
    bad = tmp_path / "bad"
    bad.write_text("node1 slots=4\nnode2 slot=4\n")
    with pytest.raises(ValueError, match=r"line 2 \('node2 slot=4'\): unknown field 'slot=4'"):
        read_hostfile(str(bad))
    with pytest.raises(ValueError, match="cannot be read"):
        read_hostfile(str(tmp_path / "missing"))
    (tmp_path / "empty").write_text("# nothing\n")
    with pytest.raises(ValueError, match="names no machine"):
        read_hostfile(str(tmp_path / "empty"))


def test_an_unknown_host_is_named_before_mpi_starts(capsys):
    code = main(["-n", "2", "--hosts", "no-such-host.invalid,b", "-c", "pass"])
    assert code == 2
    assert "--hosts entry 'no-such-host.invalid': no such host" in capsys.readouterr().err


# ---- a rank's usage error -----------------------------------------------------------------------
def test_a_usage_report_shows_the_message_and_usage_once():
    records = [{"rank": r, "kind": "usage", "summary": "t.py: error: bad -x\nusage: t.py [-x]",
                "fold": "t.py: error: bad -x", "time": r} for r in range(3)]
    text = report.format_report(records, 2, "/tmp/job")
    assert text.count("t.py: error: bad -x") == 1 and text.count("usage: t.py [-x]") == 1
    assert "ranks 1-2: the same error" in text


@needs_mpi
def test_a_ranks_usage_error_is_reported_once(tmp_path):
    script = tmp_path / "needs_stages.py"
    script.write_text("import argparse\nparser = argparse.ArgumentParser()\n"
                      "parser.add_argument('--stages', type=int, required=True)\n"
                      "parser.parse_args()\n")
    done = _launcher("-n", "3", "--timeout", "60", str(script))
    assert done.returncode == 2, done.stderr
    said = done.stdout + done.stderr
    assert said.count("error: the following arguments are required: --stages") == 1
    assert said.count("usage: needs_stages.py") == 1
    assert "SystemExit" not in said and "failed first" in said


# ---- rank-tagged output and --rank0-only --------------------------------------------------------
@needs_mpi
def test_tagged_output_and_rank0_only():
    code = ("import sys; from minitorch_dist.communication import init, get_rank; init(); "
            "print('progress', get_rank()); print('warned', get_rank(), file=sys.stderr)")
    done = _launcher("-n", "2", "--timeout", "60", "--tag", "--rank0-only", "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[0] progress 0"]
    assert sorted(done.stderr.splitlines()) == ["[0] warned 0", "[1] warned 1"]
    plain = _launcher("-n", "2", "--timeout", "60", "-c", code)    # not a terminal: no tags
    assert sorted(plain.stdout.splitlines()) == ["progress 0", "progress 1"]


def _demux(tmp_path, lines, **options):
    """Feed ``lines`` (mpiexec's tagged output) through an OutputDemux; returns what it showed
    on (stdout, stderr)."""
    import io
    from minitorch_dist.launch.output import OutputDemux

    class Process:
        stdout = io.BytesIO(b"".join(line for stream, line in lines if stream == "out"))
        stderr = io.BytesIO(b"".join(line for stream, line in lines if stream == "err"))
    out, err = io.BytesIO(), io.BytesIO()
    demux = OutputDemux(str(tmp_path), out, err, **options)
    demux.start(Process)
    demux.join()
    return out.getvalue().decode(), err.getvalue().decode()


LINES = [("out", b"[1,0]<stdout>: loss 0.5\n"), ("out", b"[1,1]<stdout>: loss 0.5\n"),
         ("err", b"[1,1]<stderr>: UserWarning: careful\n")]


def test_the_demux_tags_lines_and_shows_rank0_only(tmp_path):
    out, err = _demux(tmp_path, LINES, tag=True, rank0_only=True)
    assert out == "[0] loss 0.5\n" and err == "[1] UserWarning: careful\n"
    (tmp_path / "plain").mkdir()
    out, err = _demux(tmp_path / "plain", LINES)
    assert out == "loss 0.5\nloss 0.5\n" and err == "UserWarning: careful\n"
    # the logs keep every rank's lines, untagged (stdout and stderr are pumped by two
    # threads, so their lines may interleave either way)
    log = (tmp_path / "rank.1.log").read_text().splitlines()
    assert sorted(log) == ["UserWarning: careful", "loss 0.5"]



def test_a_program_asks_for_rank0_only_and_notes_are_shown_once(tmp_path):
    """``log.rank0_progress_only()`` prints a control line: from it on only rank 0's
    standard output is shown (the line itself is neither shown nor logged); the same note
    from two ranks is shown once; other ranks' standard error still shows."""
    lines = [("out", b"[1,1]<stdout>: before 1\n"),
             ("out", b"[1,1]<stdout>: minitorch_dist: control: rank0-only\n"),
             ("out", b"[1,0]<stdout>: loss 0.5\n"), ("out", b"[1,1]<stdout>: loss 0.5\n"),
             ("err", b"[1,0]<stderr>: minitorch_dist: note: Model: x changes nothing\n"),
             ("err", b"[1,1]<stderr>: minitorch_dist: note: Model: x changes nothing\n"),
             ("err", b"[1,1]<stderr>: ValueError: rank 1 only\n")]
    out, err = _demux(tmp_path, lines, follow_program=True)
    assert out == "before 1\nloss 0.5\n"
    assert err == "minitorch_dist: note: Model: x changes nothing\nValueError: rank 1 only\n"
    assert "control" not in (tmp_path / "rank.1.log").read_text()
    assert "loss 0.5" in (tmp_path / "rank.1.log").read_text()
    (tmp_path / "captured").mkdir()         # not a terminal: every rank's lines are kept
    out, _ = _demux(tmp_path / "captured", lines)
    assert out.splitlines() == ["before 1", "loss 0.5", "loss 0.5"]


def test_rank0_progress_only_speaks_only_to_the_launcher(monkeypatch, capsys):
    from minitorch_dist import log
    from minitorch_dist.launch.output import _RANK0_ONLY_REQUEST
    for name in ("MINITORCH_DIST_JOB_DIR", "MINITORCH_DIST_ALL_RANKS", "OMPI_COMM_WORLD_SIZE",
                 "PMI_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert not log.rank0_progress_only() and capsys.readouterr().out == ""
    monkeypatch.setenv("MINITORCH_DIST_JOB_DIR", "/tmp/job")     # run.spawn's processes
    assert not log.rank0_progress_only() and capsys.readouterr().out == ""
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")             # the launcher's MPI ranks
    assert log.rank0_progress_only()
    assert capsys.readouterr().out.encode() == _RANK0_ONLY_REQUEST + b"\n"
    monkeypatch.setenv("MINITORCH_DIST_ALL_RANKS", "1")       # the user's opt-out
    assert not log.rank0_progress_only() and capsys.readouterr().out == ""


def test_a_note_is_one_line_once_not_a_python_warning(caplog, recwarn):
    import logging
    from minitorch_dist import log
    with caplog.at_level(logging.WARNING, logger="minitorch_dist"):
        assert log.note("test_launcher_cli: option y is accepted and changes nothing")
        assert not log.note("test_launcher_cli: option y is accepted and changes nothing")
    assert [record.getMessage() for record in caplog.records] == [
        "minitorch_dist: note: test_launcher_cli: option y is accepted and changes nothing"]
    assert len(recwarn) == 0


def test_a_note_outside_pytest_is_one_plain_line_on_stderr():
    code = ("from minitorch_dist import log; log.note('x is accepted and changes nothing'); "
            "log.note('x is accepted and changes nothing')")
    done = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr == "minitorch_dist: note: x is accepted and changes nothing\n"


def _launcher_on_a_terminal(*args, timeout=90):
    """Run the launcher with its standard output on a pseudo-terminal, as a person sees it;
    returns (exit status, what the terminal showed, standard error)."""
    import os
    import pty
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "minitorch_dist.run", *args], cwd=REPO,
                            env=child_env(), stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:         # the terminal closed: every writer is gone
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    err = proc.communicate(timeout=timeout)[1]
    return proc.returncode, shown.decode().replace("\r\n", "\n"), err.decode()


@needs_mpi
def test_a_program_that_asks_shows_rank0_progress_only_on_a_terminal():
    code = ("import sys; from minitorch_dist import log; "
            "from minitorch_dist.communication import init, get_rank; init(); "
            "log.rank0_progress_only(); print('progress', get_rank()); "
            "log.note('same on every rank'); print('warned', get_rank(), file=sys.stderr)")
    status, shown, err = _launcher_on_a_terminal("-n", "2", "--timeout", "60", "--no-tag",
                                                 "-c", code)
    assert status == 0, err
    assert shown.splitlines() == ["progress 0"]
    assert sorted(err.splitlines()) == ["minitorch_dist: note: same on every rank",
                                        "warned 0", "warned 1"]


def test_progress_bars_stay_off_in_the_ranks_of_a_job(monkeypatch):
    """mpiexec gives a rank's stdout a pseudo-terminal; a bar's carriage returns would come
    out through the launcher as one endless line, so bars are off in MPI ranks."""
    from minitorch_dist.train.callback.progress_bar import terminal_output

    class Terminal:
        def isatty(self):
            return True
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert terminal_output(Terminal())
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert not terminal_output(Terminal())


@needs_mpi
def test_a_model_run_under_the_launcher_draws_no_bar():
    code = ("import numpy as np, minitorch_dist as ms; from minitorch_dist import nn; "
            "from minitorch_dist.train import Model, ProgressBar; "
            "bar = ProgressBar(); net = nn.Dense(2, 1); "
            "Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.1)).train(1, "
            "[(ms.Tensor(np.ones((4, 2), np.float32)), ms.Tensor(np.ones((4, 1), np.float32)))]"
            "* 3, callbacks=[bar]); print('bar', bar.enabled)")
    done = _launcher("-n", "2", "--timeout", "90", "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["bar", "False", "bar", "False"] and "step/s" not in done.stderr
