"""Peak RSS of a worker process is its own, not the high-water mark of the process that started it."""

from __future__ import annotations

import asyncio
import sys

from bench.scenarios.common import REPO, _env

MIB = 2**20
_CHILD = (
    "import sys\n"
    "from bench.scenarios.common import peak_rss_mb\n"
    "block = bytearray(int(sys.argv[1]) * 2**20)\n"
    "for i in range(0, len(block), 4096):\n"
    "    block[i] = 1\n"
    "print(peak_rss_mb())\n"
)


async def _child_peak_mb(alloc_mib: int) -> float:
    """Peak RSS MiB a worker reports, started the way ``run_worker`` starts one."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHILD, str(alloc_mib), cwd=REPO, env=_env(), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    return float(out.decode().strip())


def test_worker_peak_rss_is_its_own() -> None:
    """From a parent holding 400 MiB: an idle worker reports far less than 400 MiB, and one
    that touches 200 MiB reports at least 200 MB (190.7 MiB) more than the idle one (the two
    interpreters' own pages differ by a few hundred kB)."""
    parent = bytearray(400 * MIB)
    for i in range(0, len(parent), 4096):
        parent[i] = 1

    async def both() -> tuple[float, float]:
        return await _child_peak_mb(0), await _child_peak_mb(200)

    idle, busy = asyncio.run(both())
    del parent
    assert 5 < idle < 200
    assert busy - idle >= 200e6 / MIB
