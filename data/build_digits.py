"""Rebuild data/digits.npz from scikit-learn's bundled 8x8 digits, byte for byte.

    python data/build_digits.py            # rewrites data/digits.npz next to this script
    python data/build_digits.py OUT.npz    # writes somewhere else (the tests compare the bytes)

The file is an ordinary ``.npz`` (``numpy.load`` reads it), written by hand so that
rebuilding it gives identical bytes: ``numpy.savez_compressed`` stamps the current time
into every zip entry, and a compressed stream could change with the zlib version, so
each entry here carries a fixed 1980-01-01 timestamp and is stored uncompressed
(the whole file is about 135 KB).
See data/README.md for what the arrays hold.
"""
from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

SPLIT_SEED = 0
NUM_VAL = 360
FIXED_TIME = (1980, 1, 1, 0, 0, 0)
DEFAULT_PATH = Path(__file__).resolve().parent / "digits.npz"


def digits_arrays() -> dict[str, np.ndarray]:
    """The arrays stored in digits.npz, in file order."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = bunch.images
    if not np.array_equal(images, np.round(images)) or images.min() < 0 or images.max() > 16:
        raise ValueError("scikit-learn's digits are expected to be whole numbers 0..16")
    images = images.astype(np.uint8)
    labels = bunch.target.astype(np.uint8)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    val_index = np.sort(order[:NUM_VAL]).astype(np.int64)
    train_index = np.sort(order[NUM_VAL:]).astype(np.int64)
    return {"images": images, "labels": labels, "train_index": train_index, "val_index": val_index}


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` as an uncompressed .npz whose bytes depend only on the arrays."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            npy_format.write_array(buffer, np.ascontiguousarray(array), version=(1, 0), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            info.create_system = 3
            archive.writestr(info, buffer.getvalue())


def main(argv: list[str]) -> None:
    target = Path(argv[1]) if len(argv) > 1 else DEFAULT_PATH
    write_npz(target, digits_arrays())
    print(f"wrote {target}")


if __name__ == "__main__":
    main(sys.argv)
