"""LIBSVM benchmark datasets: catalogue, download, verification, fast parsing, a
memory-mappable CSR cache, byte-range shards for MPI ranks (and as Dask arrays), and a
synthetic ``url``."""

from ..inputs import row_blocks
from ._api import convert, dataset_path, dataset_url, download, forget, load, verify
from ._catalog import Catalog, Dataset, read_catalog
from ._dask import from_shards, load_dask
from ._errors import ChecksumError, ContentError, DataHomeError, DownloadError, ParseError
from ._home import data_home
from ._load import convert_svmlight, load_cache, load_svmlight
from ._shards import shard
from ._source import Source
from ._synthetic import GENERATORS, make_url_like
from ._url_like_file import write_url_like

__all__ = [
    "GENERATORS",
    "Catalog",
    "ChecksumError",
    "ContentError",
    "DataHomeError",
    "Dataset",
    "DownloadError",
    "ParseError",
    "Source",
    "convert",
    "convert_svmlight",
    "data_home",
    "dataset_path",
    "dataset_url",
    "download",
    "forget",
    "from_shards",
    "load",
    "load_cache",
    "load_dask",
    "load_svmlight",
    "make_url_like",
    "read_catalog",
    "row_blocks",
    "shard",
    "verify",
    "write_url_like",
]
