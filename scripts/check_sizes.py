"""No module over 400 lines, no function over 60: the sizes a reader can hold in mind (scripts/test.sh runs this)."""

import ast
import sys
from pathlib import Path

MAX_MODULE, MAX_FUNCTION = 400, 60


def main(root: str = "imagenet_build") -> int:
    problems = []
    for path in sorted(Path(root).rglob("*.py")):
        lines = path.read_text().count("\n")
        if lines > MAX_MODULE:
            problems.append(f"{path}: {lines} lines (at most {MAX_MODULE})")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION:
                    problems.append(f"{path}:{node.lineno}: {node.name} is {length} lines (at most {MAX_FUNCTION})")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
