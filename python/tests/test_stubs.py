"""The .pyi stubs name what the module has, and the public objects say what
they do (docstrings)."""
import ast
import os

import uccl


def test_stubs_match_module():
    path = os.path.join(os.path.dirname(uccl.__file__), "__init__.pyi")
    tree = ast.parse(open(path).read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            cls = getattr(uccl, node.name)
            for item in node.body:
                name = getattr(item, "name", None) or getattr(getattr(item, "target", None),
                                                              "id", None)
                if name and not name.startswith("__"):
                    assert hasattr(cls, name), "%s.%s" % (node.name, name)
        elif isinstance(node, ast.FunctionDef):
            assert callable(getattr(uccl, node.name))
        elif isinstance(node, ast.AnnAssign):
            assert hasattr(uccl, node.target.id), node.target.id


def test_docstrings():
    for cls in (uccl.Engine, uccl.Conn, uccl.MemoryRegion, uccl.Request, uccl.Comm,
                uccl.PersistentRequest, uccl.PersistentGroup):
        assert cls.__doc__
        for name in dir(cls):
            if not name.startswith("_"):
                assert getattr(cls, name).__doc__, "%s.%s" % (cls.__name__, name)
