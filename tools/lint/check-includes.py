#!/usr/bin/env python3
# The include rules of user/ (docs/architecture.md), checked on every test run:
#  - each room (a folder of user/) includes only the rooms listed for it below,
#    so the rooms form a graph without cycles (checked too);
#  - the analysis rooms never include libbpf, a BPF skeleton or the live rooms
#    (the linker checks the same from the other side: steptrace_analysis does
#    not link libbpf);
#  - no file in user/ is longer than MAX_LINES unless it says why on a line
#    starting with "// long file:", and no function (a definition starting in
#    column 0) is longer than MAX_FUNCTION_LINES unless one of the three lines
#    above it starts with "// long function:".
# Usage: check-includes.py [REPO_ROOT]    exit 0 when every rule holds.
import pathlib
import re
import sys

ANALYSIS = ["util", "decode", "capture", "timeline", "steps", "signals", "attribution", "pipeline", "cli", "export", "profile",
            "multinode"]
LIVE = ["loader", "session", "daemon"]
ALLOWED = {
    "util": [],
    "cli": ["util"],
    "decode": ["util"],
    "capture": ["util", "decode"],
    "timeline": ["util", "decode", "capture"],
    "profile": ["util", "decode", "capture"],
    "steps": ["util", "decode", "capture", "timeline"],
    "signals": ["util", "decode", "capture", "timeline", "steps"],
    "attribution": ["util", "decode", "capture", "timeline", "steps", "signals", "profile"],
    "pipeline": ["util", "decode", "capture", "timeline", "steps", "signals", "attribution", "profile"],
    "export": ["util", "cli", "decode", "capture", "timeline", "steps", "signals", "attribution", "pipeline",
               "profile"],
    "multinode": ["util", "decode", "capture", "timeline", "steps", "signals", "attribution", "pipeline", "profile",
                  "export"],
    "loader": ["util", "cli", "decode", "capture"],
    "symbols": ["util", "loader"],
    "session": ANALYSIS + ["loader", "symbols"],
    "daemon": ANALYSIS + ["loader", "session"],
}
FORBIDDEN_IN_ANALYSIS = re.compile(r'#\s*include\s*[<"](bpf/|libbpf|[^">]*\.skel\.h)')
INCLUDE = re.compile(r'#\s*include\s*"([a-z_]+)/[^"]+"')
MAX_LINES = 500
MAX_FUNCTION_LINES = 120
FUNCTION_START = re.compile(r"^[A-Za-z_][^;]*\)[^;]*\{\s*$")


def long_functions(lines):
    """(first line, length) of each column-0 function definition over the limit."""
    out = []
    i = 0
    while i < len(lines):
        if FUNCTION_START.match(lines[i]) and not lines[i].startswith(("namespace", "struct", "class", "enum")):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("}"):
                j += 1
            length = j - i + 1
            if length > MAX_FUNCTION_LINES and not any(l.startswith("// long function:") for l in lines[max(0, i - 3):i]):
                out.append((i + 1, length))
            i = j
        i += 1
    return out


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    user = root / "user"
    errors = []
    edges = {}
    for f in sorted(user.rglob("*")):
        if f.suffix not in (".h", ".cpp"):
            continue
        rel = f.relative_to(user)
        room = rel.parts[0] if len(rel.parts) > 1 else None  # None: user/main.cpp, the binary
        text = f.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines()
        if len(lines) > MAX_LINES and not any(l.startswith("// long file:") for l in lines):
            errors.append(f"user/{rel}: {len(lines)} lines (over {MAX_LINES}; split it, or say why on a '// long file:' line)")
        for first, length in long_functions(lines):
            errors.append(f"user/{rel}:{first}: a function of {length} lines (over {MAX_FUNCTION_LINES}; split it, or say why on a '// long function:' line above it)")
        if room is None:
            continue
        if room not in ALLOWED:
            errors.append(f"user/{rel}: room '{room}' has no include rule in tools/lint/check-includes.py")
            continue
        for n, line in enumerate(lines, 1):
            if room in ANALYSIS and FORBIDDEN_IN_ANALYSIS.search(line):
                errors.append(f"user/{rel}:{n}: the analysis side includes libbpf or a skeleton: {line.strip()}")
            m = INCLUDE.search(line)
            if not m or m.group(1) == room:
                continue
            dep = m.group(1)
            if not (user / dep).is_dir():
                continue  # a header from elsewhere on the include path
            edges.setdefault(room, set()).add(dep)
            if dep not in ALLOWED[room]:
                errors.append(f"user/{rel}:{n}: {room}/ may not include {dep}/ (allowed: {', '.join(ALLOWED[room]) or 'none'})")
    # No cycles between rooms, whatever the table says.
    state = {}

    def visit(r, path):
        state[r] = 1
        for d in sorted(edges.get(r, ())):
            if state.get(d) == 1:
                errors.append("include cycle between rooms: " + " -> ".join(path + [r, d]))
            elif d not in state:
                visit(d, path + [r])
        state[r] = 2

    for r in sorted(edges):
        if r not in state:
            visit(r, [])
    for e in errors:
        print(e)
    if errors:
        print(f"check-includes: {len(errors)} problem(s)")
        return 1
    print(f"check-includes: {len(edges)} rooms, every include allowed, no cycles, no file over {MAX_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
