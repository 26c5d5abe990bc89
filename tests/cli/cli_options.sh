#!/usr/bin/env bash
# Every option a perseus command accepts (the long options of its getopt table in src/cli/) is
# offered by the bash completion for that command and named in perseus(1), and every option the
# completion offers is one the command accepts. Catches a new option that the completion and the
# manual page forgot (plan's --frontier, --max-points and --threads once were).
set -euo pipefail
src=${PRS_SOURCE_DIR:?}
bin=${PRS_BIN_DIR:?}
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
[[ -f $bin/compile_commands.json ]] || fail "no $bin/compile_commands.json"
/usr/bin/python3 - "$src" "$bin" <<'PY'
import json, re, shlex, subprocess, sys
src, bin = sys.argv[1], sys.argv[2]
# The tables use macros (PRS_CLI_PIPELINE_OPTIONS, ...): read them preprocessed, with the build's
# own compile command for the file.
units = {e["file"]: e for e in json.load(open(f"{bin}/compile_commands.json"))}

def preprocessed(path):
    e = units[f"{src}/src/cli/{path}"]
    args = shlex.split(e["command"])
    keep, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD"):
            continue
        keep.append(a)
    return subprocess.run(keep + ["-E", "-P", "-o", "-"], cwd=e["directory"], capture_output=True,
                          text=True, check=True).stdout

def table(path, start=0):
    """The long option names of the first getopt table (static const struct option NAME[] = ...)
    at or after offset start of path, preprocessed; and where that table ends."""
    text = preprocessed(path)
    m = re.compile(r"static const struct option \w+\[\] = \{(.*?)\}\s*;", re.S).search(text, start)
    if not m:
        raise SystemExit(f"no option table in src/cli/{path}")
    return set(re.findall(r'\{\s*"([a-z][a-z0-9-]*)",', m.group(1))), m.end()

commands = {}
commands["plan export"], end = table("cmd_plan.c")
commands["plan"], _ = table("cmd_plan.c", end)
for cmd, path in [("evaluate", "cmd_evaluate.c"), ("emulate", "cmd_emulate.c"),
                  ("noise", "cmd_noise.c"), ("synth", "cmd_synth.c"), ("demo", "cmd_demo.c"),
                  ("monitor", "cmd_monitor.c"), ("show-env", "cmd_show_env.c"),
                  ("jobs", "cmd_jobs.c"), ("job show", "cmd_jobs.c")]:
    commands[cmd], _ = table(path)
# perseus demo --inference (demo_infer.c) is the same command: its options are demo's too
commands["demo"] |= table("demo_infer.c")[0]
plot, _ = table("cmd_plot.c")

def completion(words):
    """What the installed-style completion offers after 'perseus WORDS --'."""
    line = "perseus " + " ".join(words) + " --"
    script = f"""
source /usr/share/bash-completion/bash_completion 2>/dev/null || _init_completion() {{
  cur=${{COMP_WORDS[COMP_CWORD]}}; prev=${{COMP_WORDS[COMP_CWORD-1]}}; words=("${{COMP_WORDS[@]}}");
  cword=$COMP_CWORD; }}
source {src}/dist/bash-completion/perseus
COMP_WORDS=({line}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMP_LINE="{line}"
COMP_POINT=${{#COMP_LINE}}
_perseus
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    return {w[2:] for w in out.split() if w.startswith("--")}

man = open(f"{src}/man/perseus.1").read().replace("\\-", "-")
bad = []
for cmd, opts in sorted(commands.items()):
    offered = completion(cmd.split())
    for o in sorted(opts - offered - {"help"}):
        bad.append(f"completion of 'perseus {cmd}' lacks --{o}")
    for o in sorted(offered - opts):
        bad.append(f"completion of 'perseus {cmd}' offers --{o}, which the command refuses")
    for o in sorted(opts - {"help"}):
        if not re.search(rf"--{re.escape(o)}\b", man):
            bad.append(f"perseus(1) never names --{o} ('perseus {cmd}')")
offered = set()
for sub in ("frontier", "timeline", "savings"):
    offered |= completion(["plot", sub])
for o in sorted(plot - offered - {"help"}):
    bad.append(f"completion of 'perseus plot' lacks --{o}")
for o in sorted(offered - plot):
    bad.append(f"completion of 'perseus plot' offers --{o}, which the command refuses")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print(f"options of {len(commands) + 1} commands: completion and perseus(1) agree with the sources")
PY
