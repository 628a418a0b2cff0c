"""How the values of a collective travel: as they are, or quantized.

An algorithm hands the values it sends to ``encode``, which gives the message to send;
the sender goes on with what ``decode`` makes of that message, as the receivers do, so
every rank computes with the same numbers.

The rounding of quantized values is drawn from the call's seed and a ``key`` that names
who holds the values: ranks that hold the same partial sum pass the same key and so round
it alike.
"""

import numpy as np

from ._quantize import BUCKET_SIZE, Quantized, dequantize, quantize

_HEADER = np.dtype("<u8")  # the count of values, ahead of a quantized message


class Exact:
    """Values travel unchanged."""

    def dtype(self, value_dtype):
        """The dtype of the messages that carry values of ``value_dtype``."""
        return np.dtype(value_dtype)

    def encode(self, values, key):
        """The message for ``values`` (held by the ranks named by the integers ``key``)."""
        return values

    def decode(self, message, value_dtype):
        """The values of one message."""
        return message

    def decode_blocks(self, messages, counts, value_dtype):
        """The values of messages laid end to end (``counts`` items each), and their counts."""
        return messages, counts


class Quantizing(Exact):
    """Values travel as QSGD codes of ``bits`` bits, one norm per ``bucket_size``."""

    def __init__(self, bits, seed, bucket_size=BUCKET_SIZE):
        self.bits, self.bucket_size = bits, bucket_size
        self.seed = list(seed)

    def dtype(self, value_dtype):
        return np.dtype(np.uint8)

    def encode(self, values, key):
        random = np.random.default_rng([*self.seed, *key])
        quantized = quantize(values, self.bits, bucket_size=self.bucket_size, random_state=random)
        return np.concatenate(
            [
                np.array([values.size], _HEADER).view(np.uint8),
                quantized.norms.view(np.uint8),
                quantized.codes,
            ]
        )

    def decode(self, message, value_dtype):
        if message.size == 0:
            return np.empty(0, value_dtype)
        size = int(message[: _HEADER.itemsize].view(_HEADER)[0])
        value_dtype = np.dtype(value_dtype)
        norms_end = _HEADER.itemsize + -(-size // self.bucket_size) * value_dtype.itemsize
        norms = message[_HEADER.itemsize : norms_end].copy().view(value_dtype)  # aligned
        return dequantize(Quantized(message[norms_end:], norms, size, self.bits, self.bucket_size))

    def decode_blocks(self, messages, counts, value_dtype):
        ends = np.cumsum(counts)
        blocks = [
            self.decode(messages[end - count : end], value_dtype)
            for end, count in zip(ends, counts, strict=True)
        ]
        values = np.concatenate(blocks) if blocks else np.empty(0, value_dtype)
        return values, np.array([block.size for block in blocks], np.int64)


EXACT = Exact()
"""The codec of every call that does not quantize (it holds no state)."""
