"""course_lib's modules import each other in one direction: no import circle, and no private name (`_name`)
taken from another module. Read from the source with ast, imports inside functions included, so a lazy
import cannot hide a circle."""

import ast
from pathlib import Path

COURSE_LIB = Path(__file__).parent.parent / "course_lib"


def course_imports(source: str) -> list[tuple[str, str]]:
    """(the course_lib module imported, the name taken from it) for each import of `source`; the name is
    the module's own for `from course_lib import x` and `import course_lib.x`, and any attribute read
    on it (`x._helper`) is taken too."""
    found, bound = [], {}  # bound: local name -> the course_lib module it stands for
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("course_lib."):
                    module = alias.name.split(".")[1]
                    found.append((module, module))
                    bound[alias.asname or alias.name] = module
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "course_lib":
            for alias in node.names:
                if node.module == "course_lib":  # from course_lib import exercises
                    found.append((alias.name, alias.name))
                    bound[alias.asname or alias.name] = alias.name
                else:
                    found.append((node.module.split(".")[1], alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            found.append((bound[node.value.id], node.attr))
    return found


def import_graph(folder: Path = COURSE_LIB) -> dict[str, list[tuple[str, str]]]:
    return {path.stem: course_imports(path.read_text()) for path in sorted(folder.glob("*.py"))}


def import_circle(graph: dict) -> list[str]:
    """One circle of imports (a -> b -> ... -> a) between different modules, or []."""
    edges = {module: sorted({m for m, _ in imported if m != module}) for module, imported in graph.items()}
    done, path = set(), []

    def visit(module) -> list[str]:
        if module in path:
            return path[path.index(module) :] + [module]
        if module in done:
            return []
        path.append(module)
        for other in edges.get(module, []):
            if circle := visit(other):
                return circle
        path.pop()
        done.add(module)
        return []

    return next((circle for module in edges if (circle := visit(module))), [])


def test_no_import_circle_in_course_lib():
    """Catches: a module that imports one that imports it back (exercises.py and its siblings did, closed
    by an import at the bottom of exercises.py), at module level or inside a function."""
    assert import_circle(import_graph()) == []


def test_no_private_name_is_imported_across_modules():
    """Catches: `from course_lib.exercises import _call` and `workshop._helper`: a helper another module uses
    is public, and lives in the module both can import."""
    taken = [
        f"{module} takes {name} from {other}"
        for module, imported in import_graph().items()
        for other, name in imported
        if other != module and name.startswith("_") and not name.startswith("__")
    ]
    assert taken == []


def test_the_checks_find_what_they_look_for():
    """Catches: a circle finder or a name reader that sees nothing (then both tests above pass on anything)."""
    assert import_circle({"a": [("b", "x")], "b": [("c", "c")], "c": [("a", "a")]}) == ["a", "b", "c", "a"]
    assert import_circle({"a": [("b", "x"), ("a", "a")], "b": []}) == []
    source = "from course_lib.exercises import _call\ndef f():\n    from course_lib import workshop\n    workshop._x\n"
    assert course_imports(source) == [("exercises", "_call"), ("workshop", "workshop"), ("workshop", "_x")]
