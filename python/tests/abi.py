"""The package refuses a library whose structures are laid out differently (another version):
load_library raises PerseusError(ErrorCode.ENOLIB) naming the structure, instead of passing
wrongly sized structures to C. Also: every failing call raises, with an ErrorCode."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import perseus  # noqa: E402


def main():
    try:
        perseus.order("nope", 4, 8, 0)
    except perseus.PerseusError as e:
        assert e.code == perseus.ErrorCode.EINVAL, e.code
    else:
        raise AssertionError("a bad schedule must raise")
    perseus._lib = None

    class Longer(ctypes.Structure):
        _fields_ = perseus._Opts._fields_ + [("extra", ctypes.c_double)]  # always longer

    perseus._Opts = Longer
    try:
        perseus.load_library()
    except perseus.PerseusError as e:
        assert e.code == perseus.ErrorCode.ENOLIB and "prs_client_opts" in str(e), e
        print("refused:", e)
    else:
        raise AssertionError("a mismatched structure must be refused")


if __name__ == "__main__":
    main()
