"""tools/same_tables.py: identical runs pass, one changed byte fails, an added table is listed, not failed."""

import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location("same_tables", Path(__file__).parents[1] / "tools" / "same_tables.py")
same_tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(same_tables)


def write(root: Path, files: dict) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_same_tables(tmp_path, capsys):
    files = {"tables/a.csv": "x,y\n1,2\n", "figures/roc/a.png": "png", "scores/ignored.parquet": "1"}
    before = write(tmp_path / "b", files)
    after = write(tmp_path / "a", {**files, "tables/new.md": "# new\n", "scores/ignored.parquet": "2"})
    assert same_tables.main([str(before), str(after)]) == 0
    assert "2 of 2 files identical; only in the second: tables/new.md" in capsys.readouterr().out
    (after / "tables/a.csv").write_text("x,y\n1,3\n")
    assert same_tables.main([str(before), str(after)]) == 1
    assert "differs: tables/a.csv" in capsys.readouterr().out
    (after / "tables/a.csv").unlink()
    assert same_tables.main([str(before), str(after)]) == 1
    assert same_tables.main([str(tmp_path / "none"), str(after)]) == 2
