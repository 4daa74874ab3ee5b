"""A reader opened on a version 3 file keeps reading after another connection (another
process, in real use) migrates the file to version 4 under it: the reader's rows then hold
payloads, not whole wires, and must still read as the same entries."""

from __future__ import annotations

import shutil
from pathlib import Path

from prism_om.stores.sqlite import SqliteStore

from .test_row_shape import every_view, version_of

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "sqlite" / "store-v3.db"


async def test_a_version_three_reader_reads_rows_migrated_under_it(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    shutil.copyfile(FIXTURE, path)
    async with await SqliteStore.open(path, read_only=True) as reader:
        expected = await every_view(reader)
        async with await SqliteStore.open(path) as writer:  # migrates to version 4
            assert version_of(path) >= 4
            assert await every_view(writer) == expected
        assert await every_view(reader) == expected
