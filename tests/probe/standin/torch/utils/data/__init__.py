"""Stand-in torch.utils.data (see dataloader.py)."""

from .dataloader import BatchSampler, DataLoader, Dataset, StandinDataset  # noqa: F401
