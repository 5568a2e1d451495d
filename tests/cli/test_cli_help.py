"""The command line's help: an example per sub-command (each one parses), grouped options
(the TLS and SASL ones in one line unless --help-all), a suggestion for a misspelt option or
command shown with the sub-command's own usage, and a start that imports no client."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from kcodec.cli import _commands, build_parser, main
from tests.support import REPO


def _argv(example: str) -> list[str]:
    words = shlex.split(example, comments=True)
    assert words[0] == "kcodec", example
    # a shell redirection is not an argument
    out, skip = [], False
    for w in words[1:]:
        if skip:
            skip = False
            continue
        if w in ("<", ">", "|"):
            skip = True
            continue
        out.append(w)
    return out


@pytest.mark.parametrize("mod", _commands(), ids=lambda m: m.NAME)
def test_each_command_has_examples_that_parse(mod) -> None:
    examples = getattr(mod, "EXAMPLES", None)
    assert examples, f"kcodec {mod.NAME} has no EXAMPLES"
    for ex in examples:
        argv = _argv(ex)
        assert argv[0] == mod.NAME, ex
        args = build_parser(mod.NAME).parse_args(argv)
        assert args.command == mod.NAME


def test_examples_are_shown_under_help(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["produce", "--help"])
    out = capsys.readouterr().out
    assert "examples:\n  kcodec produce -t events hello world" in out


def test_security_options_in_one_line_unless_help_all(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["consume", "--help"])
    short = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["consume", "--help-all"])
    full = capsys.readouterr().out
    assert "--help-all describes them" in " ".join(short.split())
    assert "CA certificates to trust" not in short
    assert "CA certificates to trust" in full
    assert len(short.splitlines()) + 15 < len(full.splitlines())


def test_security_options_still_parse_without_their_help() -> None:
    args = build_parser("consume").parse_args(["consume", "-t", "x", "--security-protocol", "ssl",
                                               "--ssl-cafile", "ca.pem"])
    assert (args.security_protocol, args.ssl_cafile) == ("SSL", "ca.pem")


@pytest.mark.parametrize("argv,usage,hint", [
    (["produce", "-t", "x", "--partiton", "3"], "usage: kcodec produce",
     "(did you mean --partition?)"),
    (["topics", "list", "--bootstap", "h:1"], "usage: kcodec topics list",
     "(did you mean --bootstrap?)"),
    (["prodce"], "usage: kcodec ", "(did you mean 'produce'?)"),
    (["topics", "lst"], "usage: kcodec topics", "(did you mean 'list'?)"),
])
def test_misspelt_option_or_command_is_suggested(capsys, argv, usage, hint) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith(usage), err
    assert hint in err


def test_no_suggestion_for_nothing_near(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["produce", "-t", "x", "--zzzzzz"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --zzzzzz" in err
    assert "did you mean" not in err


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
def test_start_imports_no_client(argv) -> None:
    """--version and --help import neither the client nor the protocol tables (what made
    every command take most of a second to start)."""
    code = ("import sys\nfrom kcodec.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('kcodec.client', 'kcodec.protocol', 'kcodec.broker') "
            "if m in sys.modules]\nprint('HEAVY=' + ','.join(heavy))\n")
    p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                       cwd=str(REPO), timeout=60)
    assert p.stdout.splitlines()[-1] == "HEAVY=", p.stdout
