"""Stand-in torch.utils.data.dataloader, shaped as
torch/utils/data/dataloader.py is in every release from 1.12 (FACTS.md):
_BaseDataLoaderIter.__next__ (the only __next__ in the module) calls
self._next_data() and counts _num_yielded; _SingleProcessDataLoaderIter
and _MultiProcessingDataLoaderIter inherit it; the iterators carry
_num_workers, _pin_memory, _prefetch_factor, _persistent_workers,
_index_sampler, _dataset, and the multi-process one _workers (real
multiprocessing processes), _pin_memory_thread (when pinning) and
_data_queue.

Workers are real processes that spend each item's `fetch_s` waiting (as on
a disk) and `burn_s` on the CPU, then collate the batch into a file in
shared memory (STANDIN_TORCH_SHM_DIR, default /dev/shm), where it stays
until the trainer drops the batch (or the pin thread copies it out). Where
the modelled release reserves that space up front (PR 161910) a full tmpfs
fails the batch with PyTorch's "unable to allocate shared memory(shm)"
error; before, the worker writes into a sparse file and dies of SIGBUS,
which the trainer reports as "DataLoader worker (pid N) is killed by
signal: Bus error." The check for dead workers runs in __next__ while it
waits (real PyTorch's runs in a SIGCHLD handler, in the main thread,
wherever it is); like PyTorch's it uses waitid(WNOWAIT), which does not
reap.

The probe must never call is_alive(), exitcode, join() and the like on a
worker: they wait on the process, which reaps a dead one. The stand-in
traps those calls when they come from the probe's own code.
"""

import itertools
import mmap
import multiprocessing
import multiprocessing.process
import os
import queue
import signal
import sys
import threading
import time
import traceback

from ... import _standin
from ..._tensor import Tensor

_PROBE_FILE = "gpuscope_probe.py"
_serial = itertools.count()


def _trap(name, original):
    """Wraps a multiprocessing.Process method so that a call from the probe
    is a violation."""

    def method(self, *args, **kwargs):
        if sys._getframe(1).f_code.co_filename.endswith(_PROBE_FILE):
            _standin.violation("Process.%s" % name)
        return original(self, *args, **kwargs)

    method.__name__ = name
    return method


def _install_traps():
    base = multiprocessing.process.BaseProcess
    if getattr(base, "_standin_trapped", False):
        return
    for name in ("is_alive", "join", "terminate", "kill", "close"):
        setattr(base, name, _trap(name, getattr(base, name)))
    exitcode = base.exitcode.fget

    def trapped_exitcode(self):
        if sys._getframe(1).f_code.co_filename.endswith(_PROBE_FILE):
            _standin.violation("Process.exitcode")
        return exitcode(self)

    base.exitcode = property(trapped_exitcode)
    base._standin_trapped = True


_install_traps()


def _named(name):
    """torch.multiprocessing._set_thread_name (2.5+): the calling thread's
    name as /proc shows it (comm)."""
    if not _standin.has(_standin.script(), "named_data_threads"):
        return
    try:
        with open("/proc/thread-self/comm", "w") as handle:
            handle.write(name)
    except OSError:
        pass


def _shm_dir():
    return os.environ.get("STANDIN_TORCH_SHM_DIR") or "/dev/shm"


def _burn(seconds):
    deadline = time.thread_time() + seconds
    while time.thread_time() < deadline:
        pass


class Dataset(object):
    pass


class StandinDataset(Dataset):
    """`length` items of `item_bytes` each; making one waits `fetch_s` (a
    disk) and burns `burn_s` of CPU; item `fail_at` raises KeyError."""

    def __init__(self, length=100000, item_bytes=4096, fetch_s=0.0, burn_s=0.0, fail_at=None):
        self.length = length
        self.item_bytes = item_bytes
        self.fetch_s = fetch_s
        self.burn_s = burn_s
        self.fail_at = fail_at

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        if self.fetch_s:
            time.sleep(self.fetch_s)
        if self.burn_s:
            _burn(self.burn_s)
        if index == self.fail_at:
            raise KeyError(index)
        return Tensor(self.item_bytes)


class BatchSampler(object):
    def __init__(self, length, batch_size, drop_last=False):
        self.length = length
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for index in range(self.length):
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        whole, rest = divmod(self.length, self.batch_size)
        return whole + (1 if rest and not self.drop_last else 0)


def _collate(items):
    """default_collate outside a worker: one tensor in ordinary memory."""
    return Tensor(sum(item.nbytes for item in items))


def _collate_into_shm(items):
    """default_collate in a worker: the stacked batch allocated in shared
    memory (torch/utils/data/_utils/collate.py, _new_shared)."""
    size = max(sum(item.nbytes for item in items), 1)
    path = os.path.join(_shm_dir(), "torch_standin_%d_%d" % (os.getpid(), next(_serial)))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        if _standin.has(_standin.script(), "shm_reserve"):
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as exc:
                os.unlink(path)
                raise RuntimeError("unable to allocate shared memory(shm) for file <%s>: %s (%d)"
                                   % (path, os.strerror(exc.errno), exc.errno))
        else:
            # A sparse file, its pages touched one by one: a full tmpfs
            # answers the touch with SIGBUS, and the worker dies of it.
            os.ftruncate(fd, size)
            with mmap.mmap(fd, size) as view:
                for offset in range(0, size, mmap.PAGESIZE):
                    view[offset] = 1
    finally:
        os.close(fd)
    return Tensor(size, shm_path=path)


class _ExceptionWrapper(object):
    """torch/_utils.py, ExceptionWrapper: an exception a worker caught,
    re-raised in the trainer with the worker's traceback in its message."""

    def __init__(self, exc_type, where):
        self.exc_type = exc_type
        self.exc_msg = "".join(traceback.format_exception(*sys.exc_info()))
        self.where = where

    def reraise(self):
        msg = "Caught %s %s.\nOriginal %s" % (self.exc_type.__name__, self.where, self.exc_msg)
        raise self.exc_type(msg)


def _worker_loop(dataset, index_queue, data_queue, done_event, worker_id, parent):
    _named("pt_data_worker")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            task = index_queue.get(timeout=0.2)
        except queue.Empty:
            if os.getppid() != parent or done_event.is_set():
                return
            continue
        if task is None:
            return
        index, indices = task
        try:
            data = _collate_into_shm([dataset[i] for i in indices])
        except Exception as exc:
            data = _ExceptionWrapper(type(exc), "in DataLoader worker process %d" % worker_id)
        data_queue.put((index, data))
        del data


def _pin_memory_loop(in_queue, out_queue, done_event):
    """torch/utils/data/_utils/pin_memory.py: batches copied out of shared
    memory into pinned memory; the shared copy is dropped."""
    _named("pt_data_pin")
    while not done_event.is_set():
        try:
            index, data = in_queue.get(timeout=0.1)
        except queue.Empty:
            continue
        if isinstance(data, Tensor):
            pinned = Tensor(data.nbytes, pinned=True)
            data.release()
            data = pinned
        while not done_event.is_set():
            try:
                out_queue.put((index, data), timeout=0.1)
                break
            except queue.Full:
                continue


class DataLoader(object):
    def __init__(self, dataset, batch_size=1, num_workers=0, pin_memory=False, drop_last=False, timeout=0,
                 prefetch_factor=None, persistent_workers=False, multiprocessing_context=None):
        # 2.0+: prefetch_factor only with workers, 2 by default.
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        self.dataset = dataset
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.multiprocessing_context = multiprocessing_context
        self._index_sampler = BatchSampler(len(dataset), batch_size, drop_last)
        self._iterator = None

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self):
        # DataLoader.__iter__: persistent workers keep one iterator, reset
        # at each epoch.
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def __len__(self):
        return len(self._index_sampler)


class _BaseDataLoaderIter(object):
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._pin_memory = loader.pin_memory
        self._persistent_workers = loader.persistent_workers
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._profile_name = "enumerate(DataLoader)#%s.__next__" % self.__class__.__name__

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter=False):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0

    def _next_index(self):
        return next(self._sampler_iter)

    def _next_data(self):
        raise NotImplementedError

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        return data

    def __len__(self):
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError("{} cannot be pickled", self.__class__.__name__)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def _next_data(self):
        index = self._next_index()
        data = _collate([self._dataset[i] for i in index])
        if self._pin_memory:
            data = Tensor(data.nbytes, pinned=True)
        return data


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._prefetch_factor = loader.prefetch_factor
        context = loader.multiprocessing_context or multiprocessing.get_context()
        self._worker_result_queue = context.Queue()
        self._workers_done_event = context.Event()
        self._shutdown = False
        self._index_queues = []
        self._workers = []
        for worker_id in range(self._num_workers):
            index_queue = context.Queue()
            index_queue.cancel_join_thread()
            worker = context.Process(target=_worker_loop, args=(
                self._dataset, index_queue, self._worker_result_queue, self._workers_done_event, worker_id,
                os.getpid()))
            worker.daemon = True
            worker.start()
            self._index_queues.append(index_queue)
            self._workers.append(worker)
        if self._pin_memory:
            self._pin_memory_thread_done_event = threading.Event()
            self._data_queue = queue.Queue()
            thread = threading.Thread(target=_pin_memory_loop, args=(
                self._worker_result_queue, self._data_queue, self._pin_memory_thread_done_event))
            thread.daemon = True
            thread.start()
            self._pin_memory_thread = thread
        else:
            self._data_queue = self._worker_result_queue
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter=False):
        super()._reset(loader, first_iter)
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info = {}
        self._tasks_outstanding = 0
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self):
        try:
            index = self._next_index()
        except StopIteration:
            return
        worker = next(self._worker_queue_idx_cycle)
        self._index_queues[worker].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _check_workers(self):
        # What PyTorch's SIGCHLD handler does (torch/csrc/DataLoader.cpp,
        # _error_if_any_worker_fails): waitid with WNOWAIT, no reaping.
        for worker in self._workers:
            try:
                info = os.waitid(os.P_PID, worker.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                continue
            if info is None:
                continue
            if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
                message = "DataLoader worker (pid %d) is killed by signal: %s. " % (
                    worker.pid, signal.strsignal(info.si_status))
                if info.si_status == signal.SIGBUS:
                    message += ("It is possible that dataloader's workers are out of shared memory. "
                                "Please try to raise your shared memory limit.")
                raise RuntimeError(message)
            if info.si_code == os.CLD_EXITED and info.si_status != 0 and not self._shutdown:
                raise RuntimeError(
                    "DataLoader worker (pid %d) exited unexpectedly with exit code %d. Details are lost due to "
                    "multiprocessing. Rerunning with num_workers=0 may give better error trace."
                    % (worker.pid, info.si_status))

    def _get_data(self):
        while True:
            try:
                return self._data_queue.get(timeout=0.05)
            except queue.Empty:
                self._check_workers()

    def _next_data(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2:
                    del self._task_info[self._rcvd_idx]
                    self._rcvd_idx += 1
                    return self._process_data(info[1])
                break
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            index, data = self._get_data()
            self._tasks_outstanding -= 1
            if index != self._rcvd_idx:
                self._task_info[index] += (data,)
                continue
            del self._task_info[index]
            self._rcvd_idx += 1
            return self._process_data(data)

    def _process_data(self, data):
        self._try_put_index()
        if isinstance(data, _ExceptionWrapper):
            data.reraise()
        return data

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        try:
            if getattr(self, "_pin_memory_thread", None) is not None:
                self._pin_memory_thread_done_event.set()
                self._pin_memory_thread.join(2)
            self._workers_done_event.set()
            for index_queue in self._index_queues:
                try:
                    index_queue.put(None)
                except (OSError, ValueError):
                    pass
            for worker in self._workers:
                worker.join(2)
                if worker.is_alive():
                    worker.terminate()
                    worker.join(1)
            # Batches nobody took: their shared memory goes too.
            for queue_ in (self._worker_result_queue, self._data_queue):
                while True:
                    try:
                        _, data = queue_.get(timeout=0.05)
                    except (queue.Empty, OSError, ValueError, EOFError):
                        break
                    if isinstance(data, Tensor):
                        data.release()
        except Exception:
            pass

    def __del__(self):
        self._shutdown_workers()
