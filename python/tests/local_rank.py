"""perseus.local_rank(): the launchers' variables for the rank's index on its node, in the C
library's order (LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK), and a bad value raises
PerseusError naming its variable."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import perseus  # noqa: E402

VARS = ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK")


def main():
    for v in VARS:
        os.environ.pop(v, None)
    index, how = perseus.local_rank()
    assert index == 0 and all(v in how for v in VARS), (index, how)
    os.environ["OMPI_COMM_WORLD_LOCAL_RANK"] = "6"
    assert perseus.local_rank() == (6, "OMPI_COMM_WORLD_LOCAL_RANK=6"), perseus.local_rank()
    os.environ["SLURM_LOCALID"] = "3"
    assert perseus.local_rank() == (3, "SLURM_LOCALID=3"), perseus.local_rank()
    os.environ["LOCAL_RANK"] = "1"
    assert perseus.local_rank() == (1, "LOCAL_RANK=1"), perseus.local_rank()
    del os.environ["LOCAL_RANK"]
    os.environ["SLURM_LOCALID"] = "-1"
    try:
        perseus.local_rank()
    except perseus.PerseusError as e:
        assert e.code == perseus.ErrorCode.EINVAL and "SLURM_LOCALID='-1'" in str(e), e
        print("refused:", e)
    else:
        raise AssertionError("a bad SLURM_LOCALID must raise")
    print("local ranks: ok")


if __name__ == "__main__":
    main()
