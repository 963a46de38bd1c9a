"""Run with MindSpore installed (not part of the test suite): read every MindRecord set in a
folder with MindSpore's MindDataset and FileReader, and print each set's row count, column
dtypes and last row, so the output for sets we wrote can be diffed against MindSpore's own.
"""
import glob
import os
import sys


def main(folder):
    import mindspore.dataset as ds            # only where MindSpore is installed
    from mindspore.mindrecord import FileReader
    firsts = sorted(glob.glob(os.path.join(folder, "*.mindrecord"))) + \
        sorted(glob.glob(os.path.join(folder, "*.mindrecord0")))
    for first in firsts:
        rows = list(ds.MindDataset(first, shuffle=False).create_dict_iterator(output_numpy=True))
        reader = FileReader(first)
        count = sum(1 for _ in reader.get_next())
        reader.close()
        print(os.path.basename(first), len(rows), count,
              {k: (v.dtype.str, v.shape) for k, v in rows[0].items()})
        print("   ", {k: (v.tolist() if v.size < 8 else v.size) for k, v in rows[-1].items()})


if __name__ == "__main__":
    main(sys.argv[1])
