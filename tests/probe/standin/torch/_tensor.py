"""Stand-in torch.Tensor and dtypes: only sizes, and the /dev/shm file a
worker's batch lives in until the trainer drops it."""

import os


class dtype(object):
    def __init__(self, name, itemsize):
        self._name = name
        self.itemsize = itemsize

    def __str__(self):
        return "torch." + self._name

    __repr__ = __str__


float32 = dtype("float32", 4)
float16 = dtype("float16", 2)
bfloat16 = dtype("bfloat16", 2)


class Tensor(object):
    """`nbytes` bytes of float32. A batch a worker collated is backed by a
    file in shared memory (`shm_path`), as default_collate allocates it
    there in a worker (torch/utils/data/_utils/collate.py); the file goes
    when the trainer's copy is dropped, as PyTorch frees the segment with
    its last reference. The worker's own copy never removes it."""

    def __init__(self, nbytes, shm_path=None, pinned=False):
        self._nbytes = int(nbytes)
        self.shm_path = shm_path
        self.pinned = pinned
        self._owns = False

    @property
    def nbytes(self):
        return self._nbytes

    def numel(self):
        return self._nbytes // 4

    def element_size(self):
        return 4

    def __getstate__(self):
        return {"_nbytes": self._nbytes, "shm_path": self.shm_path, "pinned": self.pinned}

    def __setstate__(self, state):
        self.__dict__.update(state)
        # Unpickled on the receiving side: that copy is the one alive.
        self._owns = True

    def release(self):
        path, self.shm_path = self.shm_path, None
        if path is not None and self._owns:
            try:
                os.unlink(path)
            except OSError:
                pass

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass
