"""The parts of ``augnet``'s argument parser that are more than a flag and a help line (:mod:`augnet.cli`).

Nothing here imports torch: reading the arguments stays quick.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import warnings


class SpaceList(argparse.Action):
    """An option of several values (``nargs="+"``), given the way every list option of ``augnet`` is given: one
    value after another, separated by spaces (``--transforms Rotate HorizontalFlip``).

    The comma-separated form (``--transforms Rotate,HorizontalFlip``) is deprecated but still works: the values
    are split at the commas, with a :class:`DeprecationWarning` that gives the space-separated form (printed on
    stderr when ``augnet`` runs as a command).

    ``choices`` are checked after the split, each value on its own (argparse would check ``Rotate,Scale`` as one
    value and refuse it), with argparse's own "invalid choice" message; they are kept as ``names``, not as the
    action's ``choices``, so the help names them itself.
    """

    def __init__(self, option_strings, dest, choices=None, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.names = None if choices is None else tuple(choices)

    def __call__(self, parser, namespace, values, option_string=None):
        given = list(values)
        commas = any("," in value for value in given)
        values = [part.strip() for value in given for part in value.split(",") if part.strip()] if commas else given
        for value in values if self.names is not None else ():  # refused before any deprecation note
            if value not in self.names:
                raise argparse.ArgumentError(
                    self, f"invalid choice: {value!r} (choose from {', '.join(map(repr, self.names))})"
                )
        if commas:
            warnings.warn(
                f"{parser.prog} {option_string} {' '.join(given)}: comma-separated values are deprecated and "
                f"will stop working in a future release; separate them with spaces: {option_string} {' '.join(values)}",
                DeprecationWarning,
                stacklevel=1,
            )
        setattr(namespace, self.dest, values)


OLD_NAMES = {"--batch": "--batch-size"}  # deprecated name: its name now


class NamedAs(argparse.Action):
    """An option with an old name besides its own (``--batch-size``, once ``--batch``): stores the value as
    ``store`` does and, in ``<dest>_flag``, the name it was last given by, so that messages name the flag the user
    typed; each old name given is kept in ``old_names`` for :func:`old_names_used`."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_flag", option_string)
        if option_string in OLD_NAMES and option_string not in getattr(namespace, "old_names", []):
            namespace.old_names = [*getattr(namespace, "old_names", []), option_string]


def old_names_used(args: argparse.Namespace) -> list[str]:
    """One line per deprecated option name given (``augnet bench --batch``), saying the name to use: a
    command-line user sees no DeprecationWarning, so the command prints these on stderr when it runs."""
    return [f"augnet {args.command}: {old} is deprecated and will stop working in a future release; use "
            f"{OLD_NAMES[old]} (the same option)" for old in getattr(args, "old_names", [])]  # fmt: skip


def add_progress(parser: argparse.ArgumentParser, what: str) -> None:
    """``--progress / --no-progress``: ``what`` on stderr, by default only when stderr is a terminal."""
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"show {what} on stderr, or not (default: only when stderr is a terminal; in a log or a pipe each "
        "update of a bar would be a line of its own)",
    )


def show_progress(args: argparse.Namespace) -> bool:
    """The ``progress`` to run with: ``--progress`` / ``--no-progress`` if given, else whether stderr is a
    terminal (a CI log, a pipe or a file gets no bars)."""
    if args.progress is not None:
        return args.progress
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError, OSError):  # no stderr, a stream without isatty, or a closed one
        return False


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parsers of ``augnet``'s commands, by name, in the order of ``augnet --help``."""
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of ``augnet NAME``."""
    return subcommands(parser)[name]


def refuse_unknown(parser: argparse.ArgumentParser, command: str, extra: list[str]) -> None:
    """Exit as argparse does, with the usage of ``augnet COMMAND`` (not the top level's) and, for each misspelt
    option among ``extra``, the options it is close to (not the deprecated names)."""
    own = subcommand(parser, command)
    flags = [flag for action in own._actions for flag in action.option_strings
             if flag.startswith("--") and flag not in OLD_NAMES]  # fmt: skip
    hints = []
    for arg in extra:
        name = arg.split("=", 1)[0]
        close = difflib.get_close_matches(name, flags, n=2, cutoff=0.7) if name.startswith("-") else []
        if close:
            hints.append(f"{name + ': ' if len(extra) > 1 else ''}did you mean {' or '.join(close)}?")
    hint = f" ({'; '.join(hints)})" if hints else ""
    own.error(f"unrecognized arguments: {' '.join(extra)}{hint}")


def refuse_no_command(parser: argparse.ArgumentParser, extra: list[str]) -> None:
    """Exit as argparse does when no command is given: name the commands, and where their options are listed
    (argparse's own line, "the following arguments are required: command", names none of them)."""
    names = list(subcommands(parser))
    unknown = f"unrecognized arguments: {' '.join(extra)}; " if extra else ""
    parser.error(f"{unknown}give a command: {', '.join(names[:-1])} or {names[-1]} ('augnet COMMAND --help' lists "
                 "its options)")  # fmt: skip
