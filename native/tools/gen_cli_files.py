#!/usr/bin/env python3
"""The man page redzone(1) and the bash completion, made at build time from the launcher's own parsers (so
from the same help text `redzone --help` and `redzone run --help` print, whose run flags come from the
option table through rz-options list).

  gen_cli_files.py LAUNCHER_PKG RZ_OPTIONS VERSION DOC_DIR MAN_OUT COMPLETION_OUT
LAUNCHER_PKG holds redzone_cli; DOC_DIR is where the installed docs are (the man page names it)."""
import argparse
import os
import sys


def roff_text(text):
    """Plain text as roff lines shown as they are (inside .nf/.fi)."""
    out = []
    for line in text.rstrip("\n").split("\n"):
        line = line.replace("\\", "\\e").replace("-", "\\-")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out)


def man_page(top, subs, version, doc_dir):
    parts = [f'.TH REDZONE 1 "" "redzone {version}" "User Commands"',
             ".SH NAME",
             "redzone \\- run CUDA programs with red zones (guard bands after every device allocation), find "
             "the allocation a program reads past the end of, or debug it in cuda\\-gdb or gdb",
             ".SH SYNOPSIS",
             ".nf"]
    for name, parser in subs.items():
        parts.append(roff_text(parser.format_usage().replace("usage: ", "").strip()))
    parts += ["redzone \\-\\-help | \\-\\-version", ".fi",
              ".SH DESCRIPTION", ".nf", roff_text(top.format_help()), ".fi"]
    for name, parser in subs.items():
        parts += [f'.SH "REDZONE {name.upper()}"', ".nf", roff_text(parser.format_help()), ".fi"]
    parts += [".SH FILES", ".nf", roff_text(f"{doc_dir}/  the reference (running.md, bisect.md, gdb.md, "
                                            "options.md, report-format.md, frameworks.md, ...)"), ".fi",
              ".SH SEE ALSO", "cuda\\-gdb(1), gdb(1), compute\\-sanitizer(1)", ""]
    return "\n".join(parts)


def value_flags(parser):
    return sorted(s for a in parser._actions if a.option_strings and a.nargs not in (0, "?") for s in a.option_strings)


def all_flags(parser):
    return sorted(s for a in parser._actions for s in a.option_strings)


def completion(top, subs):
    """A bash completion: subcommands, each one's flags, files for flag values, and after `--` a command
    then its arguments as files."""
    cases = []
    for name, parser in subs.items():
        cases.append(f"    {name}) flags=\"{' '.join(all_flags(parser))}\"; valued=\" {' '.join(value_flags(parser))} \";;")
    return f"""# bash completion for redzone (made from its parsers at build time: native/tools/gen_cli_files.py)
_redzone() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} cmd="" i flags valued
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ ${{COMP_WORDS[i]}} == -- ]]; then
            if ((i + 1 == COMP_CWORD)); then COMPREPLY=($(compgen -c -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi
            return 0
        fi
        [[ -z $cmd && ${{COMP_WORDS[i]}} != -* ]] && cmd=${{COMP_WORDS[i]}}
    done
    case $cmd in
    "") COMPREPLY=($(compgen -W "{' '.join(subs)} {' '.join(all_flags(top))}" -- "$cur")); return 0;;
{chr(10).join(cases)}
    *) return 0;;
    esac
    if [[ $valued == *" $prev "* ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$flags --" -- "$cur"))
    fi
    return 0
}}
complete -F _redzone redzone
"""


def main():
    pkg, rz_options, version, doc_dir, man_out, completion_out = sys.argv[1:7]
    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal: a fixed width for the files
    sys.path.insert(0, pkg)
    from redzone_cli import cli, paths
    paths.RZ_OPTIONS, paths.VERSION, paths.DOC_DIR, paths.INSTALLED = rz_options, version, doc_dir, True
    top, subs = cli.build_parser()
    assert isinstance(top, argparse.ArgumentParser)
    for path, text in ((man_out, man_page(top, subs, version, doc_dir)), (completion_out, completion(top, subs))):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
